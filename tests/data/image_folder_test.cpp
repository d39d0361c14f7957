// ImageFolder against torchvision's ImageFolder on the same tree (classes, order, targets and the
// pixels after Grayscale/Resize((S, S))/ToTensor), and its errors; plus reading it through the
// prefetching DataLoader.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "attn/attn.h"
#include "attn/data/image.h"
#include "attn/data/image_folder.h"
#include "attn/data/loader.h"
#include "errors.h"
#include "files.h"
#include "torch_ref.h"

using namespace attn;
using test::write_bytes;
using test::error_of;
using test::torch_ref;
namespace fs = std::filesystem;

namespace {

std::string fresh_dir(const std::string& name) { return test::fresh_tmp_dir("attn_folder_test", name); }

Tensor pixels(int64_t h, int64_t w, int64_t c, Generator& g) {
  Tensor t = Tensor::empty({h, w, c}, DType::u8);
  uint8_t* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = uint8_t(g.randint(256));
  return t;
}

struct File {
  std::string rel;     // relative path
  std::string format;  // PNG | JPEG
  std::string mode;    // L | RGB | RGBA
  int64_t h, w;
};

}  // namespace

TEST(ImageFolder, MatchesTorchvision) {
  const std::vector<File> files = {
      {"Sandal/b.png", "PNG", "L", 28, 28},         {"Sandal/a.png", "PNG", "L", 28, 28},
      {"Sandal/sub/c.PNG", "PNG", "RGB", 20, 31},   {"Sandal/sub-x/d.jpg", "JPEG", "RGB", 40, 40},
      {"Bag/z.jpeg", "JPEG", "L", 17, 29},          {"Bag/y.png", "PNG", "RGBA", 28, 28},
      {"ankle boot/q.JPG", "JPEG", "RGB", 56, 56},  {"ankle boot/p.png", "PNG", "L", 7, 7},
      {"Bag/a/b/deep.png", "PNG", "L", 30, 26},     {"Bag/a b/space.png", "PNG", "L", 28, 28},
  };
  Generator g(61);
  for (int64_t channels : {1, 3})
    for (int64_t size : {28, 13}) {
      const std::string root = fresh_dir("tree" + std::to_string(channels) + "_" + std::to_string(size));
      test::Tensors inputs;
      nlohmann::json rels = nlohmann::json::array();
      for (size_t i = 0; i < files.size(); ++i) {
        const File& f = files[i];
        Tensor px = pixels(f.h, f.w, int64_t(f.mode.size()), g);
        auto enc = torch_ref("images.encode", {{"pixels", px}}, {{"format", f.format}, {"mode", f.mode}});
        inputs["file" + std::to_string(i)] = enc.at("bytes");
        write_bytes(root + "/" + f.rel, enc.at("bytes").to_vector<uint8_t>());
        rels.push_back(f.rel);
      }
      // Files ImageFolder must ignore: another extension, and a stray file at the top level.
      write_bytes(root + "/Bag/readme.txt", {'x'});
      write_bytes(root + "/top.png", inputs["file0"].to_vector<uint8_t>());
      auto ref = torch_ref("images.image_folder", inputs, {{"files", rels}, {"size", size}, {"channels", channels}});

      data::ImageFolder ds(root, size, channels);
      const auto cb = ref.at("classes").to_vector<uint8_t>();
      std::string classes;
      for (const auto& c : ds.classes()) classes += (classes.empty() ? "" : "\n") + c;
      EXPECT_EQ(classes, std::string(cb.begin(), cb.end()));
      ASSERT_EQ(ds.size(), int64_t(files.size()));
      EXPECT_EQ(ds.image_shape(), (Shape{channels, size, size}));
      const auto order = ref.at("order").to_vector<int64_t>();
      for (int64_t i = 0; i < ds.size(); ++i)
        EXPECT_EQ(ds.samples()[size_t(i)].first, root + "/" + files[size_t(order[size_t(i)])].rel) << i;
      EXPECT_TENSOR_NEAR(ds.labels(), ref.at("targets"), 0.0, 0.0);
      std::vector<Tensor> imgs;
      for (int64_t i = 0; i < ds.size(); ++i) imgs.push_back(ds.get(i).image);
      // Identical up to float32 division rounding of the same u8 values.
      EXPECT_TENSOR_NEAR(stack(imgs, 0), ref.at("images"), 0.0, 0.0) << channels << " channels, size " << size;

      // Through the prefetching loader (read() from its background thread).
      auto shared = std::make_shared<data::ImageFolder>(root, size, channels);
      data::LoaderOptions lo;
      lo.batch_size = 4;
      lo.shuffle = false;
      data::DataLoader loader(shared, lo);
      data::Batch b0 = loader.next();
      data::Batch b1 = loader.next();
      EXPECT_TENSOR_NEAR(b1.images, stack({imgs[4], imgs[5], imgs[6], imgs[7]}, 0), 0.0, 0.0);
      EXPECT_EQ(b0.labels.to_vector<int64_t>(), ds.labels().slice(0, 0, 4).to_vector<int64_t>());
    }
}

TEST(ImageFolder, Errors) {
  EXPECT_EQ(error_of([] { data::ImageFolder("/nonexistent/folder", 28, 1); }),
            "image_folder: '/nonexistent/folder' is not a folder");
  const std::string empty = fresh_dir("empty");
  EXPECT_EQ(error_of([&] { data::ImageFolder(empty, 28, 1); }),
            "image_folder: found no class folders in '" + empty + "'");
  const std::string some = fresh_dir("some");
  Generator g(62);
  write_bytes(some + "/cat/1.png", data::encode_png(pixels(4, 4, 1, g)));
  fs::create_directories(some + "/dog");
  fs::create_directories(some + "/eel");
  write_bytes(some + "/eel/notes.txt", {'x'});
  EXPECT_EQ(error_of([&] { data::ImageFolder(some, 28, 1); }),
            "image_folder: found no .png/.jpg/.jpeg file for the classes dog, eel in '" + some + "'");
  EXPECT_EQ(error_of([&] { data::ImageFolder(some, 28, 2); }), "image_folder: expected channels 1 or 3, got 2");
  EXPECT_EQ(error_of([&] { data::ImageFolder(some, 0, 1); }), "image_folder: expected image_size > 0, got 0");
  // A corrupt file is named when it is read.
  write_bytes(some + "/dog/bad.png", {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0});
  write_bytes(some + "/eel/ok.png", data::encode_png(pixels(4, 4, 1, g)));
  data::ImageFolder ds(some, 4, 1);
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(error_of([&] { ds.get(1); }), "image: cannot decode '" + some + "/dog/bad.png': PNG: file is truncated");
  EXPECT_EQ(ds.get(2).label, 2);
  std::vector<float> buf(16);
  EXPECT_EQ(error_of([&] { ds.read(3, buf.data()); }), "image_folder: index 3 is outside [0, 3)");
}
