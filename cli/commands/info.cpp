// attn info MODEL: the per-layer parameter table, totals and the cost per image, from the model built
// with shapes only (models::create_shapes_only): no weights are allocated or initialised, so the
// largest ViT takes milliseconds.
#include <cstdio>

#include "attn/attn.h"
#include "attn/models/bert.h"
#include "attn/models/registry.h"
#include "attn/models/swin.h"
#include "../commands.h"

namespace attn::cli {

namespace {
// 109482240 -> "109,482,240"
std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int64_t i = int64_t(s.size()) - 3; i > (s[0] == '-' ? 1 : 0); i -= 3) s.insert(size_t(i), ",");
  return s;
}
}  // namespace

void add_info(CLI::App& app) {
  auto* c = app.add_subcommand("info", "describe a model: parameters per layer, totals, MACs/FLOPs per image");
  auto name = std::make_shared<std::string>();
  auto cfg = std::make_shared<std::string>();
  auto list = std::make_shared<bool>(false);
  c->add_option("model", *name, "model name");
  c->add_option("--model-config", *cfg, "JSON object of config overrides");
  c->add_flag("--list", *list, "list the model names");
  c->callback([name, cfg, list] {
    if (*list || name->empty()) {
      for (const auto& n : models::model_names())
        std::printf("%-32s %-20s %s\n", n.c_str(), models::model_entry(n).task.c_str(),
                    models::model_entry(n).description.c_str());
      return;
    }
    nlohmann::json over = nlohmann::json::object();
    if (!cfg->empty()) {
      over = nlohmann::json::parse(*cfg, nullptr, /*allow_exceptions=*/false);
      ATTN_CHECK(!over.is_discarded() && over.is_object(), "--model-config: expected a JSON object, got '", *cfg, "'");
    }
    auto m = models::create_shapes_only(*name, over);
    std::printf("%s (%s)\nconfig: %s\n\n%s", name->c_str(), models::model_entry(*name).task.c_str(),
                m->config().dump().c_str(), m->parameter_table().c_str());
    if (auto bert = std::dynamic_pointer_cast<models::BertPreTrainedModel>(m)) {
      // The base model alone and with the heads (the tied MLM decoder weight counted once).
      std::printf("parameters: %s BertModel, %s %s\n", with_commas(bert->num_base_parameters()).c_str(),
                  with_commas(bert->num_parameters()).c_str(),
                  models::bert_architecture_name(bert->cfg().architecture));
    }
    auto image = std::dynamic_pointer_cast<models::ImageClassifier>(m);
    if (!image) return;   // MACs are counted per image
    const int64_t macs = image->macs_per_image();
    std::printf("cost per image: %.4g GMACs = %.4g GFLOPs (FLOPs = 2 x multiply-accumulates)\n", double(macs) / 1e9,
                2.0 * double(macs) / 1e9);
    if (auto swin = std::dynamic_pointer_cast<models::SwinTransformer>(m))
      for (const auto& [part, part_macs] : swin->macs_per_stage())
        std::printf("  %-12s %.4g GMACs (%.1f%%)\n", part.c_str(), double(part_macs) / 1e9,
                    100.0 * double(part_macs) / double(macs));
  });
}

}  // namespace attn::cli
