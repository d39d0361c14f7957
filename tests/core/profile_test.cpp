// The per-op profile (attn/core/profile.h): exclusive times of nested scopes, call counts, only the
// starting thread recording, nothing recorded when no profile runs; and the ops it instruments.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "attn/attn.h"
#include "attn/core/profile.h"

namespace attn {
namespace {

void busy(double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
  }
}

const profile::OpTime* find(const std::vector<profile::OpTime>& ops, const char* name) {
  for (const auto& op : ops)
    if (std::strcmp(op.name, name) == 0) return &op;
  return nullptr;
}

TEST(Profile, NestedScopesCountTheirOwnTimeOnly) {
  EXPECT_FALSE(profile::recording());
  profile::start();
  EXPECT_TRUE(profile::recording());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    ATTN_PROFILE("outer");
    busy(0.004);
    {
      ATTN_PROFILE("inner");
      busy(0.006);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto ops = profile::stop();
  EXPECT_FALSE(profile::recording());
  ASSERT_EQ(ops.size(), 2u);
  const profile::OpTime* outer = find(ops, "outer");
  const profile::OpTime* inner = find(ops, "inner");
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(outer->calls, 3);
  EXPECT_EQ(inner->calls, 3);
  EXPECT_STREQ(ops[0].name, "inner") << "the most time first";
  EXPECT_GE(inner->seconds, 0.018);
  EXPECT_GE(outer->seconds, 0.012);
  // Counted in both, the inner time would make the sum exceed the wall time by 0.018 s.
  EXPECT_LE(outer->seconds + inner->seconds, wall + 1e-6) << "the inner scope's time is not the outer's";
}

TEST(Profile, OnlyTheStartingThreadRecordsAndStopEndsIt) {
  profile::start();
  std::thread other([] {
    EXPECT_FALSE(profile::recording());
    ATTN_PROFILE("elsewhere");
    busy(0.001);
  });
  other.join();
  { ATTN_PROFILE("here"); }
  auto ops = profile::stop();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_STREQ(ops[0].name, "here");
  { ATTN_PROFILE("after stop"); }
  profile::start();
  EXPECT_TRUE(profile::stop().empty()) << "start() clears what an earlier profile recorded";
}

TEST(Profile, OpsOfALinearLayerAndAttentionAreNamed) {
  Generator g(1);
  const Tensor x = randn({2, 16, 32}, g), w = randn({96, 32}, g), b = randn({96}, g);
  NoGradGuard ng;
  profile::start();
  const Tensor qkv = linear(x, w, b);
  const Tensor y = scaled_dot_product_attention_packed(qkv, 4);
  const Tensor z = layer_norm(y, Tensor(), Tensor());
  const auto ops = profile::stop();
  for (const char* name : {"linear", "gemm (oneDNN)", "attention", "layer_norm"}) {
    const profile::OpTime* op = find(ops, name);
    ASSERT_TRUE(op) << name;
    EXPECT_EQ(op->calls, 1) << name;
    EXPECT_GE(op->seconds, 0.0) << name;
  }
  EXPECT_EQ(z.shape(), (Shape{2, 16, 32}));
}

}  // namespace
}  // namespace attn
