// Streamed loading: io::SafetensorsReader, models::load_foreign_vit from a reader (one layer at
// a time, HF q/k/v packed per layer), Module::load_state_dict from a reader / from a state dict given
// up, nn::make_linear_weights_bf16 and models::load_classifier_checkpoint into bf16 Linear weights.
// Each gives exactly what the in-memory path gives (f32 and bf16 logits bit for bit); truncated files
// give clear errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/core/memory.h"
#include "attn/models/name_maps.h"
#include "attn/models/pretrained.h"
#include "attn/nn/linear.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/train/trainer.h"
#include "errors.h"
#include "attn/train/checkpoint.h"

using namespace attn;
using test::error_of;

namespace {

const char* kModel = "vit_fmnist_demo";   // patch 7, D 128, depth 4, heads 4: a few hundred KB

std::string tmp_path(const std::string& name) {
  return "/tmp/attn_streamed_load_test_" + std::to_string(::getpid()) + "_" + name;
}

struct TmpFile {
  std::string path;
  explicit TmpFile(const std::string& name) : path(tmp_path(name)) {}
  ~TmpFile() { std::remove(path.c_str()); }
};

std::shared_ptr<models::VisionTransformer> source_model() {
  manual_seed(7);
  auto m = std::dynamic_pointer_cast<models::VisionTransformer>(models::create_model(kModel));
  EXPECT_TRUE(m);
  // Non-trivial norms and biases, so a mix-up between them would show.
  NoGradGuard ng;
  for (auto& [k, t] : m->state_dict()) t.copy_(Tensor::randn(t.shape()) * 0.1 + (k.ends_with("weight") ? 1.0 : 0.0));
  m->eval();
  return m;
}

Tensor images() {
  manual_seed(11);
  return Tensor::randn({3, 1, 28, 28});
}

std::vector<float> logits(models::ImageClassifier& m) {
  NoGradGuard ng;
  m.eval();
  return m.forward(images()).to_vector<float>();
}

// attn's (= timm's) names -> Hugging Face's: q/k/v split out of attn.qkv, the rest renamed.
io::TensorList to_hf(const io::TensorList& sd) {
  io::TensorList out;
  for (const auto& [k, v] : sd) {
    std::string n = k;
    auto swap = [&](const std::string& a, const std::string& b) {
      if (n.starts_with(a)) n = b + n.substr(a.size());
    };
    if (k == "cls_token") { out.emplace_back("vit.embeddings.cls_token", v); continue; }
    if (k == "pos_embed") { out.emplace_back("vit.embeddings.position_embeddings", v); continue; }
    swap("patch_embed.proj.", "vit.embeddings.patch_embeddings.projection.");
    swap("norm.", "vit.layernorm.");
    swap("head.", "classifier.");
    if (n.starts_with("blocks.")) {
      const size_t dot = n.find('.', 7);
      const std::string layer = "vit.encoder.layer." + n.substr(7, dot - 7) + ".", rest = n.substr(dot + 1);
      if (rest.starts_with("attn.qkv.")) {
        const std::string what = rest.substr(9);   // weight | bias
        const int64_t d = v.size(0) / 3;
        const char* parts[] = {"query", "key", "value"};
        for (int i = 0; i < 3; ++i)
          out.emplace_back(layer + "attention.attention." + parts[i] + "." + what,
                           v.slice(0, i * d, (i + 1) * d).contiguous());
        continue;
      }
      static const std::vector<std::pair<std::string, std::string>> inner = {
          {"attn.proj.", "attention.output.dense."}, {"norm1.", "layernorm_before."}, {"norm2.", "layernorm_after."},
          {"mlp.fc1.", "intermediate.dense."}, {"mlp.fc2.", "output.dense."}};
      for (const auto& [a, b] : inner)
        if (rest.starts_with(a)) n = layer + b + rest.substr(a.size());
    }
    out.emplace_back(n, v);
  }
  return out;
}

models::ForeignVitOptions options(DType linear_dtype = DType::f32) {
  models::ForeignVitOptions o;
  o.model = kModel;
  o.linear_dtype = linear_dtype;
  return o;
}

void expect_linear_weights(const nn::Module& m, DType want) {
  int n = 0;
  for (const auto& [name, mod] : m.named_modules())
    if (auto* l = dynamic_cast<const nn::Linear*>(mod.get())) {
      EXPECT_EQ(l->weight.dtype(), want) << name;
      ++n;
    }
  EXPECT_GT(n, 0);
}

}  // namespace

TEST(StreamedLoad, ReaderReadsWhatLoadSafetensorsReads) {
  auto src = source_model();
  TmpFile f("reader.safetensors");
  io::TensorList sd = src->state_dict();
  sd.emplace_back("half_as_f32", Tensor::randn({5}));   // other dtypes ride along
  sd.emplace_back("ints", Tensor::arange(6));
  io::save_safetensors(f.path, sd, {{"k", "v"}});
  const io::SafetensorsFile whole = io::load_safetensors(f.path);
  io::SafetensorsReader r(f.path);
  EXPECT_EQ(r.metadata(), whole.metadata);
  ASSERT_EQ(r.entries().size(), whole.tensors.size());
  for (size_t i = 0; i < r.entries().size(); ++i) {
    EXPECT_EQ(r.entries()[i].name, whole.tensors[i].first);
    EXPECT_EQ(r.entries()[i].shape, whole.tensors[i].second.shape());
    const Tensor t = r.read(i);
    EXPECT_EQ(t.dtype(), whole.tensors[i].second.dtype());
    EXPECT_EQ(t.to_vector<double>(), whole.tensors[i].second.to_vector<double>()) << r.entries()[i].name;
  }
  EXPECT_EQ(r.read("ints").to_vector<int64_t>(), Tensor::arange(6).to_vector<int64_t>());
  EXPECT_THROW(r.read("nope"), Error);
  EXPECT_EQ(r.find("nope"), nullptr);
}

TEST(StreamedLoad, ForeignTimmLayoutGivesTheInMemoryLogits) {
  auto src = source_model();
  TmpFile f("timm.safetensors");
  io::save_safetensors(f.path, src->state_dict());
  const std::vector<float> want = logits(*src);
  auto old = models::load_foreign_vit(models::with_aliases(io::load_safetensors(f.path)), options()).model;
  auto streamed = models::load_foreign_vit(io::SafetensorsReader(f.path), options()).model;
  EXPECT_EQ(logits(*old), want);
  EXPECT_EQ(logits(*streamed), want);
  expect_linear_weights(*streamed, DType::f32);
}

TEST(StreamedLoad, ForeignHfLayoutPacksQkvPerLayer) {
  auto src = source_model();
  TmpFile f("hf.safetensors");
  io::save_safetensors(f.path, to_hf(src->state_dict()));
  const std::vector<float> want = logits(*src);
  models::ForeignVitOptions o = options();
  o.format = models::WeightFormat::hf;
  auto old = models::load_foreign_vit(io::load_safetensors(f.path).tensors, o).model;
  o.format.reset();   // detected from the header's keys
  auto streamed = models::load_foreign_vit(io::SafetensorsReader(f.path), o).model;
  EXPECT_EQ(logits(*old), want);
  EXPECT_EQ(logits(*streamed), want);
}

TEST(StreamedLoad, Bf16LinearWeightsAreTheRoundedF32Ones) {
  auto src = source_model();
  TmpFile f("bf16.safetensors");
  io::save_safetensors(f.path, src->state_dict());
  // The old way: load f32, then convert.
  auto ref = models::load_foreign_vit(io::load_safetensors(f.path).tensors, options()).model;
  ASSERT_GT(nn::convert_linear_weights_to_bf16(*ref), 0);
  auto streamed = models::load_foreign_vit(io::SafetensorsReader(f.path), options(DType::bf16)).model;
  expect_linear_weights(*streamed, DType::bf16);
  const io::TensorList a = streamed->state_dict(), b = src->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    const Tensor want = a[i].second.dtype() == DType::bf16 ? b[i].second.to(DType::bf16) : b[i].second;
    EXPECT_EQ(a[i].second.dtype(), want.dtype()) << a[i].first;
    EXPECT_EQ(a[i].second.to_vector<double>(), want.to_vector<double>()) << a[i].first;
  }
  EXPECT_EQ(logits(*streamed), logits(*ref));
  // The same through the TensorList overload.
  auto listed = models::load_foreign_vit(io::load_safetensors(f.path).tensors, options(DType::bf16)).model;
  expect_linear_weights(*listed, DType::bf16);
  EXPECT_EQ(logits(*listed), logits(*ref));
}

TEST(StreamedLoad, CheckpointIntoBf16) {
  auto src = source_model();
  TmpFile f("ckpt.safetensors");
  train::save_checkpoint(f.path, *src, nullptr, {{"config", src->config()}});
  auto f32 = models::load_classifier_checkpoint(f.path);
  EXPECT_EQ(logits(*f32), logits(*src));
  auto ref = models::load_classifier_checkpoint(f.path);
  nn::convert_linear_weights_to_bf16(*ref);
  auto bf = models::load_classifier_checkpoint(f.path, DType::bf16);
  expect_linear_weights(*bf, DType::bf16);
  EXPECT_EQ(logits(*bf), logits(*ref));
}

TEST(StreamedLoad, ModuleStreamHoldsOneTensorAtATime) {
  auto src = source_model();
  TmpFile f("module.safetensors");
  io::save_safetensors(f.path, src->state_dict());
  auto dst = models::create_model(kModel);
  int64_t largest = 0;
  for (const auto& [k, t] : src->state_dict()) largest = std::max<int64_t>(largest, t.numel() * 4);
  io::SafetensorsReader r(f.path);
  const int64_t live = memory_stats().live_bytes;
  reset_peak_memory();
  dst->load_state_dict(r);
  EXPECT_LE(memory_stats().peak_bytes - live, (largest + 63) / 64 * 64 + 64 * 64);   // one tensor (+ slack)
  EXPECT_EQ(logits(*dst), logits(*src));
  // A mismatch is reported before anything is read.
  auto other = models::create_model("vit_fmnist_small");
  const std::string e = error_of([&] { other->load_state_dict(r); });
  EXPECT_NE(e.find("does not match the model"), std::string::npos) << e;
  EXPECT_NE(e.find(f.path), std::string::npos) << e;
}

TEST(StreamedLoad, ReleasingLoadDropsTheSources) {
  auto src = source_model();
  io::TensorList sd;
  for (auto& [k, t] : src->state_dict()) sd.emplace_back(k, t.clone());
  auto dst = models::create_model(kModel);
  dst->load_state_dict(std::move(sd));   // given up: each entry dropped once copied, the list kept
  for (const auto& [k, t] : sd) EXPECT_FALSE(t.defined()) << k;
  EXPECT_EQ(logits(*dst), logits(*src));
}

TEST(StreamedLoad, TruncatedFilesGiveClearErrors) {
  auto src = source_model();
  TmpFile f("trunc.safetensors");
  io::save_safetensors(f.path, src->state_dict());
  const auto size = std::filesystem::file_size(f.path);
  std::string bytes;
  {
    std::ifstream in(f.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Truncated before opening: the header names more data than the file has; the same message as
  // parse_safetensors on those bytes.
  std::filesystem::resize_file(f.path, size / 2);
  const std::string in_memory =
      error_of([&] { io::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), size / 2, f.path); });
  EXPECT_NE(in_memory.find("lie outside the data block"), std::string::npos) << in_memory;
  EXPECT_EQ(error_of([&] { io::load_safetensors(f.path); }), in_memory);
  EXPECT_EQ(error_of([&] { io::SafetensorsReader r(f.path); }), in_memory);
  EXPECT_EQ(error_of([&] { models::load_foreign_vit(io::SafetensorsReader(f.path), options(DType::bf16)); }), in_memory);
  // Truncated after the header was read: the read of an entry says so.
  {
    std::ofstream out(f.path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  io::SafetensorsReader r(f.path);
  std::filesystem::resize_file(f.path, size - 16);
  const std::string msg = error_of([&] { (void)r.read(r.entries().size() - 1); });
  EXPECT_NE(msg.find("read of entry '" + r.entries().back().name + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shorter than its header says"), std::string::npos) << msg;
  // A missing file is named, as before.
  const std::string missing = error_of([&] { io::SafetensorsReader m(f.path + ".nope"); });
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
}
