// The confusion matrix of a classifier: counts against their definition on fixed labels and
// predictions, its errors, and the SVG heat map (class names escaped, counts, recall per row).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "attn/attn.h"
#include "attn/viz/plot.h"
#include "errors.h"
#include "files.h"
#include "train_checks.h"

using namespace attn;
using test::error_of;

namespace {


}  // namespace

TEST(Confusion, CountsRowsTrueColumnsPredicted) {
  const std::vector<int64_t> labels = {0, 0, 1, 2, 2, 2, 1, 0};
  const std::vector<int64_t> preds = {0, 1, 1, 2, 0, 2, 2, 0};
  const std::vector<int64_t> m = viz::confusion_matrix(labels, preds, 3);
  // true 0: predicted 0 twice, 1 once; true 1: 1 once, 2 once; true 2: 0 once, 2 twice.
  EXPECT_EQ(m, (std::vector<int64_t>{2, 1, 0, 0, 1, 1, 1, 0, 2}));
  EXPECT_EQ(viz::confusion_matrix({}, {}, 2), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(error_of([] { viz::confusion_matrix({0, 1}, {0}, 2); }),
            "confusion_matrix: expected as many predictions as labels, got 1 and 2");
  EXPECT_EQ(error_of([] { viz::confusion_matrix({0, 3}, {0, 1}, 3); }),
            "confusion_matrix: example 1 has label 3 and prediction 1, expected both in [0, 3)");
  EXPECT_EQ(error_of([] { viz::confusion_matrix({0}, {-1}, 3); }),
            "confusion_matrix: example 0 has label 0 and prediction -1, expected both in [0, 3)");
}

TEST(Confusion, SvgHeatMap) {
  const std::string dir = test::fresh_tmp_dir("attn_confusion_test", "svg");
  const std::string path = dir + "/cm.svg";
  viz::write_confusion_svg(path, "test <split>", {"T-shirt/top", "a<b", "Ankle boot"}, {0, 0, 1, 2, 2, 2, 1, 0},
                             {0, 1, 1, 2, 0, 2, 2, 0});
  const std::string s = test::slurp(path);
  EXPECT_EQ(s.rfind("<svg ", 0), 0u);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
  EXPECT_NE(s.find("test &lt;split&gt;: accuracy 62.5% of 8"), std::string::npos) << s.substr(0, 400);
  EXPECT_NE(s.find(">a&lt;b</text>"), std::string::npos);
  EXPECT_NE(s.find(">Ankle boot</text>"), std::string::npos);
  EXPECT_NE(s.find(">66.67%</text>"), std::string::npos);   // recall of class 0 and of class 2: 2 of 3
  EXPECT_NE(s.find(">50%</text>"), std::string::npos);      // class 1: 1 of 2
  size_t cells = 0;
  for (size_t at = s.find("<rect x="); at != std::string::npos; at = s.find("<rect x=", at + 1)) ++cells;
  EXPECT_EQ(cells, 9u);
  EXPECT_EQ(error_of([&] { viz::write_confusion_svg(path, "t", std::vector<std::string>(101, "c"), {}, {}); }),
            "write_confusion_svg: expected 1 to 100 classes, got 101");
  std::filesystem::remove_all(dir);
}
