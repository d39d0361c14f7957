// models::parameter_count and models::create_shapes_only, for every registered model: counting
// allocates no tensor storage, and the model built with shapes only (attn::ShapesOnlyGuard) has the
// parameters and buffers of the model built for real, name for name (shape, dtype), for every model
// small enough to build for real here. Running a shapes-only model is an error naming the guard.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attn/attn.h"
#include "attn/core/memory.h"
#include "attn/models/registry.h"
#include "errors.h"

using namespace attn;
using test::error_of;

namespace {

// Models up to this many parameters are also built for real (initialising ViT-B's 86M weights takes
// seconds, longer under the sanitizers); the shapes-only build is checked for all of them.
constexpr int64_t kRealBuildLimit = 8'000'000;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// "name shape dtype" per tensor, in order.
std::vector<std::string> describe(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name + " " + shape_str(t.shape()) + " " + dtype_name(t.dtype()));
  return out;
}

}  // namespace

TEST(ParameterCount, EveryModelWithoutAllocatingTensorStorage) {
  const std::vector<std::string> names = models::model_names();
  ASSERT_FALSE(names.empty());
  for (const auto& name : names) {
    const MemoryStats before = memory_stats();
    const int64_t n = models::parameter_count(name);
    const MemoryStats after = memory_stats();
    EXPECT_GT(n, 0) << name;
    EXPECT_EQ(after.allocations, before.allocations) << name << ": tensor storage allocated while counting";
    EXPECT_EQ(after.peak_bytes, before.peak_bytes) << name;
  }
  EXPECT_FALSE(shapes_only_mode()) << "the guard ends with the count";
}

TEST(ParameterCount, ShapesOnlyModelsHaveTheRealModelsParametersAndBuffers) {
  int compared = 0;
  for (const auto& name : models::model_names()) {
    auto shapes = models::create_shapes_only(name);
    for (const auto& [k, t] : shapes->named_parameters()) EXPECT_TRUE(t.is_shapes_only()) << name << " " << k;
    if (shapes->num_parameters() > kRealBuildLimit) continue;
    manual_seed(1);
    auto real = models::create(name);
    EXPECT_EQ(shapes->num_parameters(), real->num_parameters()) << name;
    EXPECT_EQ(describe(shapes->named_parameters()), describe(real->named_parameters())) << name;
    EXPECT_EQ(describe(shapes->named_buffers()), describe(real->named_buffers())) << name;
    EXPECT_EQ(shapes->config(), real->config()) << name;
    EXPECT_EQ(shapes->parameter_table(), real->parameter_table()) << name;
    for (const auto& [k, t] : real->named_parameters()) EXPECT_FALSE(t.is_shapes_only()) << name << " " << k;
    ++compared;
  }
  EXPECT_GE(compared, 10) << "too few models were small enough to compare with a real build";
}

// The count follows the config overrides, and a bad name or config gives create()'s errors.
TEST(ParameterCount, ConfigOverridesAndErrors) {
  const nlohmann::json over = {{"depth", 2}, {"dim", 64}, {"heads", 2}};
  manual_seed(1);
  EXPECT_EQ(models::parameter_count("vit", over), models::create("vit", over)->num_parameters());
  EXPECT_LT(models::parameter_count("vit", over), models::parameter_count("vit"));
  EXPECT_EQ(error_of([] { models::parameter_count("no_such_model"); }),
            error_of([] { models::create("no_such_model"); }));
  EXPECT_EQ(error_of([] { models::parameter_count("vit", {{"depht", 2}}); }),
            error_of([] { models::create("vit", {{"depht", 2}}); }));
  EXPECT_FALSE(shapes_only_mode()) << "the guard ends when create() throws";
}

TEST(ParameterCount, RunningAShapesOnlyModelIsAnErrorNamingTheGuard) {
  auto m = models::create_model("vit_fmnist_small");
  auto shapes = std::dynamic_pointer_cast<models::ImageClassifier>(models::create_shapes_only("vit_fmnist_small"));
  ASSERT_NE(shapes, nullptr);
  const Tensor x = Tensor::zeros({2, 1, 28, 28});
  EXPECT_EQ(m->forward(x).shape(), (Shape{2, 10}));
  const std::string e = error_of([&] { shapes->forward(x); });
  EXPECT_TRUE(has(e, "has shapes only (it was made under an attn::ShapesOnlyGuard")) << e;
  EXPECT_EQ(shapes->macs_per_image(), m->macs_per_image());
}
