// Corpus BLEU exactly as sacreBLEU 2.x computes it by default (tokenize="13a", case-sensitive,
// n-grams 1..4, smoothing "exp", no effective order), plus sentence BLEU as sacrebleu.sentence_bleu.
//
//   attn::text::BleuScore s = attn::text::corpus_bleu(hyps, refs);          // one reference each
//   attn::text::BleuScore m = attn::text::corpus_bleu(hyps, {refs_a, refs_b}); // two reference streams
//   std::cout << s.format() << "\n";
//   // BLEU = 26.21 60.6/34.2/20.8/13.2 (BP = 1.000 ratio = 1.012 hyp_len = 1234 ref_len = 1219)
//
// Definition (Papineni et al. 2002; sacrebleu/metrics/bleu.py):
//  - every segment is rstrip()ed and tokenised with tokenize_13a (below), then split on whitespace;
//  - per segment, hypothesis n-gram counts are clipped by the maximum count of that n-gram over the
//    segment's references; matches ("counts") and hypothesis n-grams ("totals") are summed over the
//    corpus, as are hyp_len and ref_len, the reference length closest to the hypothesis length (ties:
//    the shorter);
//  - BP = exp(1 - ref_len / sys_len) when sys_len < ref_len (0 when sys_len = 0), else 1;
//  - if no n-gram of any order matches, BLEU = 0 (all precisions reported as 0);
//  - precision p_n = 100 counts_n / totals_n; smoothing "exp" (mteval-v13a, Chen & Cherry's method 3):
//    the k-th order with counts_n = 0 gets p_n = 100 / (2^k totals_n); an order with totals_n = 0
//    stops the loop, its precision (and the following ones) stays 0, and the score is then 0 (unless
//    effective order: the geometric mean runs over the orders before it);
//  - BLEU = BP exp(mean_n log p_n), on the 0..100 scale.
// Multiple references: `refs[k][i]` is stream k's reference for segment i; an empty string means
// "no reference in this stream for this segment" (sacreBLEU's variable number of references); a
// segment with no reference at all is an error.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace attn::text {

// The mteval-v13a tokenizer of sacreBLEU (tokenizers/tokenizer_13a.py + tokenizer_re.py):
//  1. remove "<skipped>", join "-\n" line breaks, "\n" -> " ", unescape &quot; &amp; &lt; &gt; (in
//     that order);
//  2. pad with a space on each side, then four regex substitutions, each left to right without overlap:
//     ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "  (symbols: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * +
//                                                : ; < = > ? @ / — not ' , - . digits or letters)
//     ([^0-9])([\.,])  -> "\1 \2 "   (period / comma split off unless preceded by a digit)
//     ([\.,])([^0-9])  -> " \1 \2"   (... unless followed by a digit)
//     ([0-9])(-)       -> "\1 \2 "   (dash split off after a digit)
//  3. collapse whitespace (Python's str.split(): ASCII and Unicode whitespace) to single spaces.
// Works on UTF-8 bytes; equal to the code-point version because every pattern's non-ASCII part is
// "any character but a digit".
std::string tokenize_13a(const std::string& line);
// tokenize_13a(line) split into tokens.
std::vector<std::string> tokens_13a(const std::string& line);

inline constexpr int kBleuMaxOrder = 4;

struct BleuScore {
  double score = 0;                                  // 0..100
  std::array<int64_t, kBleuMaxOrder> counts{};       // clipped matches per order
  std::array<int64_t, kBleuMaxOrder> totals{};       // hypothesis n-grams per order
  std::array<double, kBleuMaxOrder> precisions{};    // percent, after smoothing
  double bp = 0;                                     // brevity penalty
  int64_t sys_len = 0, ref_len = 0;
  double ratio() const { return ref_len ? double(sys_len) / double(ref_len) : 0.0; }
  // "BLEU = 26.21 60.6/34.2/20.8/13.2 (BP = 1.000 ratio = 1.012 hyp_len = 1234 ref_len = 1219)",
  // sacreBLEU's str(score) (width = digits of the score).
  std::string format(int width = 2) const;
};

// Sufficient statistics -> score (sacreBLEU's BLEU.compute_bleu with smooth_method="exp").
BleuScore compute_bleu(const std::array<int64_t, kBleuMaxOrder>& counts,
                       const std::array<int64_t, kBleuMaxOrder>& totals, int64_t sys_len, int64_t ref_len,
                       bool effective_order = false);

// Corpus BLEU with one reference per segment: refs.size() == hyps.size().
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);
// Corpus BLEU with reference streams: every refs[k].size() == hyps.size().
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs);

// sacrebleu.sentence_bleu(hyp, refs): the same statistics on one segment, "exp" smoothing and
// effective order (sacreBLEU's default for sentence scores).
BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs);

}  // namespace attn::text
