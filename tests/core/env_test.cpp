// attn/core/env.h: the table of environment variables is complete and documented (every row filled,
// every name in docs/environment.md), each variable's parser follows its documented rule, the
// readers read the environment, and ATTN_BF16_GEMM only sets the default of set_bf16_gemm_emulated.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "attn/attn.h"
#include "attn/core/env.h"
#include "attn/ops/matmul.h"
#include "torch_ref.h"

using namespace attn;

namespace {

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Sets a variable for one scope, restoring what was there.
struct ScopedEnv {
  std::string name;
  bool had = false;
  std::string old;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (const char* o = std::getenv(n)) had = true, old = o;
    if (value) setenv(n, value, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

}  // namespace

TEST(Env, TableIsCompleteAndDocumented) {
  // From the source tree's absolute path: __FILE__ may be relative (a build under ccache with base_dir).
  const std::filesystem::path doc = std::filesystem::path(test::source_dir()) / "docs" / "environment.md";
  std::ifstream in(doc);
  ASSERT_TRUE(in) << "cannot read " << doc;
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> names;
  ASSERT_GE(env::variables().size(), 7u);
  for (const env::Variable& v : env::variables()) {
    SCOPED_TRACE(v.name);
    EXPECT_TRUE(names.insert(v.name).second) << "listed twice";
    for (const char* field : {v.name, v.values, v.default_value, v.meaning, v.api, v.read_by})
      EXPECT_TRUE(field && *field) << "a field of the row is empty";
    EXPECT_EQ(&env::variable(v.name), &v);
    EXPECT_NE(text.str().find(std::string("| `") + v.name + "`"), std::string::npos)
        << "no row for it in docs/environment.md";
  }
  for (const char* name : {"ATTN_NUM_THREADS", "ATTN_ISA", "ATTN_BLOCK_CACHE", "ATTN_BF16_GEMM", "ATTN_VIT_CHUNK",
                           "ATTN_MAX_IMAGE_PIXELS", "ATTN_MAX_INFLATED_BYTES", "ATTN_BERT_VOCAB", "OMP_WAIT_POLICY", "ATTN_NO_REEXEC"})
    EXPECT_TRUE(names.count(name)) << name << " is read by attn but missing from the table";
}

TEST(Env, UnknownNamesAreRefused) {
  EXPECT_NE(error_of([] { (void)env::raw("ATTN_NO_SUCH_VARIABLE"); }).find("ATTN_NO_SUCH_VARIABLE is not one of"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)env::variable("HOME"); }).find("attn/core/env.h"), std::string::npos);
}

TEST(Env, ParsersFollowTheDocumentedRules) {
  EXPECT_EQ(env::parse_bert_vocab("/data/vocab.txt", "/home/u"), "/data/vocab.txt");
  EXPECT_EQ(env::parse_bert_vocab("", "/home/u"), "/home/u/.cache/attn/bert-base-uncased/vocab.txt");
  EXPECT_EQ(env::parse_bert_vocab(nullptr, "/home/u"), "/home/u/.cache/attn/bert-base-uncased/vocab.txt");
  EXPECT_EQ(env::parse_num_threads(nullptr), std::nullopt);
  EXPECT_EQ(env::parse_num_threads("4"), 4);
  EXPECT_EQ(env::parse_num_threads("0"), std::nullopt);
  EXPECT_EQ(env::parse_num_threads("-2"), std::nullopt);
  EXPECT_EQ(env::parse_num_threads("many"), std::nullopt);

  EXPECT_EQ(env::parse_isa(nullptr), std::nullopt);
  EXPECT_EQ(env::parse_isa(""), std::nullopt);
  EXPECT_EQ(env::parse_isa("scalar"), Isa::scalar);
  EXPECT_EQ(env::parse_isa("avx2"), Isa::avx2);
  EXPECT_EQ(env::parse_isa("avx512"), Isa::avx512);
  EXPECT_NE(error_of([] { (void)env::parse_isa("sse4"); }).find("ATTN_ISA: expected avx512, avx2 or scalar, got 'sse4'"),
            std::string::npos);

  EXPECT_TRUE(env::parse_block_cache(nullptr));
  EXPECT_TRUE(env::parse_block_cache("1"));
  EXPECT_FALSE(env::parse_block_cache("0"));

  EXPECT_FALSE(env::parse_bf16_gemm_emulate(nullptr));
  EXPECT_FALSE(env::parse_bf16_gemm_emulate("native"));
  EXPECT_TRUE(env::parse_bf16_gemm_emulate("emulate"));

  EXPECT_EQ(env::parse_vit_chunk(nullptr), std::nullopt);
  EXPECT_EQ(env::parse_vit_chunk("32"), 32);
  EXPECT_EQ(env::parse_vit_chunk("0"), 0);
  EXPECT_EQ(env::parse_vit_chunk("-5"), 0);

  EXPECT_EQ(env::parse_max_image_pixels(nullptr), std::nullopt);
  EXPECT_EQ(env::parse_max_image_pixels(""), std::nullopt);
  EXPECT_EQ(env::parse_max_image_pixels("268435456"), int64_t(1) << 28);
  EXPECT_EQ(env::parse_max_inflated_bytes("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"0", "-1", "12k", " 5", "1e9", "9223372036854775808"}) {
    SCOPED_TRACE(bad);
    static const char* v;
    v = bad;
    EXPECT_EQ(error_of([] { (void)env::parse_max_image_pixels(v); }),
              std::string("ATTN_MAX_IMAGE_PIXELS: expected a count > 0 (decimal digits, at most 2^63 - 1), got '") + v +
                  "'");
    EXPECT_EQ(error_of([] { (void)env::parse_max_inflated_bytes(v); }).substr(0, 45),
              "ATTN_MAX_INFLATED_BYTES: expected a count > 0");
  }
}

TEST(Env, ReadersReadTheEnvironment) {
  {
    ScopedEnv a("ATTN_NUM_THREADS", "3"), b("ATTN_VIT_CHUNK", "12"), c("ATTN_ISA", "scalar");
    ScopedEnv d("ATTN_MAX_IMAGE_PIXELS", "1000"), e("ATTN_MAX_INFLATED_BYTES", "2000");
    EXPECT_EQ(env::max_image_pixels(), 1000);
    EXPECT_EQ(env::max_inflated_bytes(), 2000);
    EXPECT_EQ(env::num_threads(), 3);
    EXPECT_EQ(env::vit_chunk(), 12);
    EXPECT_EQ(env::isa(), Isa::scalar);
    EXPECT_STREQ(env::raw("ATTN_VIT_CHUNK"), "12");
  }
  {
    ScopedEnv a("ATTN_NUM_THREADS", nullptr), b("ATTN_VIT_CHUNK", nullptr), c("ATTN_BLOCK_CACHE", "0");
    EXPECT_EQ(env::num_threads(), std::nullopt);
    EXPECT_EQ(env::vit_chunk(), std::nullopt);
    EXPECT_FALSE(env::block_cache());
    EXPECT_EQ(env::raw("ATTN_VIT_CHUNK"), nullptr);
  }
  {
    ScopedEnv a("OMP_WAIT_POLICY", nullptr), b("ATTN_NO_REEXEC", nullptr);
    EXPECT_TRUE(env::cli_reexec_for_wait_policy());
    ScopedEnv c("ATTN_NO_REEXEC", "1");
    EXPECT_FALSE(env::cli_reexec_for_wait_policy());
  }
}

// ATTN_BF16_GEMM=emulate and set_bf16_gemm_emulated(true) switch the same thing: the bf16 linear()
// then computes the f32 GEMM of the bf16-rounded operands, bit for bit. The environment is read at
// the first bf16 GEMM query of the process: no other test of this binary makes one.
TEST(Env, Bf16GemmVariableSetsTheDefaultOfTheOpsSetting) {
  ScopedEnv e("ATTN_BF16_GEMM", "emulate");
  EXPECT_TRUE(bf16_gemm_emulation_forced()) << "the first query reads ATTN_BF16_GEMM";
  EXPECT_EQ(bf16_gemm_mode(), Bf16Gemm::emulated);
  Generator g(3);
  const Tensor x = randn({5, 64}, g), w = randn({24, 64}, g).to(DType::bf16), b = randn({24}, g);
  NoGradGuard ng;
  const Tensor by_env = linear(x, w, b);
  const Tensor emulated = linear(x.to(DType::bf16).to(DType::f32), w.to(DType::f32), b);
  EXPECT_EQ(by_env.to_vector<float>(), emulated.to_vector<float>());

  set_bf16_gemm_emulated(false);
  EXPECT_FALSE(bf16_gemm_emulation_forced()) << "the API overrides the environment";
  EXPECT_EQ(bf16_gemm_mode(), bf16_gemm_native_available() ? Bf16Gemm::native : Bf16Gemm::emulated);
  set_bf16_gemm_emulated(true);
  EXPECT_TRUE(bf16_gemm_emulation_forced());
  EXPECT_EQ(linear(x, w, b).to_vector<float>(), by_env.to_vector<float>());
  set_bf16_gemm_emulated(false);
}
