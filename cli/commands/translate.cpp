// attn translate CKPT "text" [--beam 4]: translate sentences with a trained translation model.
// attn align CKPT "source" --out align.png: the alignment (cross-attention) of one translation as a heat map.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "attn/attn.h"
#include "attn/viz/heatmap.h"
#include "attn/infer/translate.h"
#include "attn/train/tasks/translation.h"
#include "../commands.h"

namespace attn::cli {

void add_translate(CLI::App& app) {
  auto* c = app.add_subcommand("translate", "translate text with a translation checkpoint");
  struct Opts {
    std::string ckpt, file;
    std::vector<std::string> texts;
    int64_t beam = 4, max_len = 0, batch = 64;
    double length_penalty = 0.6;
    int threads = 0;
    bool ema = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "a checkpoint of `attn train --model transformer|rnn-attention`")->required();
  c->add_option("text", o->texts, "sentences to translate (or --file, or '-' for standard input)");
  c->add_option("--file", o->file, "translate every line of this file ('-': standard input)");
  c->add_option("--beam", o->beam, "beam size (1: greedy)")->capture_default_str();
  c->add_option("--length-penalty", o->length_penalty, "GNMT length penalty alpha")->capture_default_str();
  c->add_option("--max-len", o->max_len, "most target tokens (0: about twice the source)");
  c->add_option("--batch", o->batch)->capture_default_str();
  c->add_option("--threads", o->threads);
  c->add_flag("--ema", o->ema, "the checkpoint's EMA weights (kept by a run trained with --ema-decay)");
  c->callback([o] {
    apply_threads(o->threads);
    infer::Translator tr =
        infer::load_translator(o->ckpt, o->ema ? io::CheckpointWeights::ema : io::CheckpointWeights::model);
    std::vector<std::string> src = o->texts;
    if (!o->file.empty() || (src.size() == 1 && src[0] == "-")) {
      if (src.size() == 1 && src[0] == "-") src.clear();
      std::ifstream f;
      std::istream* in = &std::cin;
      if (!o->file.empty() && o->file != "-") {
        f.open(o->file);
        ATTN_CHECK(f.good(), "translate: cannot read '", o->file, "'");
        in = &f;
      }
      for (std::string line; std::getline(*in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        src.push_back(line);
      }
    }
    ATTN_CHECK(!src.empty(), "translate: expected text to translate (arguments, --file or '-'), got none");
    for (const auto& s : tr.translate(src, o->beam, o->length_penalty, o->max_len, o->batch)) std::printf("%s\n", s.c_str());
  });
}

void add_align(CLI::App& app) {
  auto* c = app.add_subcommand("align", "draw a translation's source-target alignment (attention) as a heat map");
  struct Opts {
    std::string ckpt, text, out = "align.png";
    int64_t beam = 1, cell = viz::AlignmentOptions{}.cell, font_scale = viz::AlignmentOptions{}.font_scale;
    std::string colormap = "viridis";
    int threads = 0;
    bool ema = false;
  };
  auto o = std::make_shared<Opts>();
  c->add_option("checkpoint", o->ckpt, "a translation checkpoint")->required();
  c->add_option("text", o->text, "the source sentence")->required();
  c->add_option("--out", o->out, "PNG to write")->capture_default_str();
  c->add_option("--beam", o->beam, "beam size (1: greedy)")->capture_default_str();
  c->add_option("--cell", o->cell, "pixels per cell")->capture_default_str();
  c->add_option("--font-scale", o->font_scale)->capture_default_str();
  c->add_option("--colormap", o->colormap, "viridis | gray")->capture_default_str();
  c->add_option("--threads", o->threads);
  c->add_flag("--ema", o->ema, "the checkpoint's EMA weights (kept by a run trained with --ema-decay)");
  c->callback([o] {
    apply_threads(o->threads);
    infer::Translator tr =
        infer::load_translator(o->ckpt, o->ema ? io::CheckpointWeights::ema : io::CheckpointWeights::model);
    infer::Alignment a = tr.align(o->text, o->beam);
    viz::AlignmentOptions ao;
    ao.cell = o->cell;
    ao.font_scale = o->font_scale;
    ao.colormap = o->colormap;
    viz::write_alignment_png(o->out, a.weights, a.src_pieces, a.tgt_pieces, ao);
    std::printf("%s\nalignment (%zu target x %zu source tokens): %s\n", a.translation.c_str(), a.tgt_pieces.size(),
                a.src_pieces.size(), o->out.c_str());
  });
}

}  // namespace attn::cli
