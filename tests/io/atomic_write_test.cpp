// Atomic writes (save_safetensors, write_file_atomic, the checkpoint file): each write goes through a
// temporary of its own beside the target, so concurrent writers to one path always leave a whole
// file, one of theirs; a failed write (a full disk, an unrenamable target, a missing directory)
// throws an attn::Error naming the path, leaves the old file as it was and no temporary behind, and
// closes its descriptor.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "attn/attn.h"
#include "attn/io/checkpoint.h"
#include "attn/io/safetensors.h"
#include "errors.h"
#include "files.h"
#include "resources.h"

using namespace attn;
using test::error_of;
namespace fs = std::filesystem;

namespace {


// Writer w's file: n floats equal to w, and w in the metadata.
io::TensorList filled(int w, int64_t n) { return {{"w", Tensor::full({n}, double(w))}, {"b", Tensor::full({7}, double(w))}}; }

// Which writer wrote the file at path ("" when it is whole and consistent; else what is wrong).
std::string check_whole(const std::string& path, int64_t n, int* writer) {
  io::SafetensorsFile f = io::load_safetensors(path);
  const int w = std::stoi(f.metadata.at("writer"));
  const Tensor* t = f.find("w");
  if (!t || t->numel() != n) return "tensor w missing or of another size";
  const float* p = t->data<float>();
  for (int64_t i = 0; i < n; ++i)
    if (p[i] != float(w)) return "writer " + std::to_string(w) + "'s file holds " + std::to_string(p[i]) + " at " + std::to_string(i);
  *writer = w;
  return "";
}

// Each test's files in a fresh directory, removed when the test passes.
class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_tmp_dir("attn_atomic_write_test", ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace

TEST_F(AtomicWrite, ConcurrentWritersToOnePathLeaveOneWholeFile) {
  const std::string path = dir() + "/shared.safetensors";
  constexpr int kWriters = 4, kRounds = 25;
  constexpr int64_t kFloats = 1 << 18;   // 1 MiB: a write takes long enough to overlap
  std::vector<std::string> errors(kWriters);
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      const io::TensorList t = filled(w, kFloats);
      for (int r = 0; r < kRounds && errors[size_t(w)].empty(); ++r) {
        try {
          io::save_safetensors(path, t, {{"writer", std::to_string(w)}});
        } catch (const std::exception& e) {
          errors[size_t(w)] = e.what();
        }
      }
    });
  }
  // Meanwhile every read sees a whole file of one writer.
  std::string torn;
  int reads = 0;
  std::thread reader([&] {
    while (!done.load() && torn.empty()) {
      if (!fs::exists(path)) continue;
      int w = -1;
      try {
        torn = check_whole(path, kFloats, &w);
      } catch (const std::exception& e) {
        torn = e.what();
      }
      ++reads;
    }
  });
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(errors[size_t(w)], "") << "writer " << w;
  EXPECT_EQ(torn, "") << "a read of the file while it was being replaced";
  int w = -1;
  EXPECT_EQ(check_whole(path, kFloats, &w), "");
  EXPECT_TRUE(w >= 0 && w < kWriters) << w;
  EXPECT_TRUE(io::unfinished_writes(path).empty());
  std::printf("  %d writers x %d writes of 1 MiB, %d reads: the file is writer %d's\n", kWriters, kRounds, reads, w);
}

// Forked writers (separate processes, as two `attn` runs on one output) too.
TEST_F(AtomicWrite, ConcurrentProcessesWritingOnePathLeaveOneWholeFile) {
  const std::string path = dir() + "/processes.safetensors";
  constexpr int64_t kFloats = 1 << 18;
  std::vector<io::TensorList> files;   // made here: a child starts no work of its own
  for (int w = 0; w < 3; ++w) files.push_back(filled(w, kFloats));
  std::vector<std::thread> waits;
  std::vector<test::ChildResult> results(3);
  for (int w = 0; w < 3; ++w) {
    waits.emplace_back([&, w] {
      results[size_t(w)] = test::in_child([&] {
        for (int r = 0; r < 20; ++r) io::save_safetensors(path, files[size_t(w)], {{"writer", std::to_string(w)}});
        return std::string("ok");
      });
    });
  }
  for (auto& t : waits) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.exited_ok() && r.out == "ok") << r.describe();
  int w = -1;
  EXPECT_EQ(check_whole(path, kFloats, &w), "");
  EXPECT_TRUE(io::unfinished_writes(path).empty());
}

// A full disk (RLIMIT_FSIZE in a child: writes past 256 KiB fail with EFBIG, for root too): writing a
// 4 MiB checkpoint over a good one fails naming the path, the good one stays, no temporary is left,
// and no descriptor leaks.
TEST_F(AtomicWrite, DiskFullLeavesTheOldCheckpointAndNoTemporary) {
  const std::string path = dir() + "/checkpoint.safetensors";
  io::write_checkpoint(path, {{"w", Tensor::full({16}, 1.0)}}, std::nullopt, {{"train_state", {{"step", 1}}}});
  const std::string good = test::slurp(path);
  const io::TensorList big = {{"w", Tensor::full({1 << 20}, 2.0)}};
  const test::ChildResult r = test::in_child([&] {
    const size_t fds = test::open_descriptors();
    std::string errors;
    {
      test::FileSizeLimit limit(256 << 10);
      for (int i = 0; i < 3; ++i)
        errors = error_of([&] { io::write_checkpoint(path, big, std::nullopt, {{"train_state", {{"step", 2}}}}); });
    }
    const size_t after = test::open_descriptors();
    if (after != fds) return "descriptors: " + std::to_string(fds) + " before, " + std::to_string(after) + " after";
    return errors;
  });
  ASSERT_TRUE(r.exited_ok()) << r.describe();
  EXPECT_EQ(r.out, "write '" + path + "': write failed after 262144 bytes: File too large");
  EXPECT_EQ(test::slurp(path), good);
  EXPECT_EQ(io::read_checkpoint_metadata(path).at("train_state").at("step"), 1);
  EXPECT_TRUE(io::unfinished_writes(path).empty());
}

TEST_F(AtomicWrite, FailuresNameThePathLeaveNoTemporaryAndCloseTheirDescriptor) {
  const size_t fds = test::open_descriptors();
  // The target is a directory: the rename fails, the directory stays, the temporary goes.
  const std::string target = dir() + "/a_directory";
  fs::create_directories(target + "/inside");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(error_of([&] { io::write_file_atomic(target, "text"); }),
              "write '" + target + "': rename failed: Is a directory");
  EXPECT_TRUE(fs::is_directory(target + "/inside"));
  EXPECT_TRUE(io::unfinished_writes(target).empty());
  // The directory does not exist: the temporary cannot be created.
  const std::string nowhere = dir() + "/no/such/dir/f.safetensors";
  const std::string missing = error_of([&] { io::save_safetensors(nowhere, {{"w", Tensor::zeros({2})}}); });
  EXPECT_EQ(missing.rfind("write '" + nowhere + "': cannot create '" + nowhere + ".tmp.", 0), 0u) << missing;
  EXPECT_NE(missing.find("': No such file or directory"), std::string::npos) << missing;
  // A list that cannot be written (a name twice) is refused before anything is written.
  const std::string path = dir() + "/twice.safetensors";
  io::write_file_atomic(path, "old");
  EXPECT_EQ(error_of([&] { io::save_safetensors(path, {{"a", Tensor::zeros({1})}, {"a", Tensor::zeros({1})}}); }),
            "safetensors: tensor name 'a' appears twice");
  EXPECT_EQ(test::slurp(path), "old");
  EXPECT_EQ(test::open_descriptors(), fds);
}

TEST_F(AtomicWrite, TemporariesAreUniqueAndOnlyKillsLeaveThem) {
  const std::string path = dir() + "/log.jsonl";
  io::write_file_atomic(path, "one\n");
  EXPECT_EQ(test::slurp(path), "one\n");
  // What a kill mid-write leaves: temporaries beside the file; only names of the right form count.
  test::write_bytes(path + ".tmp.abc123", "torn");
  test::write_bytes(path + ".tmp.Zz9Yy8", "torn");
  test::write_bytes(path + ".tmp", "an older scheme's");
  test::write_bytes(path + ".tmp.toolong1", "someone else's");
  EXPECT_EQ(io::unfinished_writes(path), (std::vector<std::string>{path + ".tmp.Zz9Yy8", path + ".tmp.abc123"}));
  io::write_file_atomic(path, "two\n");   // a write does not touch them
  EXPECT_EQ(io::unfinished_writes(path).size(), 2u);
  io::remove_unfinished_writes(path);
  EXPECT_TRUE(io::unfinished_writes(path).empty());
  EXPECT_TRUE(fs::exists(path + ".tmp.toolong1"));
  EXPECT_EQ(test::slurp(path), "two\n");
  // The new file gets the usual permissions (0644 less the umask), not mkstemp's 0600.
  const auto perms = fs::status(path).permissions();
  EXPECT_NE(perms & fs::perms::owner_read, fs::perms::none);
  EXPECT_EQ(perms & fs::perms::owner_exec, fs::perms::none);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(perms & fs::perms::group_read, (mask & 040) ? fs::perms::none : fs::perms::group_read);
}
