// attn info MODEL: the per-layer parameter table, totals and the cost per image.
#include <cstdio>

#include "attn/attn.h"
#include "attn/models/registry.h"
#include "attn/models/swin.h"
#include "../commands.h"

namespace attn::cli {

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
    auto m = models::create(*name, over);
    std::printf("%s (%s)\nconfig: %s\n\n%s", name->c_str(), models::model_entry(*name).task.c_str(),
                m->config().dump().c_str(), m->parameter_table().c_str());
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
