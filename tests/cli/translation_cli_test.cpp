// The translation commands end to end, on a small model trained for seconds on a synthetic task:
// `attn train --model transformer|rnn-attention`, then `attn translate` (arguments, --file, --beam,
// --length-penalty, --batch), `attn align` and `attn eval` (--beam, --length-penalty, --hyps,
// --json) on its checkpoint, each against the library called in-process on the same checkpoint.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/infer/translate.h"
#include "attn/train/tasks/translation.h"
#include "attn_cli.h"
#include "train_checks.h"

using namespace attn;
using test::run_attn;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// `attn train` of a small translation model on synthetic:<task> (one thread, a few hundred pairs).
test::CliRun train_translation(const std::string& dir, const std::string& model, const std::string& config,
                               const std::string& task) {
  return run_attn(dir, {"train", "--model", model, "--data", "synthetic:" + task, "--model-config", config,
                        "--synthetic-size", "600", "--epochs", "2", "--max-tokens", "512", "--warmup-steps", "20",
                        "--eval-sentences", "8", "--limit-test", "12", "--beam", "2", "--threads", "1", "--seed",
                        "3", "--out", dir + "/run"});
}

// The checkpoint's own test pairs, as `attn eval` reads them.
std::vector<data::TextPair> test_pairs(const infer::Translator& tr, const std::string& ckpt, size_t limit) {
  const train::TranslationDataSpec d = train::translation_data_spec(tr.metadata(), ckpt);
  data::PairSplits sp = train::load_translation_data(d.data, d.seed, "/usr/share/sword", d.synthetic_size,
                                                     d.dev_count, d.test_count);
  if (sp.test.size() > limit) sp.test.resize(limit);
  return sp.test;
}

}  // namespace

TEST(TranslationCli, TransformerTrainTranslateAlignEval) {
  const std::string dir = test::fresh_tmp_dir("attn_translation_cli_test", "transformer");
  const test::CliRun t = train_translation(
      dir, "transformer", R"({"d_model":32,"nhead":2,"layers":1,"d_ff":64,"dropout":0.0,"max_length":64})", "copy");
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string ckpt = dir + "/run/checkpoint.safetensors";
  EXPECT_NE(t.out.find("test BLEU = "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("checkpoint: " + ckpt), std::string::npos) << t.out;
  const json metrics = json::parse(read_text(dir + "/run/metrics.json"));
  EXPECT_TRUE(metrics.contains("test_bleu")) << metrics.dump();
  // The decoded test split: a file beside metrics.json, named relative to the run, printed in full.
  EXPECT_EQ(metrics.at("samples"), "test_translations.txt");
  EXPECT_EQ(read_text(dir + "/run/test_translations.txt").rfind("SRC ", 0), 0u);
  EXPECT_NE(t.out.find("samples:    " + dir + "/run/test_translations.txt"), std::string::npos) << t.out;
  const infer::Translator tr = infer::load_translator(ckpt);
  EXPECT_EQ(tr.model().config().at("d_model"), 32);

  // translate: arguments, beam and length penalty as given, the library's translations line by line.
  const std::vector<std::string> src = {"hello", "attention", "abcxyz", "q"};
  for (const auto& [beam, alpha] : std::vector<std::pair<int64_t, double>>{{1, 0.6}, {3, 0.0}, {3, 2.5}}) {
    std::vector<std::string> args = {"translate", ckpt};
    args.insert(args.end(), src.begin(), src.end());
    for (const std::string& a : {std::string("--beam"), std::to_string(beam), std::string("--length-penalty"),
                                 std::to_string(alpha), std::string("--threads"), std::string("1")})
      args.push_back(a);
    const test::CliRun r = run_attn(dir, args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(lines_of(r.out), tr.translate(src, beam, alpha)) << "beam " << beam << ", alpha " << alpha;
    args.push_back("--batch");
    args.push_back("1");
    EXPECT_EQ(run_attn(dir, args).out, r.out) << "--batch 1 vs the default 64, beam " << beam;
  }
  {  // --file, one sentence a line (a CRLF line end dropped)
    std::ofstream(dir + "/src.txt") << "hello\r\nattention\n";
    const test::CliRun r = run_attn(dir, {"translate", ckpt, "--file", dir + "/src.txt", "--beam", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(lines_of(r.out), tr.translate({"hello", "attention"}, 2));
  }
  test::CliRun bad = run_attn(dir, {"translate", ckpt});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("translate: expected text to translate"), std::string::npos) << bad.err;

  // align: the greedy translation and a heat map of one row per target token (eos included).
  {
    const test::CliRun r = run_attn(dir, {"align", ckpt, "abcd", "--out", dir + "/align.png"});
    ASSERT_EQ(r.code, 0) << r.err;
    const infer::Alignment a = tr.align("abcd");
    const std::vector<std::string> out = lines_of(r.out);
    ASSERT_EQ(out.size(), 2u) << r.out;
    EXPECT_EQ(out[0], a.translation);
    EXPECT_EQ(out[1], "alignment (" + std::to_string(a.tgt_pieces.size()) + " target x 4 source tokens): " + dir +
                          "/align.png");
    EXPECT_GT(fs::file_size(dir + "/align.png"), 100u);
    const std::string png = read_text(dir + "/align.png");
    EXPECT_EQ(png.substr(1, 3), "PNG");
  }

  // eval: BLEU on the checkpoint's test pairs at the given beam and length penalty, the hypotheses
  // written; they are the library's at those settings.
  const std::vector<data::TextPair> pairs = test_pairs(tr, ckpt, 12);
  ASSERT_EQ(pairs.size(), 12u);
  std::vector<std::string> hyp_wide, hyp_long;
  const text::BleuScore want_wide = tr.bleu(pairs, 3, 0.0, &hyp_wide);
  const text::BleuScore want_long = tr.bleu(pairs, 3, 3.0, &hyp_long);
  for (const auto& [alpha, want, hyps] :
       {std::tuple{0.0, want_wide, hyp_wide}, std::tuple{3.0, want_long, hyp_long}}) {
    const std::string hyp_path = dir + "/hyps.txt";
    const test::CliRun r = run_attn(dir, {"eval", ckpt, "--beam", "3", "--length-penalty", std::to_string(alpha),
                                          "--limit", "12", "--hyps", hyp_path, "--json", "--threads", "1"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j.at("beam"), 3);
    EXPECT_EQ(j.at("sentences"), 12);
    EXPECT_EQ(j.at("split"), "test");
    EXPECT_DOUBLE_EQ(j.at("bleu").get<double>(), want.score) << "alpha " << alpha;
    EXPECT_EQ(j.at("bleu_line"), want.format()) << "alpha " << alpha;
    EXPECT_EQ(lines_of(read_text(hyp_path)), hyps) << "alpha " << alpha;
  }
  std::printf("  eval: BLEU %.2f at length penalty 0, %.2f at 3; %s hypotheses\n", want_wide.score, want_long.score,
              hyp_wide == hyp_long ? "the same" : "different");
  EXPECT_NE(hyp_wide, hyp_long) << "the length penalty changes nothing on this model: --length-penalty goes untested";
  {  // the plain line names the data and the beam
    const test::CliRun r = run_attn(dir, {"eval", ckpt, "--beam", "2", "--limit", "5"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(ckpt + " on synthetic:copy/test (5 sentences, beam 2): BLEU = "), std::string::npos) << r.out;
  }
  bad = run_attn(dir, {"eval", ckpt, "--split", "train"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("translation splits are dev | test, got 'train'"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

TEST(TranslationCli, RnnAttentionTrainAndTranslate) {
  const std::string dir = test::fresh_tmp_dir("attn_translation_cli_test", "rnn");
  const test::CliRun t = train_translation(
      dir, "rnn-attention", R"({"emb_dim":16,"hidden":32,"layers":1,"dropout":0.0,"max_length":64})", "reverse");
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string ckpt = dir + "/run/checkpoint.safetensors";
  EXPECT_NE(t.out.find("test BLEU = "), std::string::npos) << t.out;
  const infer::Translator tr = infer::load_translator(ckpt);
  EXPECT_EQ(tr.model().config().at("model"), "rnn-attention");
  EXPECT_EQ(tr.model().config().at("hidden"), 32);
  const test::CliRun r = run_attn(dir, {"translate", ckpt, "abc", "hello world", "--beam", "2", "--length-penalty", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out), tr.translate({"abc", "hello world"}, 2, 1.0));
  const test::CliRun a = run_attn(dir, {"align", ckpt, "abc", "--beam", "2", "--out", dir + "/a.png"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(lines_of(a.out).at(0), tr.align("abc", 2).translation);
  fs::remove_all(dir);
}
