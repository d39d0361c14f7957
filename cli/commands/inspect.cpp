// attn inspect: what a Vision Transformer learned, as the ViT paper's figure 7 shows it
// (viz/inspect.h): the cosine similarity of the patches' position embeddings, drawn as tiles, and
// the mean attention distance of every head at every depth, over a set of images.
//
//   attn inspect CKPT [IMAGE...] [--out DIR] [--json]
//   attn inspect --weights W --model NAME [--format ...] IMAGE... [--out DIR] [--json]
//
// The classifier comes from models::load_pretrained; images go through its preprocessing (predict's).
// Without images, a checkpoint trained on Fashion-MNIST uses the first --count test images; otherwise
// only the position embeddings are drawn.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/data/fashion_mnist.h"
#include "attn/data/image.h"
#include "attn/data/dataset.h"
#include "attn/data/preprocess.h"
#include "attn/models/pretrained.h"
#include "attn/viz/inspect.h"
#include "attn/viz/plot.h"
#include "../commands.h"
#include "source_flags.h"

namespace attn::cli {

namespace {

// The mean attention distance d (L, NH) in pixels: an SVG scatter at `path` (one series per head),
// the rows in j, and the text lines (per layer: min / mean / max over the heads; the plot's path).
std::string report_attention_distance(const Tensor& d, const std::string& path, const std::string& title,
                                      nlohmann::json& j) {
  const int64_t L = d.size(0), NH = d.size(1);
  std::vector<viz::Series> heads;
  std::vector<std::vector<double>> rows;
  for (int64_t h = 0; h < NH; ++h) {
    viz::Series s{"head " + std::to_string(h), {}, {}};
    s.markers = true;
    for (int64_t l = 0; l < L; ++l) {
      s.x.push_back(double(l + 1));
      s.y.push_back(d.at({l, h}));
    }
    heads.push_back(s);
  }
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> r;
    for (int64_t h = 0; h < NH; ++h) r.push_back(d.at({l, h}));
    rows.push_back(r);
  }
  viz::write_svg_plot(path, title, "network depth (layer)", heads);
  j["attention_distance_svg"] = path;
  j["attention_distance"] = rows;
  std::string text;
  for (int64_t l = 0; l < L; ++l) {
    const auto& r = rows[size_t(l)];
    double mean = 0;
    for (double v : r) mean += v;
    mean /= double(r.size());
    char line[128];
    std::snprintf(line, sizeof line, "  layer %2lld: %7.2f / %7.2f / %7.2f\n", (long long)(l + 1),
                  *std::min_element(r.begin(), r.end()), mean, *std::max_element(r.begin(), r.end()));
    text += line;
  }
  return text + "  plot: " + path + "\n";
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* c = app.add_subcommand("inspect", "a ViT's position-embedding similarity and mean attention distance "
                                          "(the ViT paper's figure 7)");
  struct Opts {
    std::vector<std::string> inputs;
    SourceFlags source;
    std::string out = "inspect", data_dir = data::FashionMnist::kDefaultDir;
    int64_t count = 128, batch = 16;
    bool json = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("inputs", o->inputs, "CKPT [IMAGE...] (an attn checkpoint), or IMAGE... with --weights");
  add_source_flags(c, o->source);
  c->add_option("--out", o->out, "the folder for pos_embed_similarity.png and attention_distance.svg")
      ->capture_default_str();
  c->add_option("--count", o->count, "without images: how many Fashion-MNIST test images (a Fashion-MNIST "
                "checkpoint)")->capture_default_str();
  c->add_option("--data-dir", o->data_dir, "where the Fashion-MNIST files are")->capture_default_str();
  c->add_option("--batch", o->batch, "images per forward pass")->capture_default_str();
  c->add_flag("--json", o->json, "print one JSON object");
  c->add_option("--threads", o->threads);
  c->callback([o] {
    apply_threads(o->threads);
    ATTN_CHECK(o->batch >= 1 && o->count >= 1, "inspect: expected --batch and --count >= 1, got ", o->batch, " and ",
               o->count);
    std::vector<std::string> images = o->inputs;
    const models::PretrainedSource src = o->source.take_source(
        images, {0, kAny, "CKPT [IMAGE...] (or --weights W --model NAME IMAGE...)", "IMAGE..."}, "inspect");
    const models::Pretrained cl = models::load_pretrained(src);
    const std::string& source = src.path;
    const std::string& data = cl.data;
    auto* vit = dynamic_cast<models::VisionTransformer*>(cl.model.get());
    ATTN_CHECK(vit != nullptr, "inspect: the model of '", source, "' (", cl.model_name,
               ") is not a Vision Transformer");
    vit->eval();
    std::filesystem::create_directories(o->out);
    nlohmann::json j = {{"model", cl.model_name}, {"source", source}, {"grid", vit->grid()},
                        {"pos_embed", vit->cfg().pos_embed}};
    std::string text;

    // Position embeddings.
    if (const Tensor pe = vit->patch_position_embeddings(); pe.defined()) {
      const Tensor s = viz::cosine_similarity_rows(pe);
      const std::string path = o->out + "/pos_embed_similarity.png";
      data::write_png(path, viz::render_pos_embed_similarity(s, vit->grid()));
      j["pos_embed_similarity_png"] = path;
      j["pos_embed_similarity"] = s.to_vector<double>();
      text += "position-embedding similarity (" + std::to_string(vit->grid()) + " x " + std::to_string(vit->grid()) +
              " tiles): " + path + "\n";
    } else {
      text += "position embeddings: none (pos_embed 'none'), nothing to draw\n";
    }

    // Mean attention distance over the images, a batch at a time.
    viz::AttentionDistance dist(*vit);
    std::string images_from;
    if (!images.empty()) {
      for (size_t first = 0; first < images.size(); first += size_t(o->batch)) {
        std::vector<Tensor> xs;
        for (size_t i = first; i < std::min(images.size(), first + size_t(o->batch)); ++i)
          xs.push_back(data::preprocess_file(images[i], cl.preprocess));
        dist.add(stack(xs, 0));
      }
      images_from = std::to_string(images.size()) + " images";
    } else if (data == "fashion-mnist") {
      dist = viz::fashion_mnist_attention_distance(*vit, o->data_dir, o->count, o->batch);
      images_from = "the first " + std::to_string(dist.images()) + " Fashion-MNIST test images";
    }
    const int64_t seen = dist.images();
    if (seen > 0) {
      j["images"] = seen;
      text += "mean attention distance in pixels (" + images_from + "; image " +
              std::to_string(vit->cfg().image_size) + " px), per layer: min / mean / max over the heads\n";
      text += report_attention_distance(dist.mean(), o->out + "/attention_distance.svg",
                                        "mean attention distance (pixels), " + cl.model_name + ", " + images_from, j);
    } else {
      text += "mean attention distance: no images (give IMAGE... files)\n";
    }
    if (o->json)
      std::printf("%s\n", j.dump().c_str());
    else
      std::printf("%s", text.c_str());
  });
}

}  // namespace attn::cli
