// `attn info`: the parameter table's total line and the cost per image of a small model (the
// library's numbers), a translation model (no cost line), the model list, and bad arguments.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "attn/attn.h"
#include "attn/models/registry.h"
#include "attn_cli.h"
#include "train_checks.h"

using namespace attn;
using test::run_attn;

namespace {

// The "total" line of the parameter table: its number, or -1.
int64_t total_of(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"((^|\n)total +(\d+)\n)"))) return -1;
  return std::stoll(m[2].str());
}

}  // namespace

TEST(InfoCli, TotalsAndCostOfSmallModels) {
  const std::string dir = test::fresh_tmp_dir("attn_info_cli_test", "info");
  {
    const test::CliRun r = run_attn(dir, {"info", "vit_fmnist_demo"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto m = models::create_model("vit_fmnist_demo");
    EXPECT_EQ(total_of(r.out), m->num_parameters()) << r.out;
    EXPECT_EQ(r.out.rfind("vit_fmnist_demo (image-classification)\nconfig: ", 0), 0u) << r.out;
    char cost[160];
    std::snprintf(cost, sizeof cost, "cost per image: %.4g GMACs = %.4g GFLOPs", double(m->macs_per_image()) / 1e9,
                  2.0 * double(m->macs_per_image()) / 1e9);
    EXPECT_NE(r.out.find(cost), std::string::npos) << "expected '" << cost << "' in\n" << r.out;
  }
  {  // overrides change the model described
    const test::CliRun r = run_attn(dir, {"info", "vit", "--model-config", R"({"dim":16,"depth":1,"heads":2})"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(total_of(r.out), models::create_model("vit", {{"dim", 16}, {"depth", 1}, {"heads", 2}})->num_parameters())
        << r.out;
  }
  {  // a translation model: the table and total, no cost per image
    const nlohmann::json cfg = {{"vocab_size", 40}, {"d_model", 16}, {"nhead", 2}, {"layers", 1}, {"d_ff", 32}};
    const test::CliRun r = run_attn(dir, {"info", "transformer", "--model-config", cfg.dump()});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(total_of(r.out), models::create_seq2seq("transformer", cfg)->num_parameters()) << r.out;
    EXPECT_EQ(r.out.find("cost per image"), std::string::npos) << r.out;
  }
  {  // --list: every registered name, one a line
    const test::CliRun r = run_attn(dir, {"info", "--list"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const std::string& n : models::model_names())
      EXPECT_TRUE(std::regex_search(r.out, std::regex("(^|\n)" + n + " +" + models::model_entry(n).task + " ")))
          << n << " missing from\n" << r.out;
  }
  test::CliRun bad = run_attn(dir, {"info", "vit", "--model-config", "[1, 2]"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--model-config: expected a JSON object, got '[1, 2]'"), std::string::npos) << bad.err;
  bad = run_attn(dir, {"info", "no_such_model"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("no_such_model"), std::string::npos) << bad.err;
  std::filesystem::remove_all(dir);
}
