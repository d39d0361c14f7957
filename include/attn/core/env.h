// Every environment variable attn reads, in one table, and the only place that reads them. Each
// variable only sets a default that an API call can change (the `api` column); docs/environment.md
// is the same table for users.
//
//   for (const attn::env::Variable& v : attn::env::variables())
//     std::printf("%s (default %s): %s; API: %s\n", v.name, v.default_value, v.meaning, v.api);
//   std::optional<int> n = attn::env::num_threads();       // ATTN_NUM_THREADS, if set to a count
//   bool on = attn::env::parse_block_cache("0");           // false: a variable's rule on a given value
//
// The readers read the environment each time they are called; the code that uses a variable reads
// it once (at the first tensor, the first kernel call, the first bf16 GEMM, the first image or
// compressed stream decoded) or, for ATTN_VIT_CHUNK, when a model is built. Every parser takes the
// value as a string, or null for "unset".
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "attn/core/isa.h"

namespace attn::env {

struct Variable {
  const char* name;            // e.g. "ATTN_NUM_THREADS"
  const char* values;          // what it accepts
  const char* default_value;   // what holds when it is unset
  const char* meaning;
  const char* api;             // the call that does the same from code (or why there is none)
  const char* read_by;         // where it takes effect
};

// The table, in the order of docs/environment.md.
std::span<const Variable> variables();
// The table's row of `name`; throws attn::Error for a name that is not in it.
const Variable& variable(std::string_view name);
// The raw value of a variable of the table, or null when it is unset; throws attn::Error for a name
// that is not in the table (so that no variable is read without being documented).
const char* raw(std::string_view name);

// ATTN_NUM_THREADS: a thread count > 0; anything else (0, negative, not a number) is ignored.
std::optional<int> parse_num_threads(const char* value);
std::optional<int> num_threads();
// ATTN_ISA: avx512 | avx2 | scalar; unset or empty: nullopt (the CPU's best). Other values throw.
std::optional<Isa> parse_isa(const char* value);
std::optional<Isa> isa();
// ATTN_BLOCK_CACHE: "0" turns the block cache off; unset or any other value leaves it on.
bool parse_block_cache(const char* value);
bool block_cache();
// ATTN_BF16_GEMM: "emulate" forces the emulated bf16 GEMM; unset or any other value does not.
bool parse_bf16_gemm_emulate(const char* value);
bool bf16_gemm_emulate();
// ATTN_VIT_CHUNK: images per slice of a ViT's no-grad eval forward, >= 0 (0: the batch whole); a
// negative value reads as 0, and so does one that does not start with a number (as atoll).
std::optional<int64_t> parse_vit_chunk(const char* value);
std::optional<int64_t> vit_chunk();
// ATTN_MAX_IMAGE_PIXELS: the most pixels (width x height) an image file may claim, a count > 0
// (data::set_max_image_pixels). Unset or empty: nullopt (data::kDefaultMaxImagePixels). Anything
// else throws: a limit that silently falls back would hide a typo.
std::optional<int64_t> parse_max_image_pixels(const char* value);
std::optional<int64_t> max_image_pixels();
// ATTN_MAX_INFLATED_BYTES: the most bytes one compressed stream (a gzip IDX file, a SWORD block)
// may inflate to, a count > 0 (data::set_max_inflated_bytes). Unset or empty: nullopt
// (data::kDefaultMaxInflatedBytes). Anything else throws.
std::optional<int64_t> parse_max_inflated_bytes(const char* value);
std::optional<int64_t> max_inflated_bytes();
// ATTN_BERT_VOCAB: bert-base-uncased's vocab.txt, the default vocabulary of uncased BERT models
// (attn/infer/bert_pipeline.h); unset or empty: $HOME/.cache/attn/bert-base-uncased/vocab.txt, where
// scripts/fetch_bert_vocab.sh writes it.
std::string parse_bert_vocab(const char* value, const char* home);
std::string bert_vocab_cache();
// ATTN_WORDNET_DIR: WordNet 3.0's database directory (attn/data/wordnet.h); unset or empty:
// /usr/share/wordnet, where Debian's wordnet-base installs it.
std::string wordnet_dir();
// OMPI_COMM_WORLD_SIZE or PMIX_RANK set: the process was started by an MPI launcher (attn/dist/comm.h).
bool launched_by_mpi();
// OMPI_COMM_WORLD_SIZE as a count (nullopt when unset); OMPI_MCA_btl ("" when unset), for logs.
std::optional<int> mpi_world_size();
std::string mpi_btl();
// The attn CLI re-runs itself once with OMP_WAIT_POLICY=PASSIVE (and GOMP_SPINCOUNT=500 unless set)
// when neither OMP_WAIT_POLICY nor ATTN_NO_REEXEC is set (cli/main.cpp; libgomp reads both before main).
bool cli_reexec_for_wait_policy();

}  // namespace attn::env
