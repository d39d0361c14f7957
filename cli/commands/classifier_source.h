// Where `attn predict` and `attn eval` get an image classifier: an attn checkpoint, or foreign ViT /
// DeiT weights (timm, Hugging Face or torchvision layout), each with its source's eval preprocessing
// (data/preprocess.h) and class names, and the flags that override that preprocessing.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/core/dtype.h"
#include "attn/data/preprocess.h"
#include "attn/models/registry.h"

namespace attn::cli {

struct Classifier {
  std::shared_ptr<models::ImageClassifier> model;
  std::string model_name, source;   // source: "attn" | "timm" | "hf" | "torchvision"
  data::Preprocess pre;
  std::vector<std::string> class_names;   // empty: "class K"
};

// --weights and what goes with it.
struct ForeignFlags {
  std::string weights, model, format = "auto", config, model_config;
  int64_t image_size = 0;
  bool pos_embed_antialias = false;
  bool given() const { return !weights.empty(); }
  // With an attn checkpoint instead: none of the flags that only describe foreign weights.
  void check_unused(const char* cmd) const;
};
void add_foreign_flags(CLI::App* c, ForeignFlags& f);

// --resize --crop --crop-pct --interpolation --mean --std
struct PreprocessFlags {
  std::string interpolation, mean, std;
  int64_t resize = 0, crop = 0;
  double crop_pct = 0;
};
void add_preprocess_flags(CLI::App* c, PreprocessFlags& f);

// An attn checkpoint: attn's own training checkpoints are resized to the model's image size and
// normalised as in training; checkpoints made by `attn convert` (their "source_format") get that
// source's eval transform. 1000-class models get the ImageNet class names unless an id2label names them.
Classifier classifier_from_checkpoint(const std::string& ckpt, DType linear_dtype);
// Foreign weights, streamed into the model (io::load_foreign_vit); hf weights read config.json beside
// them unless --config names one.
Classifier classifier_from_foreign(const ForeignFlags& f, DType linear_dtype, const char* cmd);
// The flags over the classifier's preset; the crop must stay the model's image size.
void apply_preprocess_flags(Classifier& c, const PreprocessFlags& f, const char* cmd);

// "f32" | "bf16" -> the dtype of the Linear weights.
DType parse_linear_dtype(const std::string& s, const char* cmd);

}  // namespace attn::cli
