// The two tiny training runs that fuzz/resume_fuzz.cpp resumes (and fuzz/write_seeds.cpp takes the
// seeds' metadata from): trained once per process, one step each, in a temporary directory.
//
//   const attn::fuzz::ResumeRun& r = attn::fuzz::resume_runs()[0];   // 0: image, 1: translation
//   r.checkpoint.metadata;   // the checkpoint after step 1; r.cfg resumes it
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/data/image.h"
#include "attn/io/safetensors.h"
#include "attn/train/trainer.h"

namespace attn::fuzz {

struct ResumeRun {
  attn::train::TrainConfig cfg;
  attn::io::SafetensorsFile checkpoint;   // after its first step
};

inline void remove_resume_root();

// <tmp>/attn_resume_fuzz_<pid>, removed at exit (the string is never freed: the exit handler reads it).
inline const std::string& resume_root() {
  static const std::string* dir = [] {
    auto* d = new std::string(std::filesystem::temp_directory_path().string() + "/attn_resume_fuzz_" +
                              std::to_string(::getpid()));
    std::filesystem::remove_all(*d);
    std::filesystem::create_directories(*d);
    std::atexit(remove_resume_root);
    return d;
  }();
  return *dir;
}

inline void remove_resume_root() {
  std::error_code ec;
  std::filesystem::remove_all(resume_root(), ec);
}

// DIR/{train,test}/{a,b}/N.png: 8 x 8 gray images, 6 per class for training, 2 for testing.
inline std::string resume_image_folder() {
  const std::string dir = resume_root() + "/images";
  for (const char* split : {"train", "test"})
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < (split[1] == 'r' ? 6 : 2); ++i) {
        attn::Tensor img = attn::Tensor::full({8, 8, 1}, double(40 * c + 7 * i), attn::DType::u8);
        const std::string sub = dir + "/" + split + "/" + (c ? "b" : "a");
        std::filesystem::create_directories(sub);
        attn::data::write_png(sub + "/" + std::to_string(i) + ".png", img);
      }
  return dir;
}

inline attn::train::TrainConfig resume_base(const std::string& name) {
  attn::train::TrainConfig cfg;
  cfg.out = resume_root() + "/" + name;
  cfg.progress = false;
  cfg.quiet = true;
  cfg.max_steps = 2;
  cfg.stop_after = 1;
  return cfg;
}

inline ResumeRun make_resume_run(attn::train::TrainConfig cfg) {
  attn::train::train(cfg);
  ResumeRun r{cfg, attn::io::load_safetensors(*cfg.out + "/checkpoint.safetensors")};
  r.cfg.resume = true;
  return r;
}

inline std::vector<ResumeRun>& resume_runs() {
  static std::vector<ResumeRun> r = [] {
    std::vector<ResumeRun> out;
    attn::train::TrainConfig image = resume_base("image");
    image.model = "mlp";
    image.model_config = {{"image_size", 8}, {"in_channels", 1}, {"hidden", {4}}};
    image.data = resume_image_folder();
    image.image.batch = 2;
    image.checkpoint_every = 1;
    out.push_back(make_resume_run(image));
    attn::train::TrainConfig tr = resume_base("translation");
    tr.model = "transformer";
    tr.model_config = {{"d_model", 8}, {"nhead", 2}, {"encoder_layers", 1}, {"decoder_layers", 1},
                       {"d_ff", 16}, {"dropout", 0.0}, {"max_length", 64}};
    tr.data = "synthetic:copy";
    tr.translation.synthetic_size = 40;
    tr.translation.max_tokens = 64;
    tr.translation.eval_sentences = 2;
    tr.translation.beam = 1;
    tr.checkpoint_every = 1;
    out.push_back(make_resume_run(tr));
    return out;
  }();
  return r;
}

}  // namespace attn::fuzz
