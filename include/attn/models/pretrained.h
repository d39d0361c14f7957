// Pretrained image classifiers for inference, in one call: an attn checkpoint (from `attn train` or
// `attn convert`) or foreign ViT / DeiT weights (timm, Hugging Face or torchvision layout; see
// attn/models/name_maps.h), each with its source's eval preprocessing (attn/data/preprocess.h) and
// class names.
//
//   models::Pretrained p = models::load_pretrained(models::PretrainedSource::checkpoint("run/checkpoint.safetensors"));
//   models::PretrainedSource e = models::PretrainedSource::checkpoint("run/checkpoint.safetensors");
//   e.weights = io::CheckpointWeights::ema;   // the EMA weights of a run trained with --ema-decay
//   models::PretrainedSource s = models::PretrainedSource::foreign("vit_b_16.safetensors", "vit_base_patch16_224");
//   s.format = "torchvision";  s.linear_dtype = DType::bf16;  s.preprocess.crop_pct = 0.875;
//   models::Pretrained q = models::load_pretrained(s);
//   Tensor logits = q.model->forward(data::preprocess_file("cat.jpg", q.preprocess).unsqueeze(0));
//   // q.labels[k]: the name of class k; infer::classify_files (attn/infer/classify.h) does all of this.
//
// Preprocessing: foreign weights, and attn checkpoints made from them by `attn convert` (their metadata
// records "source_format"), get that source's eval transform for the model (data::preset_for); attn's
// own training checkpoints are resized to the model's image size (PIL bilinear, both sides) and
// normalised with the mean / std they were trained with (checkpoint_inputs). The overrides of
// PretrainedSource::preprocess then apply; the crop must stay the model's image size.
// BERT (registry models of task masked-lm, with image_classifier_only = false): foreign weights in
// transformers' layout with the config.json beside them (or PretrainedSource::hf_config), or an attn
// checkpoint `attn convert` made of them; no preprocessing (text), labels from id2label.
// Class names: a Hugging Face config's id2label (hf weights, or a converted checkpoint's "id2label";
// transformers' placeholders LABEL_k do not count), an attn training checkpoint's own (image folder
// or Fashion-MNIST names), else ImageNet-1k's for 1000-class models, else none.
// Weights are streamed from the file one tensor (foreign: one layer) at a time into the model in its
// final dtypes; the model comes back in eval mode, its Linear weights packed for the GEMM
// (nn::pack_linear_weights) unless PretrainedSource::pack_linear_weights is false.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/core/dtype.h"
#include "attn/data/preprocess.h"
#include "attn/io/checkpoint.h"
#include "attn/models/registry.h"

namespace attn::models {

enum class WeightsKind {
  attn_checkpoint,   // an attn checkpoint: it names its own model
  foreign,           // foreign ViT / DeiT weights of the registry model `model`
  detect,            // an attn checkpoint when the file's header says so, else foreign weights
};

struct PretrainedSource {
  std::string path;
  WeightsKind kind = WeightsKind::attn_checkpoint;
  // Foreign weights only (an attn checkpoint describes its own model: with kind attn_checkpoint these
  // must keep their defaults; with detect they are ignored when the file is a checkpoint).
  std::string model;                                        // registry name, e.g. "vit_base_patch16_224"
  std::string format = "auto";                              // auto (from the keys) | timm | hf | torchvision
  std::string hf_config;                                    // config.json ("": the one beside hf weights, if any)
  nlohmann::json model_config = nlohmann::json::object();   // overrides on the registry defaults
  int64_t image_size = 0;                                   // > 0: the model's image size (pos_embed resampled)
  bool pos_embed_antialias = false;                         // resample as timm does (antialiased), not as DeiT
  // attn checkpoints: the model's weights, or the EMA of them that a run with --ema-decay keeps.
  io::CheckpointWeights weights = io::CheckpointWeights::model;
  // Any source.
  DType linear_dtype = DType::f32;                          // bf16: Linear weights converted as they stream in;
                                                            // i8: quantized once loaded (ops/quantize.h)
                                                            // (BERT: after an f32 load; see bert.h)
  data::PreprocessOverrides preprocess;                     // over the source's eval transform
  bool pack_linear_weights = true;                          // inference only from then on
  // false: any registry model may come back (Pretrained::module; `model` stays null unless it is an image
  // classifier): BERT's foreign weights (transformers' layout, attn/models/bert_foreign.h) and attn
  // checkpoints of them. true (the image commands): another kind of model is an error naming it.
  bool image_classifier_only = true;

  static PretrainedSource checkpoint(const std::string& path);
  static PretrainedSource foreign(const std::string& path, const std::string& model);
};

struct Pretrained {
  std::shared_ptr<ImageClassifier> model;   // in eval mode; null when the model is no image classifier
  std::shared_ptr<Model> module;            // the model whatever its kind (the same object as `model` if set)
  std::string model_name;                   // registry name ("?" when a checkpoint's config has none)
  std::string source;                       // "attn" (trained by attn) | "timm" | "hf" | "torchvision"
  data::Preprocess preprocess;              // what an image goes through before model->forward
  std::vector<std::string> labels;          // class names in class order; empty: none known
  std::string data;                         // attn training checkpoints: the data trained on (train_state "data")
  // An attn checkpoint's metadata (io::read_checkpoint_metadata); for foreign weights what `attn convert`
  // records with them: {"source_format", "source": path, "id2label" (when the HF config has one)}.
  nlohmann::json metadata;
  bool pos_embed_resampled = false;         // foreign weights: the position embedding was resampled
};

// The one entry point: predict, eval, explain, inspect, bench, convert and examples/classify.cpp load
// through it. Errors (attn::Error) name the file and what did not fit.
Pretrained load_pretrained(const PretrainedSource& source);

// The image classifier of an attn checkpoint, rebuilt from its metadata "config" (with its "model"
// name) and loaded strictly, streamed one tensor at a time into a model whose Linear weights are
// `linear_dtype` (f32; bf16: converted tensor by tensor, the f32 copy never held whole; i8: quantized
// per channel once loaded, or as they are when the file holds int8 weights from `attn quantize`); the
// optimizer state and the weights not asked for are skipped. Peak memory: the model in its final dtypes plus one tensor. In eval
// mode, not packed. The messages are train::load_checkpoint's. `weights`: the model's own, or the EMA
// weights of a run trained with --ema-decay (an error when the file has none).
std::shared_ptr<ImageClassifier> load_classifier_checkpoint(const std::string& path, DType linear_dtype = DType::f32,
                                                            io::CheckpointWeights weights = io::CheckpointWeights::model);

// int8 inference (attn/ops/quantize.h): every Linear weight of `m` but those named in keep_f32
// (nn::quantize_linear_weights_int8), and a BERT's word embeddings (one scale per token row; an MLM
// decoder tied to them reads the same codes). Returns the bytes saved.
int64_t quantize_model_int8(nn::Module& m, const std::vector<std::string>& keep_f32 = {});

// Whether `path` is an attn checkpoint (its header has the checkpoint format); reads no tensor.
bool is_attn_checkpoint(const std::string& path);

// What a checkpoint's model expects, from its metadata: config "image_size" / "in_channels" /
// "num_classes", train_state "mean" / "std" (else data::dataset_normalization of train_state "data",
// else 0.5 / 0.5) and class names (train_state "class_names" — an image folder's —, else
// Fashion-MNIST's when the data was "fashion-mnist", else "class 0", "class 1", ...).
struct CheckpointInputs {
  int64_t image_size = 0, channels = 0, num_classes = 0;
  std::vector<float> mean, std;
  std::string data;
  std::vector<std::string> class_names;
};
CheckpointInputs checkpoint_inputs(const std::string& checkpoint);
// The same from metadata already read (io::read_checkpoint_metadata); `checkpoint` names it in messages.
CheckpointInputs checkpoint_inputs(const nlohmann::json& metadata, const std::string& checkpoint);

}  // namespace attn::models
