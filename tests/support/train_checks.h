// Checks shared by the trainer tests (image classifier and seq2seq): bitwise equality of loss
// sequences and of whole checkpoints (weights and optimizer state), and a fresh temporary directory.
//
//   EXPECT_TRUE(test::same_bits(test::concat(a.step_losses, b.step_losses), ref.step_losses));
//   EXPECT_TRUE(test::same_checkpoint(b.checkpoint, ref.checkpoint));
#pragma once
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attn/io/safetensors.h"

namespace attn::test {

// An empty directory <tmp>/<prefix>_<name>_<pid> (removed first if it exists).
inline std::string fresh_tmp_dir(const std::string& prefix, const std::string& name) {
  std::string d = std::filesystem::temp_directory_path().string() + "/" + prefix + "_" + name + "_" +
                  std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Bitwise equality of two sequences of doubles, naming the first difference.
inline ::testing::AssertionResult same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " losses";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "step " << i + 1 << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

// Every tensor of two checkpoints byte for byte (weights and optimizer state).
inline ::testing::AssertionResult same_checkpoint(const std::string& p, const std::string& q) {
  auto a = io::load_safetensors(p), b = io::load_safetensors(q);
  if (a.tensors.size() != b.tensors.size()) return ::testing::AssertionFailure() << "tensor counts differ";
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor &x = a.tensors[i].second, &y = b.tensors[i].second;
    if (a.tensors[i].first != b.tensors[i].first || x.shape() != y.shape() ||
        std::memcmp(x.contiguous().raw_data(), y.contiguous().raw_data(), size_t(x.numel()) * x.element_size()) != 0)
      return ::testing::AssertionFailure() << "tensor " << a.tensors[i].first << " differs";
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace attn::test
