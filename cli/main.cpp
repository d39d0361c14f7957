// attn: train, evaluate, inspect and run attention models from one native binary.
//
//   attn demo                       # train + evaluate the default model on Fashion-MNIST
//   attn train --model mlp --epochs 5 --out runs/mlp
//   attn eval runs/mlp/checkpoint.safetensors
//   attn info mlp
//   attn train --model transformer --data bible-en-es --out runs/tf
//   attn translate runs/tf/checkpoint.safetensors "In the beginning" --beam 4
#include <cstdio>

#include "attn/attn.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"attn: attention models (Transformer, ViT, DeiT, ...) on a native C++ engine"};
  app.require_subcommand(1);
  attn::cli::add_demo(app);
  attn::cli::add_train(app);
  attn::cli::add_eval(app);
  attn::cli::add_info(app);
  attn::cli::add_predict(app);
  attn::cli::add_explain(app);
  attn::cli::add_convert(app);
  attn::cli::add_translate(app);
  attn::cli::add_align(app);
  attn::cli::add_bench(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const attn::Error& e) {
    std::fprintf(stderr, "attn: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
