// BLEU as sacreBLEU 2.x: hand-checked cases (arithmetic in the comments) and a comparison with an
// independent Python implementation (tests/golden/gen/bleu.py, Python's `re` with the mteval-v13a
// patterns) on a few hundred random sentence pairs built to hit the tokenizer's rules.
#include <gtest/gtest.h>

#include <cmath>

#include "attn/attn.h"
#include "attn/core/rng.h"
#include "attn/text/bleu.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using namespace attn::text;
using test::torch_ref;

namespace {

std::string joined(const std::string& line) { return tokenize_13a(line); }

}  // namespace

TEST(Tokenize13a, PunctuationNumbersHyphensEntities) {
  // Symbols are split off; "," and "." only when not between digits.
  EXPECT_EQ(joined("Hello, world!"), "Hello , world !");
  EXPECT_EQ(joined("The end."), "The end .");
  EXPECT_EQ(joined("a.b"), "a . b");
  // Numbers keep their separators; "$" is a symbol.
  EXPECT_EQ(joined("It costs $1,000.50 today."), "It costs $ 1,000.50 today .");
  // " .5": the space before "." is a non-digit, so the period splits off; "5." at the end too.
  EXPECT_EQ(joined(".5 and 5."), ". 5 and 5 .");
  // A dash splits only after a digit; hyphenated words stay whole.
  EXPECT_EQ(joined("3.5-4.2 km"), "3.5 - 4.2 km");
  EXPECT_EQ(joined("well-known 2-3 state-of-the-art"), "well-known 2 - 3 state-of-the-art");
  // HTML entities are unescaped first, then the quote / ampersand are split off.
  EXPECT_EQ(joined("&quot;Yes&quot; &amp; no"), "\" Yes \" & no");
  EXPECT_EQ(joined("&lt;b&gt;"), "< b >");
  EXPECT_EQ(joined("&amp;quot;"), "& quot ;");   // sequential replaces: &amp;quot; -> &quot;, not "
  // Apostrophes are not symbols; <skipped> disappears; "-\n" joins; Unicode spaces separate.
  EXPECT_EQ(joined("it's <skipped> ok"), "it's ok");
  EXPECT_EQ(joined("x-\ny"), "xy");
  EXPECT_EQ(joined("a\xc2\xa0" "b\xe3\x80\x80" "c"), "a b c");   // U+00A0, U+3000
  // Non-ASCII punctuation is not in the 13a symbol class.
  EXPECT_EQ(joined("\xc2\xbfQu\xc3\xa9 tal? \xc2\xa1" "Bien!"), "\xc2\xbfQu\xc3\xa9 tal ? \xc2\xa1" "Bien !");
  EXPECT_EQ(joined("caf\xc3\xa9."), "caf\xc3\xa9 .");
  EXPECT_EQ(joined("   "), "");
  EXPECT_EQ(tokens_13a("(a+b)").size(), 5u);
}

TEST(Bleu, PerfectHypothesisIs100) {
  // "The cat sat on the mat ." is 7 tokens: counts = totals = 7/6/5/4, BP 1.
  BleuScore s = corpus_bleu({"The cat sat on the mat."}, std::vector<std::string>{"The cat sat on the mat."});
  EXPECT_DOUBLE_EQ(s.score, 100.0);
  EXPECT_EQ(s.counts, (std::array<int64_t, 4>{7, 6, 5, 4}));
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{7, 6, 5, 4}));
  EXPECT_EQ(s.format(), "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 7 ref_len = 7)");
}

TEST(Bleu, EmptyHypothesisIsZero) {
  // sys_len 0 < ref_len 2: BP 0; no matches: BLEU 0 with all precisions 0.
  BleuScore s = corpus_bleu({""}, std::vector<std::string>{"the cat"});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.bp, 0.0);
  EXPECT_EQ(s.format(), "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 2)");
}

TEST(Bleu, BrevityPenalty) {
  // 6 of 8 reference tokens, all n-grams correct (6/5/4/3): BP = exp(1 - 8/6) = exp(-1/3) = 0.71653.
  BleuScore s = corpus_bleu({"a b c d e f"}, std::vector<std::string>{"a b c d e f g h"});
  EXPECT_NEAR(s.bp, std::exp(-1.0 / 3.0), 1e-15);
  EXPECT_NEAR(s.score, 100.0 * std::exp(-1.0 / 3.0), 1e-12);
  EXPECT_EQ(s.format(), "BLEU = 71.65 100.0/100.0/100.0/100.0 (BP = 0.717 ratio = 0.750 hyp_len = 6 ref_len = 8)");
}

TEST(Bleu, ClippingAndExpSmoothing) {
  // "the the the the" vs "the cat": "the" occurs 4 times but once in the reference -> 1/4.
  // Bigrams 0/3, trigrams 0/2, 4-grams 0/1: exp smoothing gives 100/(2*3), 100/(4*2), 100/(8*1).
  // BLEU = (25 * 16.667 * 12.5 * 12.5)^(1/4) = 15.97 (BP 1: hyp 4 >= ref 2).
  BleuScore s = corpus_bleu({"the the the the"}, std::vector<std::string>{"the cat"});
  EXPECT_EQ(s.counts, (std::array<int64_t, 4>{1, 0, 0, 0}));
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{4, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(s.precisions[0], 25.0);
  EXPECT_DOUBLE_EQ(s.precisions[1], 100.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.precisions[2], 12.5);
  EXPECT_DOUBLE_EQ(s.precisions[3], 12.5);
  EXPECT_NEAR(s.score, std::pow(25.0 * (100.0 / 6.0) * 12.5 * 12.5, 0.25), 1e-12);
  EXPECT_EQ(s.format(), "BLEU = 15.97 25.0/16.7/12.5/12.5 (BP = 1.000 ratio = 2.000 hyp_len = 4 ref_len = 2)");
}

TEST(Bleu, MultiSentenceCorpusByHand) {
  // Segment 1: "the cat sat on the mat" vs "the cat is on the mat"
  //   1-grams 5/6 (all but "sat"), 2-grams 3/5 (the cat, on the, the mat), 3-grams 1/4 (on the mat),
  //   4-grams 0/3; lengths 6 / 6.
  // Segment 2: "a dog runs" vs "a dog runs fast": 3/3, 2/2, 1/1, 0/0; lengths 3 / 4.
  // Corpus: counts 8/5/2/0, totals 9/7/5/3, hyp 9, ref 10 -> BP = exp(1 - 10/9) = 0.89484;
  // p = 88.889, 71.429, 40.0, 100/(2*3) = 16.667 (exp smoothing);
  // BLEU = 0.89484 * (88.889 * 71.429 * 40 * 16.667)^(1/4) = 40.588.
  BleuScore s = corpus_bleu({"the cat sat on the mat", "a dog runs"},
                            std::vector<std::string>{"the cat is on the mat", "a dog runs fast"});
  EXPECT_EQ(s.counts, (std::array<int64_t, 4>{8, 5, 2, 0}));
  EXPECT_EQ(s.totals, (std::array<int64_t, 4>{9, 7, 5, 3}));
  EXPECT_EQ(s.sys_len, 9);
  EXPECT_EQ(s.ref_len, 10);
  const double expect = std::exp(-1.0 / 9.0) * std::pow((800.0 / 9) * (500.0 / 7) * 40.0 * (100.0 / 6), 0.25);
  EXPECT_NEAR(s.score, expect, 1e-12);
  EXPECT_NEAR(s.score, 40.5884, 1e-4);
  EXPECT_EQ(s.format(), "BLEU = 40.59 88.9/71.4/40.0/16.7 (BP = 0.895 ratio = 0.900 hyp_len = 9 ref_len = 10)");
}

TEST(Bleu, MultipleReferencesAndEffectiveOrder) {
  // "the the cat" vs {"the cat", "the the dog"}: "the" clipped by max(1, 2) = 2 -> 3/3; bigrams
  // "the the" (ref 2) and "the cat" (ref 1) -> 2/2; trigram 0/1 -> 100/(2*1) = 50; no 4-gram: the
  // corpus score stops at order 4 with precision 0 -> BLEU 0. Reference length: |3-2| = 1 vs
  // |3-3| = 0 -> 3. Sentence BLEU uses the effective order 3: (100 * 100 * 50)^(1/3) = 79.37.
  const std::vector<std::vector<std::string>> refs{{"the cat"}, {"the the dog"}};
  BleuScore c = corpus_bleu({"the the cat"}, refs);
  EXPECT_EQ(c.counts, (std::array<int64_t, 4>{3, 2, 0, 0}));
  EXPECT_EQ(c.totals, (std::array<int64_t, 4>{3, 2, 1, 0}));
  EXPECT_EQ(c.score, 0.0);
  EXPECT_EQ(c.format(), "BLEU = 0.00 100.0/100.0/50.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 3 ref_len = 3)");
  BleuScore s = sentence_bleu("the the cat", {"the cat", "the the dog"});
  EXPECT_NEAR(s.score, std::cbrt(100.0 * 100.0 * 50.0), 1e-12);
}

TEST(Bleu, ClosestReferenceLengthAndEmptyReferences) {
  // Hypothesis 3 tokens, references 2 and 4: a tie, the shorter wins -> ref_len 2, BP 1.
  BleuScore t = corpus_bleu({"a b c"}, std::vector<std::vector<std::string>>{{"a b"}, {"a b c d"}});
  EXPECT_EQ(t.ref_len, 2);
  // An empty reference is "no reference in this stream": were it counted (length 0), it would tie
  // with the 8-token one at |4 - 0| = |4 - 8| and win; ignored, ref_len 8 and BP = exp(1 - 2).
  BleuScore s = corpus_bleu({"a b c d"}, std::vector<std::vector<std::string>>{{"a b c d e f g h"}, {""}});
  EXPECT_EQ(s.ref_len, 8);
  EXPECT_NEAR(s.score, 100.0 * std::exp(-1.0), 1e-12);
  EXPECT_EQ(error_of([] { corpus_bleu({"a"}, std::vector<std::string>{""}); }),
            "corpus_bleu: segment 0 has no reference (every stream's is empty)");
  EXPECT_EQ(error_of([] { corpus_bleu({"a", "b"}, std::vector<std::string>{"a"}); }),
            "corpus_bleu: expected 2 references (one per hypothesis) in reference stream 0, got 1");
  EXPECT_EQ(error_of([] { sentence_bleu("a", {}); }),
            "sentence_bleu: expected at least one non-empty reference, got 0 empty ones");
}

TEST(Bleu, TrailingWhitespaceAndCase) {
  // Segments are rstrip()ed; BLEU is case-sensitive ("The" != "the": 3/4 unigrams).
  EXPECT_DOUBLE_EQ(corpus_bleu({"a b c d \n"}, std::vector<std::string>{"a b c d"}).score, 100.0);
  BleuScore s = corpus_bleu({"The b c d"}, std::vector<std::string>{"the b c d"});
  EXPECT_EQ(s.counts[0], 3);
}

namespace {

// Random text over pieces chosen to exercise every 13a rule, joined by space, nothing, or an
// occasional newline / non-breaking space.
std::string random_sentence(Generator& g, int64_t max_words) {
  static const std::vector<std::string> pieces = {
      "the", "The", "cat", "dog", "a", "runs", "sat", "on", "mat", "3", "1,000", "2.5", "-", "--", "5-6",
      "state-of-the-art", "it's", "&quot;", "&amp;", "&lt;", "&gt;", ".", ",", "!", "?", "(", ")", "\"", "$",
      "%", "e.g.", "U.S.", "...", "<skipped>", "/", "@", "#", "{x}", "[y]", "^", "_", "`", "~", "|", ";", ":",
      "ni\xc3\xb1o", "caf\xc3\xa9", "\xc2\xbf", "\xc2\xa1", "\xe2\x96\x81word", "10.", ".5", ",7", "x,y", "8-",
      "'", "+", "=", "*"};
  const int64_t n = g.randint(max_words + 1);
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      const int64_t sep = g.randint(20);
      s += sep < 14 ? " " : sep < 18 ? "" : sep == 18 ? "\n" : "\xc2\xa0";
    }
    s += pieces[size_t(g.randint(int64_t(pieces.size())))];
  }
  if (g.randint(4) == 0) s += "  ";
  return s;
}

// A hypothesis close to the reference: words dropped, repeated or replaced.
std::string perturb(Generator& g, const std::string& ref) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : ref) {
    if (c == ' ') {
      words.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  words.push_back(cur);
  std::string out;
  for (const auto& w : words) {
    const int64_t r = g.randint(10);
    if (r == 0) continue;
    std::string piece = r == 1 ? random_sentence(g, 1) : r == 2 ? w + " " + w : w;
    out += out.empty() ? piece : " " + piece;
  }
  return out;
}

}  // namespace

TEST(Bleu, MatchesIndependentPythonOnRandomPairs) {
  Generator g(2024);
  const int64_t n = 300;
  std::vector<std::string> hyps, ref_a, ref_b;
  for (int64_t i = 0; i < n; ++i) {
    ref_a.push_back(random_sentence(g, 14));
    if (ref_a.back().empty()) ref_a.back() = "x";
    hyps.push_back(g.randint(8) == 0 ? random_sentence(g, 10) : perturb(g, ref_a.back()));
    ref_b.push_back(g.randint(3) == 0 ? std::string() : perturb(g, ref_a.back()));
  }
  for (int streams = 1; streams <= 2; ++streams) {
    std::vector<std::vector<std::string>> refs{ref_a};
    if (streams == 2) refs.push_back(ref_b);
    auto ref = torch_ref("bleu.corpus", {}, {{"hyps", hyps}, {"refs", refs}});
    const auto expect_vec = [&](const BleuScore& s, const Tensor& row, const std::string& what) {
      const std::vector<double> v = row.to_vector<double>();
      EXPECT_NEAR(s.score, v[0], 1e-9) << what;
      EXPECT_NEAR(s.bp, v[1], 1e-12) << what;
      EXPECT_EQ(s.sys_len, int64_t(v[2])) << what;
      EXPECT_EQ(s.ref_len, int64_t(v[3])) << what;
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(s.counts[k], int64_t(v[4 + k])) << what << " order " << k + 1;
        EXPECT_EQ(s.totals[k], int64_t(v[8 + k])) << what << " order " << k + 1;
        EXPECT_NEAR(s.precisions[k], v[12 + k], 1e-9) << what << " order " << k + 1;
      }
    };
    BleuScore c = corpus_bleu(hyps, refs);
    expect_vec(c, ref.at("corpus"), "corpus, streams " + std::to_string(streams));
    EXPECT_GT(c.score, 5.0);   // the pairs overlap: a meaningful score, not the 0 of a broken match
    const std::vector<double> ntok = ref.at("ntok").to_vector<double>();
    for (int64_t i = 0; i < n; ++i) {
      std::vector<std::string> seg_refs;
      for (const auto& st : refs) seg_refs.push_back(st[size_t(i)]);
      ASSERT_EQ(int64_t(tokens_13a(hyps[size_t(i)]).size()), int64_t(ntok[size_t(i)]))
          << "hyp " << i << " '" << hyps[size_t(i)] << "' -> '" << tokenize_13a(hyps[size_t(i)]) << "'";
      expect_vec(sentence_bleu(hyps[size_t(i)], seg_refs), ref.at("sentences").select(0, i),
                 "sentence " + std::to_string(i) + " hyp '" + hyps[size_t(i)] + "'");
    }
  }
}
