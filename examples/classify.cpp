// Classifies one image with a Vision Transformer through the installed library: load the weights with
// their source's preprocessing and class names (models::load_pretrained), print the top-5 classes
// (infer::classify_files).
//
//   classify CKPT.safetensors IMAGE                     # an attn checkpoint (from `attn train` / `attn convert`)
//   classify W.safetensors IMAGE --model NAME [--format timm|hf|torchvision]
//                                                       # foreign ViT/DeiT weights, e.g.
//   classify vit_b_16.safetensors cat.jpg --model vit_base_patch16_224 --format torchvision
//
// Build it against the installed package (see examples/CMakeLists.txt):
//   cmake --install build --prefix /tmp/attn-install
//   cmake -S examples -B build/examples -DCMAKE_PREFIX_PATH=/tmp/attn-install && cmake --build build/examples
//   ./build/examples/classify CKPT IMAGE
// Without arguments it saves a small random-weight ViT as an attn checkpoint, writes a random image and
// classifies that (a smoke run: the classes mean nothing).
#include <cstdio>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/infer/classify.h"
#include "attn/models/pretrained.h"
#include "attn/train/checkpoint.h"

int main(int argc, char** argv) {
  using namespace attn;
  try {
    std::string model_name, format = "auto";
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--model" && i + 1 < argc) model_name = argv[++i];
      else if (a == "--format" && i + 1 < argc) format = argv[++i];
      else pos.push_back(a);
    }
    if (pos.empty()) {
      // Smoke run: a tiny random ViT saved as a checkpoint, and a random 64x48 image.
      auto m = models::create_model("vit", {{"image_size", 32}, {"patch_size", 8}, {"in_channels", 3},
                                            {"num_classes", 1000}, {"dim", 64}, {"depth", 2}, {"heads", 4}});
      pos.push_back("/tmp/attn_classify_example.safetensors");
      train::save_checkpoint(pos[0], *m, nullptr, {{"config", m->config()}});
      Generator g(0);
      Tensor px = Tensor::empty({48, 64, 3}, DType::u8);
      for (int64_t i = 0; i < px.numel(); ++i) px.data<uint8_t>()[i] = uint8_t(g.uniform() * 255.0);
      pos.push_back("/tmp/attn_classify_example.png");
      data::write_png(pos[1], px);
    }
    if (pos.size() != 2) {
      std::fprintf(stderr, "usage: classify [CKPT IMAGE | WEIGHTS IMAGE --model NAME [--format F]]\n");
      return 2;
    }
    // An attn checkpoint rebuilds its own model; foreign weights need the registry name of theirs.
    models::PretrainedSource source = model_name.empty() ? models::PretrainedSource::checkpoint(pos[0])
                                                         : models::PretrainedSource::foreign(pos[0], model_name);
    if (!model_name.empty()) source.format = format;
    const models::Pretrained p = models::load_pretrained(source);
    const infer::ImagePrediction r = infer::classify_files(*p.model, {pos[1]}, p.preprocess, p.labels, 5).front();
    if (!r.error.empty()) throw Error(r.error);
    std::printf("%s (%s, %s preprocessing: %s)\n", r.path.c_str(), p.model_name.c_str(), p.source.c_str(),
                p.preprocess.describe().c_str());
    for (size_t i = 0; i < r.top.size(); ++i)
      std::printf("  %zu. %-28s %6.2f%%\n", i + 1, r.top[i].name.c_str(), 100.0 * r.top[i].probability);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
}
