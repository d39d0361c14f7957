// Checks shared by the trainer tests (image classifier and seq2seq): a quiet config, a run killed
// and resumed, bitwise equality of loss sequences and of whole checkpoints (weights and optimizer
// state), and a fresh temporary directory (files.h).
//
//   auto cfg = test::quiet<train::TrainConfig>(dir + "/run");   // no progress bar, no summaries
//   auto [a, b] = test::killed_and_resumed(cfg, 7, train::train_classifier);
//   EXPECT_TRUE(test::resumed_exactly(a, b, ref));   // a's losses then b's are ref's; b's checkpoint is ref's
#pragma once
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "attn/io/safetensors.h"
#include "files.h"

namespace attn::test {

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

// A trainer config (train::TrainConfig or train::Seq2SeqConfig) writing to out, with no progress
// bar and no summary lines.
template <class Config>
Config quiet(const std::string& out) {
  Config cfg;
  cfg.out = out;
  cfg.progress = false;
  cfg.quiet = true;
  return cfg;
}

// cfg trained with a checkpoint every step and stopped after step k (as if killed), then `between`
// (the first run's result at hand), then trained again with resume to the end: {first, second}.
template <class Config, class Train, class Between>
auto killed_and_resumed(Config cfg, int64_t k, Train&& train, Between&& between) {
  cfg.checkpoint_every = 1;
  cfg.stop_after = k;
  auto first = train(cfg);
  between(first);
  cfg.stop_after = 0;
  cfg.resume = true;
  auto second = train(cfg);
  return std::pair{std::move(first), std::move(second)};
}
template <class Config, class Train>
auto killed_and_resumed(Config cfg, int64_t k, Train&& train) {
  return killed_and_resumed(std::move(cfg), k, std::forward<Train>(train), [](const auto&) {});
}

// A killed run (first) and its resumption (second) against the uninterrupted run: the step losses
// bit for bit, and the final checkpoints byte for byte.
template <class Result>
::testing::AssertionResult resumed_exactly(const Result& first, const Result& second, const Result& uninterrupted) {
  const auto losses = same_bits(concat(first.step_losses, second.step_losses), uninterrupted.step_losses);
  const auto weights = same_checkpoint(second.checkpoint, uninterrupted.checkpoint);
  if (losses && weights) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  if (!losses) failure << "step losses: " << losses.message() << (weights ? "" : "; ");
  if (!weights) failure << "checkpoint: " << weights.message();
  return failure;
}

}  // namespace attn::test
