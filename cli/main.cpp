// attn: train, evaluate, inspect and run attention models from one native binary.
//
//   attn demo                       # train + evaluate the default model on Fashion-MNIST
//   attn train --model mlp --epochs 5 --out runs/mlp
//   attn eval runs/mlp/checkpoint.safetensors
//   attn info mlp
//   attn train --model transformer --data bible-en-es --out runs/tf
//   attn translate runs/tf/checkpoint.safetensors "In the beginning" --beam 4
//   attn fill-mask --weights bert-base-uncased/model.safetensors "The [MASK] of the world."
//   attn embed bert.safetensors --pooling mean < sentences.txt
//   attn classify-text runs/lex/checkpoint.safetensors "a small domesticated carnivore"
//   attn tag runs/sst/checkpoint.safetensors "The dogs barked at the mailman"
//   attn experiment qk-sharing --budget quick      # a published claim about attention, tested over 3 seeds
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "attn/attn.h"
#include "attn/core/env.h"
#include "commands.h"

// Prints the error; in a data-parallel run (mpirun), names the rank and ends every rank at once: the
// others may be waiting inside a collective for this one.
static int fail(int code, const char* kind, const char* what) {
  if (attn::dist::launched_by_mpi() && attn::dist::world().size() > 1) {
    attn::dist::Communicator& w = attn::dist::world();
    std::fprintf(stderr, "attn: %s (rank %d of %d): %s\n", kind, w.rank(), w.size(), what);
    std::fflush(stderr);
    w.abort(code);
  }
  std::fprintf(stderr, "attn: %s: %s\n", kind, what);
  return code;
}

int main(int argc, char** argv) {
  // libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT when it loads, before main: to default them, re-run
  // ourselves once with them set. PASSIVE (threads sleep at barriers) saved 40-47% of a translation
  // step's speed on a loaded 2-core machine; a short spin first (500, a few microseconds) finds the
  // threads awake for the next op's region, 12% of DeiT-Ti's latency on a quiet one (docs/design.md).
  // Any value the user sets is kept. The variables are read through attn/core/env.h
  // (docs/environment.md); only the writes for the re-run, which must reach the new process's
  // environment, are here.
  if (attn::env::cli_reexec_for_wait_policy()) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    setenv("GOMP_SPINCOUNT", "500", /*overwrite=*/0);
    setenv("ATTN_NO_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);   // returns only on failure: then go on as we are
  }
  CLI::App app{"attn: attention models (Transformer, ViT, DeiT, ...) on a native C++ engine"};
  app.require_subcommand(1);
  attn::cli::add_demo(app);
  attn::cli::add_train(app);
  attn::cli::add_eval(app);
  attn::cli::add_info(app);
  attn::cli::add_predict(app);
  attn::cli::add_explain(app);
  attn::cli::add_inspect(app);
  attn::cli::add_convert(app);
  attn::cli::add_quantize(app);
  attn::cli::add_translate(app);
  attn::cli::add_align(app);
  attn::cli::add_bench(app);
  attn::cli::add_fill_mask(app);
  attn::cli::add_embed(app);
  attn::cli::add_classify_text(app);
  attn::cli::add_tag(app);
  attn::cli::add_experiment(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const attn::Error& e) {
    return fail(1, "error", e.what());
  } catch (const std::exception& e) {
    return fail(2, "internal error", e.what());
  }
  return 0;
}
