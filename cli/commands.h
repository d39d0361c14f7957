// The attn command-line tool: each subcommand registers itself on the CLI11 app.
#pragma once
#include <CLI/CLI.hpp>

namespace attn::cli {

// Each returns after adding its subcommand; the callback runs the command and may throw attn::Error.
void add_train(CLI::App& app);
void add_eval(CLI::App& app);
void add_info(CLI::App& app);
void add_demo(CLI::App& app);
void add_predict(CLI::App& app);
void add_explain(CLI::App& app);
void add_inspect(CLI::App& app);
void add_convert(CLI::App& app);
void add_translate(CLI::App& app);
void add_align(CLI::App& app);
void add_bench(CLI::App&);
void add_fill_mask(CLI::App& app);
void add_embed(CLI::App& app);
void add_classify_text(CLI::App& app);   // classify_text.cpp
void add_tag(CLI::App& app);             // tag.cpp
void add_quantize(CLI::App& app);        // quantize.cpp
void add_experiment(CLI::App& app);      // experiment.cpp


// Applies --threads (0 = ATTN_NUM_THREADS or all cores).
void apply_threads(int threads);

}  // namespace attn::cli
