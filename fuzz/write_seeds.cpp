// Writes the seed corpora that need the library itself (trained tokenizers, checkpoints of real
// models, model configs, the resume runs' metadata) under DIR/<target>/; fuzz/make_corpus.py writes
// the others. Deterministic: the same build writes the same bytes.
//
//   build-fuzz/fuzz/write_seeds fuzz/corpus      # (scripts/fuzz.sh builds it with the targets)
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/attn.h"
#include "attn/io/base64.h"
#include "attn/io/checkpoint.h"
#include "attn/models/registry.h"
#include "attn/nn/init.h"
#include "attn/text/tokenizer.h"
#include "resume_runs.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string g_dir;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::path(g_dir) / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
  std::printf("%s/%s: %zu bytes\n", target.c_str(), name.c_str(), bytes.size());
}

std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += char(0x80 | (v & 0x7F));
  return s + char(v);
}

// A tiny valid normalization trie (darts-clone units) mapping "a" to "A": the root's child 'a' has
// a leaf 256 units away, whose value is offset 0 of the replacement strings "A\0".
std::string tiny_charsmap() {
  std::vector<uint32_t> units(512, 0);
  units['a'] = (256u << 10) | 0x100u | 'a';
  units['a' ^ 256] = 0x80000000u;
  std::string b;
  auto put = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) b += char((v >> (8 * k)) & 0xFF);
  };
  put(uint32_t(units.size() * 4));
  for (uint32_t u : units) put(u);
  return b + std::string("A\0", 2);
}

std::vector<std::string> sentences() {
  std::vector<std::string> s;
  for (int i = 0; i < 12; ++i)
    for (const char* x : {"In the beginning God created the heaven and the earth.",
                          "Y la tierra estaba desordenada y vacía, sobre la haz del abismo."})
      s.push_back(x + std::string(size_t(i % 3), ' ') + std::to_string(i));
  return s;
}

void tokenizer_seeds() {
  const std::string t = "tokenizer_model_fuzz";
  write(t, "char", attn::text::CharTokenizer::build({"abc ñ ¿?"})->serialize());
  write(t, "char_empty", attn::text::CharTokenizer(U"").serialize());
  write(t, "char_base64", attn::io::base64_encode(attn::text::CharTokenizer(U"xy").serialize()));
  attn::text::SentencePieceOptions o;
  o.vocab_size = 40;
  o.num_threads = 1;
  const auto uni = attn::text::SentencePieceTokenizer::train(sentences(), o);
  write(t, "sp_unigram", uni->serialize());
  o.model_type = "bpe";
  write(t, "sp_bpe", attn::text::SentencePieceTokenizer::train(sentences(), o)->serialize());
  const std::string spec = "\x12" + varint(tiny_charsmap().size()) + tiny_charsmap();
  write(t, "sp_unigram_charsmap", uni->serialize() + "\x1a" + varint(spec.size()) + spec);
  write(t, "sp_not_a_proto", "attn-tokenizer 1 sentencepiece\n\x0a\x05hello");
  write(t, "unknown_kind", "attn-tokenizer 1 wordpiece\n");
}

// Small configs of every family (the fuzz harnesses do not build configs with numbers over 512).
std::vector<std::pair<std::string, json>> small_configs() {
  return {
      {"mlp", {{"image_size", 8}, {"in_channels", 1}, {"hidden", {8}}, {"num_classes", 3}}},
      {"vit", {{"image_size", 8}, {"patch_size", 4}, {"in_channels", 1}, {"dim", 8}, {"depth", 1}, {"heads", 2},
               {"num_classes", 3}}},
      {"vit_hybrid_fmnist", {{"image_size", 8}, {"hybrid_channels", {4, 4}}, {"patch_size", 1}, {"dim", 8},
                             {"depth", 1}, {"heads", 2}, {"num_classes", 3}}},
      {"deit_fmnist_small_distilled", {{"image_size", 8}, {"patch_size", 4}, {"dim", 8}, {"depth", 1}, {"heads", 2},
                                       {"num_classes", 3}}},
      {"resnet_fmnist_tiny", {{"image_size", 8}, {"stem_channels", 4}, {"widths", {4, 8}}, {"blocks", {1, 1}},
                              {"num_classes", 3}}},
      {"transformer", {{"vocab_size", 8}, {"d_model", 8}, {"nhead", 2}, {"encoder_layers", 1}, {"decoder_layers", 1},
                       {"d_ff", 16}, {"max_length", 16}, {"dropout", 0.0}}},
      {"rnn-attention", {{"vocab_size", 8}, {"emb_dim", 8}, {"hidden", 8}, {"layers", 1}, {"max_length", 16},
                         {"dropout", 0.0}}},
  };
}

void model_and_checkpoint_seeds() {
  attn::manual_seed(0);
  const std::string tok = attn::io::base64_encode(attn::text::CharTokenizer(U"abcd").serialize());
  const fs::path tmp = fs::temp_directory_path() / ("attn_write_seeds_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  for (const auto& [name, overrides] : small_configs()) {
    std::shared_ptr<attn::models::Model> m;
    try {
      m = attn::models::create(name, overrides);
    } catch (const attn::Error& e) {
      std::fprintf(stderr, "write_seeds: %s: %s (seed left out)\n", name.c_str(), e.what());
      continue;
    }
    const json cfg = m->config();
    write("model_config_fuzz", name, cfg.dump());
    const bool translation = attn::models::model_entry(name).task == attn::models::kTranslation;
    json extra = {{"config", cfg},
                  {"train_state", {{"step", 1}, {"data", translation ? "synthetic:copy" : "fashion-mnist"}}}};
    if (translation) {
      extra["kind"] = "seq2seq";
      extra["tokenizer"] = tok;
    }
    const std::string path = (tmp / "ckpt.safetensors").string();
    std::optional<attn::io::OptimizerState> opt;
    if (name == "mlp") opt = attn::io::OptimizerState{"AdamW", {{"step", attn::Tensor::zeros({1})}}};
    attn::io::write_checkpoint(path, m->state_dict(), opt, extra);
    std::ifstream in(path, std::ios::binary);
    write("checkpoint_fuzz", name, std::string(std::istreambuf_iterator<char>(in), {}));
    if (name == "vit") {   // a run with --ema-decay: the EMA weights beside the model's, under "ema."
      extra["ema_decay"] = 0.99;
      attn::io::write_checkpoint(path, m->state_dict(), opt, extra, m->state_dict());
      std::ifstream ema(path, std::ios::binary);
      write("checkpoint_fuzz", name + "_ema", std::string(std::istreambuf_iterator<char>(ema), {}));
    }
  }
  write("model_config_fuzz", "unknown_model", R"({"model": "vit_gigantic", "dim": 8})");
  write("model_config_fuzz", "not_object", "[1, 2, 3]");
  fs::remove_all(tmp);
}

void resume_seeds() {
  const auto& runs = attn::fuzz::resume_runs();
  for (size_t i = 0; i < runs.size(); ++i) {
    json md = json::object();
    for (const auto& [k, v] : runs[i].checkpoint.metadata) {
      const json parsed = json::parse(v, nullptr, /*allow_exceptions=*/false);
      md[k] = k == "format" || parsed.is_discarded() ? json(v) : parsed;
    }
    // Deterministic: no wall time, and no path of the run's temporary folder (it holds the pid; a
    // resume does not need it, and an absent setting is not compared).
    if (md.contains("train_state") && md["train_state"].is_object()) {
      json& ts = md["train_state"];
      ts["seconds"] = 0.0;
      ts.erase("data");
      if (ts.contains("settings") && ts["settings"].is_object()) ts["settings"].erase("--data");
    }
    const std::string tag(1, char(i));
    const std::string name = i == 0 ? "image" : "translation";
    write("resume_fuzz", name + "_as_saved", tag + md.dump());
    write("resume_fuzz", name + "_unchanged", tag + "{}");
    if (md.contains("train_state"))
      write("resume_fuzz", name + "_train_state", tag + json{{"train_state", md["train_state"]}}.dump());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  try {
    tokenizer_seeds();
    model_and_checkpoint_seeds();
    resume_seeds();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
