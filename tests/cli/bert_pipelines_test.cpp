// The BERT text commands against PyTorch (tests/golden/gen/bert.py, pipelines): `fill-mask` (the top-k
// tokens and softmax probabilities of each [MASK], the filled sequences, as Hugging Face's fill-mask
// pipeline), `embed` (mean / cls / pooler sentence embeddings, the same whatever the batch size) and
// `explain --text` (one head's attention drawn over the tokens), with a small BERT of seeded random
// weights in transformers' layout and a tiny vocabulary written here, or bert-base-uncased's real one
// (tests/support/bert_vocab.h); and their errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/text/bert_tokenizer.h"
#include "attn/viz/heatmap.h"
#include "attn_cli.h"
#include "bert_vocab.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using nlohmann::json;

namespace {

// A vocabulary of whole words (no "##" pieces), so every text below is one token per word.
const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "of", "world", "end",
                                         "a", "man", "is", "eating", "food", "horse", "rides", "on", "beach", ".",
                                         "!", "hello", "there", "big", "small", "dog", "cat", "sat", "mat", "and",
                                         "it", "was", "good", "bad", "day", "night", "sun", "moon", "red", "blue",
                                         "green"};

json small_config(int64_t vocab) {
  return {{"vocab_size", vocab}, {"hidden_size", 16}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
          {"intermediate_size", 24}, {"max_position_embeddings", 16}, {"type_vocab_size", 2}};
}

std::string bytes_of(const Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data<uint8_t>()), size_t(t.numel()));
}

std::string vocab_text(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& t : v) s += t + "\n";
  return s;
}

// The texts encoded by attn's tokenizer and padded to the longest, as the generator's inputs.
test::Tensors padded(const text::BertTokenizer& tok, const std::vector<std::string>& texts) {
  text::BertEncodeOptions o;
  o.padding = text::BertPadding::longest;
  const text::BertInputs in = text::to_inputs(tok.encode_batch(texts, o));
  return {{"input_ids", in.input_ids}, {"token_type_ids", in.token_type_ids}, {"attention_mask", in.attention_mask}};
}

// A BERT of `arch` with seeded random weights in dir/hf (model.safetensors, config.json, and vocab.txt
// unless `vocab` is empty), and the reference outputs for `texts`.
test::Tensors write_model(const std::string& dir, const std::string& arch, const std::vector<std::string>& vocab,
                          const text::BertTokenizer& tok, const std::vector<std::string>& texts, int64_t topk = 3) {
  const auto ref = test::torch_ref("bert.pipelines", padded(tok, texts),
                                   {{"seed", 7}, {"architecture", arch}, {"config", small_config(tok.vocab_size())},
                                    {"mask_id", tok.mask_id()}, {"topk", topk}});
  test::write_bytes(dir + "/hf/model.safetensors", bytes_of(ref.at("file")));
  test::write_bytes(dir + "/hf/config.json", bytes_of(ref.at("config")));
  if (!vocab.empty()) test::write_bytes(dir + "/hf/vocab.txt", vocab_text(vocab));
  return ref;
}

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) v.push_back(json::parse(line));
  return v;
}

// embed's output lines as an (N, H) tensor.
Tensor vectors(const std::string& out) {
  std::vector<float> all;
  int64_t n = 0, h = 0;
  for (const json& j : json_lines(out)) {
    h = int64_t(j.size());
    for (const auto& x : j) all.push_back(x.get<float>());
    ++n;
  }
  return Tensor::from_vector(all, {n, h});
}

}  // namespace

TEST(CliBertPipelines, FillMaskMatchesTorchsTopKProbabilities) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert_pipe", "fill");
  const text::BertTokenizer tok(kVocab);
  const std::vector<std::string> texts = {"The [MASK] of the world.", "a [MASK] is eating [MASK] !"};
  const auto ref = write_model(dir, "BertForPreTraining", kVocab, tok, texts);
  const test::CliRun r = test::run_attn(dir, {"fill-mask", "--weights", dir + "/hf/model.safetensors", "--topk", "3",
                                              "--json", "--threads", "1", texts[0], texts[1]});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<json> out = json_lines(r.out);
  ASSERT_EQ(out.size(), 2u) << r.out;
  const std::vector<float> scores = ref.at("fill.scores").to_vector<float>();   // (3 masks, 3)
  const std::vector<int64_t> ids = ref.at("fill.ids").to_vector<int64_t>();
  size_t m = 0;
  for (size_t t = 0; t < texts.size(); ++t) {
    EXPECT_EQ(out[t]["text"], texts[t]);
    const text::BertEncoding e = tok.encode(texts[t]);
    const json& masks = out[t]["masks"];
    ASSERT_EQ(masks.size(), t == 0 ? 1u : 2u);
    size_t pos = 0;
    for (const json& cands : masks) {
      while (e.ids[pos] != tok.mask_id()) ++pos;
      ASSERT_EQ(cands.size(), 3u);
      for (size_t k = 0; k < 3; ++k, ++m) {
        const json& c = cands[k];
        EXPECT_EQ(c["token"].get<int64_t>(), ids[m]) << "text " << t << " candidate " << k;
        EXPECT_NEAR(c["score"].get<double>(), scores[m], 1e-5);
        EXPECT_EQ(c["token_str"], kVocab[size_t(ids[m])]);
        std::vector<int64_t> filled = e.ids;
        filled[pos] = ids[m];
        std::erase(filled, tok.pad_id());   // as the pipeline: padding left out (a predicted [PAD] too)
        // One mask: special tokens skipped; several: kept, so the other [MASK] shows.
        EXPECT_EQ(c["sequence"], tok.decode(filled, masks.size() == 1));
        if (masks.size() > 1) EXPECT_EQ(c["sequence"].get<std::string>().rfind("[CLS] a ", 0), 0u) << c["sequence"];
      }
      ++pos;
    }
  }
  EXPECT_EQ(m, 9u);

  // The attn checkpoint `attn convert` makes: the same answers; vocab.txt and tokenizer_config.json
  // follow the checkpoint, so the text output finds its vocabulary.
  test::write_bytes(dir + "/hf/tokenizer_config.json", std::string(R"({"do_lower_case": true})"));
  std::filesystem::create_directories(dir + "/ckpt");
  const test::CliRun c = test::run_attn(dir, {"convert", dir + "/hf/model.safetensors", "--model", "bert-mini", "--out",
                                              dir + "/ckpt/bert.safetensors"});
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/ckpt/vocab.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/ckpt/tokenizer_config.json"));
  const test::CliRun t = test::run_attn(dir, {"fill-mask", dir + "/ckpt/bert.safetensors", "--topk", "2", texts[0]});
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string first = kVocab[size_t(ids[0])];
  EXPECT_EQ(t.out.rfind(texts[0] + "\n", 0), 0u) << t.out;
  EXPECT_NE(t.out.find(first + " "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find(tok.decode({2, 5, ids[0], 6, 5, 7, 18, 3}, true)), std::string::npos) << t.out;
  std::filesystem::remove_all(dir);
}

TEST(CliBertPipelines, FillMaskOnTheRealVocabulary) {
  const std::string vocab = test::bert_vocab_path();
  ATTN_NEED_BERT_VOCAB(vocab);
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert_pipe", "real");
  const text::BertTokenizer tok = text::BertTokenizer::from_files(vocab);
  const std::string text = "Paris is the [MASK] of France.";
  const auto ref = write_model(dir, "BertForMaskedLM", {}, tok, {text}, 5);
  // No vocab.txt beside the weights: bert-mini is uncased, so bert-base-uncased's is found (ATTN_BERT_VOCAB).
  setenv("ATTN_BERT_VOCAB", vocab.c_str(), 1);
  const test::CliRun r = test::run_attn(dir, {"fill-mask", "--weights", dir + "/hf/model.safetensors", "--model",
                                              "bert-mini", "--json", text});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const std::vector<int64_t> ids = ref.at("fill.ids").to_vector<int64_t>();
  const std::vector<float> scores = ref.at("fill.scores").to_vector<float>();
  ASSERT_EQ(j["masks"][0].size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(j["masks"][0][k]["token"].get<int64_t>(), ids[k]);
    EXPECT_NEAR(j["masks"][0][k]["score"].get<double>(), scores[k], 1e-6);
    EXPECT_EQ(j["masks"][0][k]["token_str"], tok.id_to_token(ids[k]));
  }
  unsetenv("ATTN_BERT_VOCAB");
  std::filesystem::remove_all(dir);
}

TEST(CliBertPipelines, EmbedMatchesTorchAndNotTheBatchSize) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert_pipe", "embed");
  const text::BertTokenizer tok(kVocab);
  const std::vector<std::string> texts = {"a man is eating food.", "hello", "the big dog sat on the mat and it was good",
                                          "", "a man rides a horse on the beach !"};
  const auto ref = write_model(dir, "BertForPreTraining", kVocab, tok, texts);
  std::string lines;
  for (const auto& t : texts) lines += t + "\n";
  test::write_bytes(dir + "/in.txt", lines);
  for (const char* pooling : {"mean", "cls", "pooler"}) {
    Tensor first;
    for (const char* batch : {"1", "2", "5"}) {
      const test::CliRun r = test::run_attn(dir, {"embed", "--weights", dir + "/hf/model.safetensors", "--input",
                                                  dir + "/in.txt", "--pooling", pooling, "--batch-size", batch});
      ASSERT_EQ(r.code, 0) << r.err;
      const Tensor v = vectors(r.out);
      EXPECT_TENSOR_NEAR(v, ref.at(std::string("pool.") + pooling), 2e-5, 1e-4) << pooling << " batch " << batch;
      if (!first.defined()) first = v;
      else EXPECT_TENSOR_NEAR(v, first, 1e-6, 1e-5) << pooling << " batch " << batch << " vs 1";
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(CliBertPipelines, ExplainTextDrawsOneHeadsAttention) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert_pipe", "explain");
  const text::BertTokenizer tok(kVocab);
  const std::string text = "the sun and the moon !";
  const auto ref = write_model(dir, "BertModel", kVocab, tok, {text});
  const test::CliRun r = test::run_attn(dir, {"explain", "--weights", dir + "/hf/model.safetensors", "--text", text,
                                              "--layer", "1", "--head", "1", "--out", dir + "/map.png", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const std::vector<std::string> tokens = {"[CLS]", "the", "sun", "and", "the", "moon", "!", "[SEP]"};
  EXPECT_EQ(j["tokens"].get<std::vector<std::string>>(), tokens);
  const Tensor want = ref.at("attentions").select(0, 1).select(0, 0).select(0, 1).contiguous();   // (L, B, NH, T, T)
  std::vector<float> got;
  for (const auto& row : j["attention"])
    for (const auto& x : row) got.push_back(x.get<float>());
  EXPECT_TENSOR_NEAR(Tensor::from_vector(got, {8, 8}), want, 1e-5, 1e-4);
  const viz::AlignmentLayout lay = viz::alignment_layout(8, 8, tokens, tokens);
  const Tensor png = data::read_image(dir + "/map.png", 3);
  EXPECT_EQ(png.size(0), lay.height);
  EXPECT_EQ(png.size(1), lay.width);
  EXPECT_EQ(j["width"], lay.width);

  // The heads fused (mean by default), text output; a layer out of range.
  const test::CliRun m = test::run_attn(dir, {"explain", "--weights", dir + "/hf/model.safetensors", "--text", text,
                                              "--out", dir + "/mean.png"});
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("layer 1, heads fused by mean: 8 x 8 tokens"), std::string::npos) << m.out;
  const test::CliRun bad = test::run_attn(dir, {"explain", "--weights", dir + "/hf/model.safetensors", "--text", text,
                                                "--layer", "2"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("expected --layer in [0, 2) (or -2..-1 counting from the last), got 2"), std::string::npos)
      << bad.err;
  std::filesystem::remove_all(dir);
}

TEST(CliBertPipelines, ErrorsNameWhatIsWrong) {
  const std::string dir = test::fresh_tmp_dir("attn_cli_bert_pipe", "errors");
  const text::BertTokenizer tok(kVocab);
  write_model(dir, "BertForMaskedLM", kVocab, tok, {"the [MASK] ."});
  const std::string w = dir + "/hf/model.safetensors";
  // A text without [MASK], named with its number.
  const test::CliRun none = test::run_attn(dir, {"fill-mask", "--weights", w, "the [MASK] .", "the end ."});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("fill-mask: text 2: no [MASK] token in the text 'the end .'"), std::string::npos) << none.err;
  // A vocabulary of another size than the model's.
  std::vector<std::string> shorter = kVocab;
  shorter.pop_back();
  test::write_bytes(dir + "/short/vocab.txt", vocab_text(shorter));
  const test::CliRun size = test::run_attn(dir, {"fill-mask", "--weights", w, "--vocab", dir + "/short/vocab.txt", "a [MASK]"});
  EXPECT_EQ(size.code, 1);
  EXPECT_NE(size.err.find("the vocabulary '" + dir + "/short/vocab.txt' has 39 tokens, but the model bert-base-uncased"),
            std::string::npos) << size.err;
  EXPECT_NE(size.err.find("has vocab_size 40"), std::string::npos) << size.err;
  // A cased model without a vocabulary beside its weights.
  std::filesystem::remove(dir + "/hf/vocab.txt");
  const test::CliRun cased = test::run_attn(dir, {"fill-mask", "--weights", w, "--model", "bert-base-cased", "a [MASK]"});
  EXPECT_EQ(cased.code, 1);
  EXPECT_NE(cased.err.find("no vocabulary for bert-base-cased ('" + w + "'): expected " + dir + "/hf/vocab.txt or --vocab V"),
            std::string::npos) << cased.err;
  // An uncased model with no vocabulary beside it nor where ATTN_BERT_VOCAB points: where it looked is named.
  setenv("ATTN_BERT_VOCAB", (dir + "/missing/vocab.txt").c_str(), 1);
  const test::CliRun missing = test::run_attn(dir, {"fill-mask", "--weights", w, "--model", "bert-mini", "a [MASK]"});
  unsetenv("ATTN_BERT_VOCAB");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("no vocabulary for bert-mini ('" + w + "'): expected " + dir + "/hf/vocab.txt, --vocab V, "
                             "or bert-base-uncased's vocab.txt at " + dir + "/missing/vocab.txt (scripts/fetch_bert_vocab.sh "
                             "writes it)"), std::string::npos) << missing.err;
  test::write_bytes(dir + "/hf/vocab.txt", vocab_text(kVocab));
  // Invalid UTF-8 on the second line of embed's input.
  test::write_bytes(dir + "/bad.txt", std::string("a man\nthe \xff end\n"));
  const test::CliRun utf8 = test::run_attn(dir, {"embed", "--weights", w, "--input", dir + "/bad.txt"});
  EXPECT_EQ(utf8.code, 1);
  EXPECT_NE(utf8.err.find("embed: text 2: "), std::string::npos) << utf8.err;
  EXPECT_NE(utf8.err.find("invalid UTF-8 at byte offset 4"), std::string::npos) << utf8.err;
  // pooler pooling of a model without a pooler (BertForMaskedLM).
  const test::CliRun pooler = test::run_attn(dir, {"embed", "--weights", w, "--input", dir + "/bad.txt", "--pooling", "pooler"});
  EXPECT_EQ(pooler.code, 1);
  EXPECT_NE(pooler.err.find("pooling 'pooler' needs a model with a pooler"), std::string::npos) << pooler.err;
  // Longer than max_position_embeddings (16): truncated with a warning, or an error with --no-truncation;
  // a [MASK] cut off is named.
  std::string long_text = "the [MASK]";
  for (int i = 0; i < 20; ++i) long_text += " day";
  const test::CliRun cut = test::run_attn(dir, {"fill-mask", "--weights", w, "--json", long_text});
  ASSERT_EQ(cut.code, 0) << cut.err;
  EXPECT_EQ(json::parse(cut.out)["truncated"], 8);
  EXPECT_NE(cut.err.find("8 tokens cut to fit max_length 16"), std::string::npos) << cut.err;
  const test::CliRun strict = test::run_attn(dir, {"fill-mask", "--weights", w, "--no-truncation", long_text});
  EXPECT_EQ(strict.code, 1);
  EXPECT_NE(strict.err.find("fill-mask: text 1: "), std::string::npos) << strict.err;
  const test::CliRun late = test::run_attn(dir, {"fill-mask", "--weights", w, long_text.substr(11) + " [MASK]"});
  EXPECT_EQ(late.code, 1);
  EXPECT_NE(late.err.find("after truncation to 16 tokens"), std::string::npos) << late.err;
  std::filesystem::remove_all(dir);
}
