// bert-base-uncased's vocab.txt for the BERT tokenizer's tests: written by scripts/fetch_bert_vocab.sh
// (scripts/install_deps.sh --test runs it) to ~/.cache/attn/bert-base-uncased/vocab.txt, or where
// ATTN_BERT_VOCAB says.
//
//   const std::string path = test::bert_vocab_path();
//   ATTN_NEED_BERT_VOCAB(path);   // skips the test (loudly) when the file is missing; fails under CI
//
// Without the file a test skips with a banner on stderr, unless CI or ATTN_REQUIRE_BERT_VOCAB is set
// (to anything but "" or "0"): there a missing vocabulary fails the test.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace attn::test {

inline std::string bert_vocab_path() {
  if (const char* e = std::getenv("ATTN_BERT_VOCAB"); e && *e) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/attn/bert-base-uncased/vocab.txt";
}

inline bool bert_vocab_required() {
  for (const char* name : {"CI", "ATTN_REQUIRE_BERT_VOCAB"})
    if (const char* v = std::getenv(name); v && *v && std::string(v) != "0") return true;
  return false;
}

// The md5 of bert-base-uncased's vocab.txt (Google's release; checked by fetch_bert_vocab.sh).
inline const char* kBertVocabMd5 = "64800d5d8528ce344256daf115d4965e";

}  // namespace attn::test

#define ATTN_NEED_BERT_VOCAB(path)                                                                         \
  do {                                                                                                     \
    if (!std::filesystem::exists(path)) {                                                                  \
      if (::attn::test::bert_vocab_required())                                                             \
        FAIL() << "bert-base-uncased's vocab.txt is missing at " << (path)                                 \
               << " (CI / ATTN_REQUIRE_BERT_VOCAB set): run scripts/fetch_bert_vocab.sh";                  \
      std::fprintf(stderr, "\n*** SKIPPED: bert-base-uncased's vocab.txt is missing at %s: run "           \
                           "scripts/fetch_bert_vocab.sh (needs npm and the network) ***\n\n",              \
                   std::string(path).c_str());                                                             \
      GTEST_SKIP() << "bert-base-uncased's vocab.txt is missing at " << (path)                             \
                   << ": run scripts/fetch_bert_vocab.sh";                                                 \
    }                                                                                                      \
  } while (0)
