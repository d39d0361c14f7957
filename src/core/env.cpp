// The environment variables attn reads (attn/core/env.h): the table and its readers, the only
// std::getenv calls of the library and the CLI. docs/environment.md mirrors the table.
#include "attn/core/env.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "attn/core/error.h"

namespace attn::env {

namespace {

constexpr Variable kVariables[] = {
    {"ATTN_NUM_THREADS", "a count > 0", "OpenMP's (OMP_NUM_THREADS, else one per core)",
     "Threads of attn's kernels and of oneDNN; 0, negative or not a number: ignored.",
     "attn::set_num_threads(n) (attn/core/parallel.h); the CLI's --threads", "the first parallel call"},
    {"ATTN_ISA", "avx512 | avx2 | scalar", "the best the CPU supports (attn::detected_isa())",
     "Caps the SIMD path of attn's own kernels (oneDNN has ONEDNN_MAX_CPU_ISA); a path the CPU lacks, or another "
     "value, is an error.",
     "attn::set_isa(attn::Isa::avx2) (attn/core/isa.h)", "the first kernel call"},
    {"ATTN_BLOCK_CACHE", "0", "on (off in sanitizer builds)",
     "0: every tensor comes from malloc instead of the cache of mapped blocks (for memory checkers); other "
     "values: ignored.",
     "none: fixed before the first tensor, since a block must go back where it came from; "
     "attn::block_cache_enabled() (attn/core/memory.h) reports it",
     "the first tensor of 1 MiB or more"},
    {"ATTN_BF16_GEMM", "emulate", "native where oneDNN has a bf16 matmul for the CPU, else emulated",
     "emulate: linear() with a bf16 weight runs the f32 GEMM on bf16 values even where a native bf16 matmul "
     "exists; other values: ignored.",
     "attn::set_bf16_gemm_emulated(true) (attn/ops/matmul.h)", "the first bf16 linear()"},
    {"ATTN_VIT_CHUNK", "a count >= 0", "from the layer sizes (VisionTransformer::kAutoChunk)",
     "Images per slice of a ViT's no-grad eval forward; 0 runs the batch whole. A negative value, or one that "
     "does not start with a number, reads as 0.",
     "VisionTransformer::set_inference_chunk(n) (attn/models/vit.h)", "each VisionTransformer when built"},
    {"ATTN_MAX_IMAGE_PIXELS", "a count > 0", "67108864 (2^26: 8192 x 8192; data::kDefaultMaxImagePixels)",
     "The most pixels (width x height) a PNG or JPEG header may claim; a larger image is refused before any "
     "buffer is allocated. Anything but a count > 0 is an error.",
     "attn::data::set_max_image_pixels(n) (attn/data/limits.h); decode_image's max_pixels argument",
     "the first image decoded"},
    {"ATTN_MAX_INFLATED_BYTES", "a count > 0", "1073741824 (1 GiB; data::kDefaultMaxInflatedBytes)",
     "The most bytes one compressed stream may inflate to: a gzip IDX file's data, a SWORD block. A file that "
     "claims more is refused before anything is inflated. Anything but a count > 0 is an error.",
     "attn::data::set_max_inflated_bytes(n) (attn/data/limits.h)", "the first gzip IDX file or SWORD module read"},
    {"ATTN_BERT_VOCAB", "a path", "~/.cache/attn/bert-base-uncased/vocab.txt ($HOME's)",
     "bert-base-uncased's vocab.txt (scripts/fetch_bert_vocab.sh writes it there): the vocabulary of uncased BERT "
     "models when none is beside their weights; also where the tests look for it.",
     "infer::BertSource::vocab (attn/infer/bert_pipeline.h); the CLI's --vocab",
     "when a BERT text command (fill-mask, embed, explain --text) looks for its vocabulary"},
    {"ATTN_WORDNET_DIR", "a directory", "/usr/share/wordnet (Debian's wordnet-base)",
     "Where Princeton WordNet 3.0's database (data.noun, noun.exc, ...) is: the BERT pre-training and "
     "fine-tuning data read it.",
     "data::WordNet::open(dir) (attn/data/wordnet.h)", "when WordNet is first opened"},
    {"OMPI_COMM_WORLD_SIZE", "a count (set by Open MPI's mpirun)", "unset (one process)",
     "Set by mpirun for each process it starts: attn then joins MPI_COMM_WORLD and trains data-parallel. "
     "A process without it (or without PMIX_RANK) makes no MPI call.",
     "none: the launcher sets it; dist::world() (attn/dist/comm.h) reports the outcome",
     "at the first dist::world() call (attn train)"},
    {"PMIX_RANK", "a rank (set by a PMIx launcher)", "unset",
     "The same as OMPI_COMM_WORLD_SIZE for launchers that speak PMIx only (srun --mpi=pmix).",
     "none: the launcher sets it", "at the first dist::world() call (attn train)"},
    {"OMPI_MCA_btl", "Open MPI's transport list, e.g. self,tcp", "unset: Open MPI's choice (shared memory within a machine)",
     "Read by Open MPI (mpirun --mca btl ... sets it); attn reads it only to name the transport in its logs.",
     "none: Open MPI's own", "at the first dist::world() call under mpirun"},
    {"OMP_WAIT_POLICY", "ACTIVE | PASSIVE", "PASSIVE in the attn CLI; libgomp's own elsewhere",
     "Read by libgomp when it loads. The CLI re-runs itself once with PASSIVE when it is unset (threads sleep "
     "at barriers after a short spin, GOMP_SPINCOUNT: much faster on a loaded machine).",
     "none: libgomp reads it before main", "the CLI's start (cli/main.cpp)"},
    {"GOMP_SPINCOUNT", "a count of spins (about 100 a microsecond)", "500 in the attn CLI's PASSIVE re-run; libgomp's own elsewhere",
     "Read by libgomp when it loads: how long an idle thread spins before it sleeps. The CLI's re-run sets 500 "
     "unless it is set: the next op's parallel region then finds its threads awake.",
     "none: libgomp reads it before main", "the CLI's start (cli/main.cpp)"},
    {"ATTN_NO_REEXEC", "any value", "unset",
     "Set: the CLI does not re-run itself to default OMP_WAIT_POLICY (the re-run sets it, so it happens once).",
     "none: the CLI's start-up only", "the CLI's start (cli/main.cpp)"},
};

}  // namespace

std::span<const Variable> variables() { return kVariables; }

const Variable& variable(std::string_view name) {
  for (const Variable& v : kVariables)
    if (name == v.name) return v;
  fail("attn::env: ", name, " is not one of attn's environment variables (attn/core/env.h)");
}

const char* raw(std::string_view name) { return std::getenv(variable(name).name); }

std::optional<int> parse_num_threads(const char* value) {
  if (!value) return std::nullopt;
  const int n = std::atoi(value);
  return n > 0 ? std::optional<int>(n) : std::nullopt;
}
std::optional<int> num_threads() { return parse_num_threads(raw("ATTN_NUM_THREADS")); }

std::optional<Isa> parse_isa(const char* value) {
  if (!value || !*value) return std::nullopt;
  if (!std::strcmp(value, "avx512")) return Isa::avx512;
  if (!std::strcmp(value, "avx2")) return Isa::avx2;
  if (!std::strcmp(value, "scalar")) return Isa::scalar;
  fail("ATTN_ISA: expected avx512, avx2 or scalar, got '", value, "'");
}
std::optional<Isa> isa() { return parse_isa(raw("ATTN_ISA")); }

bool parse_block_cache(const char* value) { return !(value && !std::strcmp(value, "0")); }
bool block_cache() { return parse_block_cache(raw("ATTN_BLOCK_CACHE")); }

bool parse_bf16_gemm_emulate(const char* value) { return value && !std::strcmp(value, "emulate"); }
bool bf16_gemm_emulate() { return parse_bf16_gemm_emulate(raw("ATTN_BF16_GEMM")); }

std::optional<int64_t> parse_vit_chunk(const char* value) {
  if (!value) return std::nullopt;
  const long long n = std::atoll(value);
  return n > 0 ? int64_t(n) : int64_t(0);
}
std::optional<int64_t> vit_chunk() { return parse_vit_chunk(raw("ATTN_VIT_CHUNK")); }

namespace {
// A count > 0 written as decimal digits only; unset or empty: nullopt; anything else throws.
std::optional<int64_t> parse_limit(const char* name, const char* value) {
  if (!value || !*value) return std::nullopt;
  int64_t n = 0;
  bool ok = true;
  for (const char* p = value; *p && ok; ++p)
    ok = *p >= '0' && *p <= '9' && !__builtin_mul_overflow(n, int64_t(10), &n) &&
         !__builtin_add_overflow(n, int64_t(*p - '0'), &n);
  ATTN_CHECK(ok && n > 0, name, ": expected a count > 0 (decimal digits, at most 2^63 - 1), got '", value, "'");
  return n;
}
}  // namespace

std::optional<int64_t> parse_max_image_pixels(const char* value) { return parse_limit("ATTN_MAX_IMAGE_PIXELS", value); }
std::optional<int64_t> max_image_pixels() { return parse_max_image_pixels(raw("ATTN_MAX_IMAGE_PIXELS")); }

std::optional<int64_t> parse_max_inflated_bytes(const char* value) {
  return parse_limit("ATTN_MAX_INFLATED_BYTES", value);
}
std::string parse_bert_vocab(const char* value, const char* home) {
  if (value && *value) return value;
  return std::string(home ? home : "") + "/.cache/attn/bert-base-uncased/vocab.txt";
}
std::string bert_vocab_cache() { return parse_bert_vocab(raw("ATTN_BERT_VOCAB"), std::getenv("HOME")); }

std::string wordnet_dir() {
  const char* v = raw("ATTN_WORDNET_DIR");
  return v && *v ? v : "/usr/share/wordnet";
}

std::optional<int64_t> max_inflated_bytes() { return parse_max_inflated_bytes(raw("ATTN_MAX_INFLATED_BYTES")); }

bool launched_by_mpi() { return raw("OMPI_COMM_WORLD_SIZE") || raw("PMIX_RANK"); }

std::optional<int> mpi_world_size() {
  const char* v = raw("OMPI_COMM_WORLD_SIZE");
  if (!v || !*v) return std::nullopt;
  return std::atoi(v);
}

std::string mpi_btl() {
  const char* v = raw("OMPI_MCA_btl");
  return v ? v : "";
}

bool cli_reexec_for_wait_policy() { return !raw("OMP_WAIT_POLICY") && !raw("ATTN_NO_REEXEC"); }

}  // namespace attn::env
