// Where an inference command (predict, eval, explain, inspect) gets its image classifier: the flags
// and positional arguments that name it, as a models::PretrainedSource for models::load_pretrained.
//
//   SourceFlags f;  add_source_flags(c, f, "f32 | bf16 (Linear weights)");   // at registration
//   models::Pretrained p = models::load_pretrained(
//       f.take_source(args, {1, kAny, "CKPT IMAGE... (or --weights W --model NAME IMAGE...)", "IMAGE..."}, "predict"));
//
// An attn checkpoint is the first positional argument; with --weights W --model NAME the arguments
// are the command's other inputs (images) alone. The flags:
//   --weights --model --format --config --model-config --image-size --pos-embed-antialias   foreign weights
//   --resize --crop --crop-pct --interpolation --mean --std                                  preprocessing
//   --dtype f32 | bf16 | int8                                                                where offered
//   --ema                                     an attn checkpoint's EMA weights (a run trained with --ema-decay)
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "attn/models/pretrained.h"

namespace attn::cli {

inline constexpr size_t kAny = std::numeric_limits<size_t>::max();

// The positional arguments a command takes besides the source, and how its usage reads in errors.
struct Positionals {
  size_t min_inputs = 0, max_inputs = kAny;   // with either source
  const char* usage = "";           // "CKPT IMAGE... (or --weights W --model NAME IMAGE...)"
  const char* weights_usage = "";   // with --weights: "IMAGE..."
};

struct SourceFlags {
  std::string weights, model, format = "auto", config, model_config;
  int64_t image_size = 0;
  bool pos_embed_antialias = false;
  int64_t resize = 0, crop = 0;
  double crop_pct = 0;
  std::string interpolation, mean, std;
  std::string dtype = "f32";
  bool ema = false;

  bool foreign() const { return !weights.empty(); }
  // Any of --resize --crop --crop-pct --interpolation --mean --std.
  bool preprocess_given() const;
  // The source, taken out of `args` (the attn checkpoint, the first of them, unless --weights names
  // foreign weights); what is left are the command's inputs. Flag errors name `cmd`.
  models::PretrainedSource take_source(std::vector<std::string>& args, const Positionals& p, const char* cmd) const;
};

// Adds the foreign-weights and preprocessing flags, and --dtype when dtype_help is not null.
void add_source_flags(CLI::App* c, SourceFlags& f, const char* dtype_help = nullptr);

}  // namespace attn::cli
