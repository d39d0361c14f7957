// Translator (infer/translate.h) on an untrained Transformer: a sentence's translation does not
// depend on the batch it is translated in (greedy and beam search, several length penalties), and
// the length cap of each sentence is its own (about twice its source), whatever its batch holds.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/infer/translate.h"
#include "attn/models/transformer.h"
#include "attn/text/tokenizer.h"
#include "errors.h"

using namespace attn;

namespace {

const std::u32string kAlphabet = U"abcdefghijklmnop";

// Random weights (seeded), except that the output rows of pad, unk and bos are zero, so that the
// model ends some outputs at eos and runs others to the cap.
infer::Translator random_translator(uint64_t seed) {
  Generator g(seed);
  auto m = std::make_shared<models::TransformerSeq2Seq>(
      models::TransformerSeq2SeqConfig::from_json({{"vocab_size", int64_t(kAlphabet.size()) + 4}, {"d_model", 16},
                                                   {"nhead", 2}, {"layers", 1}, {"d_ff", 32}, {"max_length", 64},
                                                   {"tie_output", false}}),
      g);
  {
    NoGradGuard ng;
    m->output_proj->weight.slice(0, 0, 3).zero_();
  }
  m->eval();
  return infer::Translator(m, std::make_unique<text::CharTokenizer>(kAlphabet), nlohmann::json::object());
}

// Sentences of 1 to 16 characters, two of most lengths, in no particular order.
std::vector<std::string> sentences() {
  std::vector<std::string> s;
  Generator g(3);
  const std::vector<float> u = rand({64}, g).to_vector<float>();
  for (size_t i = 0; i < 24; ++i) {
    const size_t len = 1 + (i * 7) % 16;
    std::string t;
    for (size_t k = 0; k < len; ++k) t += char('a' + int(u[(i * 5 + k) % u.size()] * 16));
    s.push_back(t);
  }
  return s;
}

}  // namespace

// `attn translate --batch 4` and `--batch 64` once gave one sentence different translations: the
// beam search of a batch ran to the longest source's cap and the shorter sentences' results were cut
// to their own caps afterwards, which is not the search with their own cap.
TEST(Translator, ASentencesTranslationDoesNotDependOnItsBatch) {
  const infer::Translator t = random_translator(7);
  const std::vector<std::string> src = sentences();
  int64_t checked = 0, at_cap = 0, differ_from_greedy = 0;
  for (int64_t beam : {1, 4}) {
    for (double alpha : {0.0, 0.6, 2.0}) {
      if (beam == 1 && alpha != 0.0) continue;   // greedy has no length penalty
      const std::vector<std::string> all = t.translate(src, beam, alpha, 0, /*batch=*/64);
      const std::vector<std::string> fours = t.translate(src, beam, alpha, 0, /*batch=*/4);
      ASSERT_EQ(all.size(), src.size());
      for (size_t i = 0; i < src.size(); ++i) {
        const std::vector<std::string> alone = t.translate({src[i]}, beam, alpha, 0, /*batch=*/1);
        EXPECT_EQ(all[i], alone[0]) << "beam " << beam << ", alpha " << alpha << ", sentence " << i << " '" << src[i]
                                    << "': in a batch of 64 vs alone";
        EXPECT_EQ(fours[i], alone[0]) << "beam " << beam << ", alpha " << alpha << ", sentence " << i << " '"
                                      << src[i] << "': in batches of 4 vs alone";
        // Each sentence's own cap: about twice its source (eos included in the count).
        const size_t cap = 2 * src[i].size() + 10, tokens = t.tokenizer().encode(alone[0]).size();
        EXPECT_LE(tokens, cap) << "sentence " << i;
        at_cap += tokens == cap;
        ++checked;
      }
      if (beam > 1) {
        const std::vector<std::string> greedy = t.translate(src, 1, 0.0, 0, 64);
        for (size_t i = 0; i < src.size(); ++i) differ_from_greedy += greedy[i] != all[i];
      }
    }
  }
  std::printf("  %lld translations, %lld at their cap, %lld beam results differ from greedy\n", (long long)checked,
              (long long)at_cap, (long long)differ_from_greedy);
  EXPECT_GT(at_cap, 0) << "no translation reached its cap: the test does not exercise the caps";
  EXPECT_LT(at_cap, checked) << "every translation reached its cap: the test does not exercise eos";
  EXPECT_GT(differ_from_greedy, 0);
}

// An explicit max_len is every sentence's cap.
TEST(Translator, MaxLenCapsEverySentence) {
  const infer::Translator t = random_translator(7);
  const std::vector<std::string> src = sentences();
  for (int64_t beam : {1, 3}) {
    const std::vector<std::string> all = t.translate(src, beam, 0.6, /*max_len=*/5, 64);
    for (size_t i = 0; i < src.size(); ++i) {
      EXPECT_LE(t.tokenizer().encode(all[i]).size(), 5u) << "beam " << beam << ", sentence " << i;
      EXPECT_EQ(all[i], t.translate({src[i]}, beam, 0.6, 5, 1)[0]) << "beam " << beam << ", sentence " << i;
    }
  }
  EXPECT_NE(test::error_of([&] { t.translate(src, 0); }).find("expected beam >= 1 and batch >= 1, got 0"),
            std::string::npos);
}
