// Classifies one image with a Vision Transformer through the installed library: load the weights,
// preprocess the image as the weights' source does, print the top-5 classes.
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
// Without arguments it builds a small random-weight ViT, writes a random image and classifies that
// (a smoke run: the classes mean nothing).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/data/preprocess.h"
#include "attn/io/checkpoint.h"
#include "attn/io/name_maps.h"
#include "attn/train/tasks/image_classification.h"
#include "attn/train/explain.h"

int main(int argc, char** argv) {
  using namespace attn;
  try {
    std::string weights, image, model_name, format = "auto";
    std::vector<std::string> pos;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--model" && i + 1 < argc) model_name = argv[++i];
      else if (a == "--format" && i + 1 < argc) format = argv[++i];
      else pos.push_back(a);
    }
    std::shared_ptr<models::ImageClassifier> model;
    data::Preprocess pre;
    if (pos.empty()) {
      // Smoke run: a tiny random ViT and a random 64x48 image.
      model = models::create_model("vit", {{"image_size", 32}, {"patch_size", 8}, {"in_channels", 3},
                                           {"num_classes", 1000}, {"dim", 64}, {"depth", 2}, {"heads", 4}});
      pre = data::preset_for("vit", data::WeightSource::timm, 32);
      Generator g(0);
      Tensor px = Tensor::empty({48, 64, 3}, DType::u8);
      for (int64_t i = 0; i < px.numel(); ++i) px.data<uint8_t>()[i] = uint8_t(g.uniform() * 255.0);
      image = "/tmp/attn_classify_example.png";
      data::write_png(image, px);
    } else if (pos.size() == 2) {
      weights = pos[0];
      image = pos[1];
      if (model_name.empty()) {
        // An attn checkpoint rebuilds its own model; its image size and normalisation are in its metadata.
        model = train::load_classifier(weights);
        const train::CheckpointInputs in = train::checkpoint_inputs(weights);
        const nlohmann::json meta = io::read_checkpoint_metadata(weights);
        if (meta.contains("source_format")) {
          // Made by `attn convert` from foreign weights: their source's eval transform.
          pre = data::preset_for(meta["config"].value("model", std::string()),
                                 data::parse_weight_source(meta["source_format"].get<std::string>()), in.image_size);
        } else {
          // Trained by attn: resized to the model's size and normalised as in training.
          pre.resize_size = pre.crop_size = in.image_size;
          pre.squash = true;
          pre.mean = in.mean;
          pre.std = in.std;
        }
        pre.channels = in.channels;
      } else {
        io::ForeignVitOptions o;
        o.model = model_name;
        io::TensorList sd = io::with_aliases(io::load_safetensors(weights));
        const io::WeightFormat f = format == "auto" ? io::detect_weight_format(sd) : io::parse_weight_format(format);
        o.format = f;
        auto vit = io::load_foreign_vit(sd, o).model;
        pre = data::preset_for(model_name, data::parse_weight_source(io::weight_format_name(f)), vit->cfg().image_size);
        model = vit;
      }
    } else {
      std::fprintf(stderr, "usage: classify [CKPT IMAGE | WEIGHTS IMAGE --model NAME [--format F]]\n");
      return 2;
    }
    model->eval();
    const Tensor x = data::preprocess_file(image, pre).unsqueeze(0);   // (1, C, S, S)
    std::vector<double> logits;
    {
      NoGradGuard no_grad;
      logits = model->forward(x).to_vector<double>();
    }
    const double mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (double& l : logits) z += l = std::exp(l - mx);
    std::vector<size_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + std::min<size_t>(5, order.size()), order.end(),
                      [&](size_t a, size_t b) { return logits[a] > logits[b]; });
    const auto& names = data::imagenet_class_names();
    std::printf("%s (%s)\n", image.c_str(), pre.describe().c_str());
    for (size_t i = 0; i < std::min<size_t>(5, order.size()); ++i) {
      const size_t c = order[i];
      const std::string name = logits.size() == names.size() ? names[c] : "class " + std::to_string(c);
      std::printf("  %zu. %-28s %6.2f%%\n", i + 1, name.c_str(), 100.0 * logits[c] / z);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
}
