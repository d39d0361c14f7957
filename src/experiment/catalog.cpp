// The experiments: each published claim about attention models as tracks of variants and sub-claims
// (attn/experiment/experiment.h). Budgets are set so that `--budget full` fits its bound on 2 cores
// (docs/experiments.md gives each grid's measured time per run).
#include <string>
#include <utility>
#include <vector>

#include "attn/core/error.h"
#include "attn/experiment/experiment.h"

namespace attn::experiment {

namespace {

using nlohmann::json;

// A classification track compared on test accuracy in points, picked and plotted by validation accuracy.
Track accuracy_track(std::string name, std::string data_label) {
  Track t;
  t.name = std::move(name);
  t.data_label = std::move(data_label);
  t.metric = "test_accuracy";
  t.metric_label = "test accuracy (%)";
  t.metric_scale = 100;
  t.selection = t.curve = "val_accuracy";
  return t;
}

// The Fashion-MNIST ViT track: vit_fmnist_small (patch 4, D 128, depth 6, 4 heads, MLP 256) on the
// default image recipe (AdamW 1e-3, one warm-up epoch, cosine), test accuracy in points; the full
// budget trains `epochs` epochs of the 55,000 training images.
Track fmnist_track(int64_t epochs, std::vector<Variant> variants) {
  Track t = accuracy_track("fmnist", "Fashion-MNIST");
  t.base = {{"model", "vit_fmnist_small"}, {"data", "fashion-mnist"}};
  // quick: 32 steps of 128 images, evaluated every 8 steps on 1,000 images (minutes for a whole grid)
  t.quick = {{"limit_train", 4096}, {"epochs", 1}, {"warmup_epochs", 0.25}, {"eval_every", 8}, {"limit_eval", 1000}};
  t.full = {{"epochs", epochs}};
  t.variants = std::move(variants);
  return t;
}

Variant vit(std::string name, std::string label, json model_config, json extra = json::object()) {
  json s = extra;
  s["model_config"] = std::move(model_config);
  return {std::move(name), std::move(label), std::move(s)};
}

SubClaim better(std::string text, const std::string& a, const std::string& b, std::string track = "fmnist") {
  return {std::move(text), std::move(track), {{1, {a}, {}}, {-1, {b}, {}}}, Direction::better, 0};
}

SubClaim equal(std::string text, std::vector<std::string> a, std::vector<std::string> b, double delta,
               std::string track = "fmnist") {
  return {std::move(text), std::move(track), {{1, std::move(a), {}}, {-1, std::move(b), {}}}, Direction::equal, delta};
}

// "a - b gains more than c - d": (a - b) - (c - d) above zero, seed by seed.
SubClaim larger_gain(std::string text, const std::string& a, const std::string& b, const std::string& c,
                     const std::string& d, std::string track = "fmnist") {
  return {std::move(text), std::move(track), {{1, {a}, {}}, {-1, {b}, {}}, {-1, {c}, {}}, {1, {d}, {}}}, Direction::better, 0};
}

// An experiment's name, claim, source and grid; its tracks and sub-claims follow.
Experiment described(std::string name, std::string claim, std::string source, std::string grid) {
  Experiment e;
  e.name = std::move(name);
  e.claim = std::move(claim);
  e.source = std::move(source);
  e.grid = std::move(grid);
  return e;
}

Experiment scaling() {
  Experiment e =
      described("scaling",
                "Dividing the attention logits by sqrt(d) keeps the softmax out of saturation and training stable; "
                "the larger the head width d, the more it matters.",
                "Vaswani et al. 2017, Attention Is All You Need, section 3.2.1",
                "2 heads of width 16, 64 and 256 (D 128; the heads' width set apart from D), each with and without "
                "the 1/sqrt(d) factor: 6 variants");
  std::vector<Variant> v;
  for (int d : {16, 64, 256}) {
    const std::string ds = std::to_string(d);
    v.push_back(vit("scaled-d" + ds, "1/sqrt(d), d " + ds, {{"heads", 2}, {"head_dim", d}}));
    v.push_back(vit("unscaled-d" + ds, "unscaled, d " + ds, {{"heads", 2}, {"head_dim", d}, {"attn_scale", "none"}}));
  }
  // 2 epochs: a d 256 variant costs about 5 times a d 16 one, and at 3 epochs the 18 runs take more than
  // 2 hours on 2 cores.
  e.tracks = {fmnist_track(2, std::move(v))};
  for (int d : {16, 64, 256}) {
    const std::string ds = std::to_string(d);
    e.claims.push_back(better("1/sqrt(d) beats unscaled logits at d = " + ds, "scaled-d" + ds, "unscaled-d" + ds));
  }
  e.claims.push_back(larger_gain("the gain from 1/sqrt(d) is larger at d = 256 than at d = 16", "scaled-d256",
                                 "unscaled-d256", "scaled-d16", "unscaled-d16"));
  return e;
}

// The Bible track: English -> Spanish verses (KJV -> Reina-Valera 1909), a joint SentencePiece vocabulary,
// greedy test BLEU on the first 500 test pairs (sacreBLEU's 13a), the dev BLEU of 200 sentences as the curve.
Track bible_track(int64_t steps, std::vector<Variant> variants) {
  Track t;
  t.name = "bible";
  t.data_label = "Bible en-es";
  t.metric = "test_bleu";
  t.metric_label = "test BLEU";
  t.selection = "dev_bleu_greedy";
  t.curve = "dev_bleu";
  // The inverse-sqrt schedule warmed up over 300 steps at a quarter of the paper's scale (peak lr about 9e-4
  // at d 256), for runs of a few hundred steps.
  t.base = {{"data", "bible-en-es"}, {"limit_test", 500}, {"beam", 1}, {"warmup_steps", 300}, {"lr", 0.25}};
  t.quick = {{"limit_train", 2000}, {"vocab_size", 2000}, {"max_steps", 40}, {"eval_every", 20},
             {"eval_sentences", 20}, {"limit_test", 50}};
  t.full = {{"max_steps", steps}, {"eval_every", steps / 4}};
  if (steps == 0) t.full = {{"eval_every", 150}};   // a wall-time budget (max_minutes) instead
  // smoke: the synthetic reversal task in place of the Bible (no corpus to read, no vocabulary to learn)
  t.smoke = {{"data", "synthetic:reverse"}, {"limit_train", 300}, {"max_steps", 1}, {"eval_sentences", 2},
             {"limit_test", 4}, {"max_tokens", 1024}};
  t.extra_metrics = {"tokens_per_second"};
  t.variants = std::move(variants);
  return t;
}

// The small Transformer of the Bible tracks: 2 + 2 layers, d 128, d_ff 512 (a few minutes per run).
json small_transformer(json model_config) {
  json c = {{"d_model", 128}, {"nhead", 4}, {"layers", 2}, {"d_ff", 512}};
  c.merge_patch(model_config);
  return {{"model", "transformer"}, {"model_config", c}};
}

Experiment heads() {
  Experiment e = described("heads", "Several attention heads beat one head of the same total width.",
                           "Vaswani et al. 2017, Attention Is All You Need, section 3.2.2 and Table 3 (A)",
                           "1, 2, 4 and 8 heads at D 128 (head width 128, 64, 32, 16): in the ViT on Fashion-MNIST "
                           "(3 epochs) and in a small Transformer (2 + 2 layers, d_ff 512) on the Bible (500 steps): "
                           "4 variants each");
  std::vector<Variant> v, b;
  for (int h : {1, 2, 4, 8}) {
    const std::string name = "heads-" + std::to_string(h), label = std::to_string(h) + (h == 1 ? " head" : " heads");
    v.push_back(vit(name, label, {{"heads", h}}));
    b.push_back({name, label, small_transformer({{"nhead", h}})});
  }
  e.tracks = {fmnist_track(3, std::move(v)), bible_track(500, std::move(b))};
  for (const char* track : {"fmnist", "bible"})
    for (int h : {2, 4, 8})
      e.claims.push_back(better(std::to_string(h) + " heads beat 1 head" + (std::string(track) == "bible" ? " (Bible)" : ""),
                                "heads-" + std::to_string(h), "heads-1", track));
  return e;
}

Experiment qk_sharing() {
  Experiment e = described(
      "qk-sharing",
      "Separate query and key projections beat one projection shared by both (which makes every head's "
      "logits symmetric).",
      "Vaswani et al. 2017 (separate W_Q, W_K); Kitaev et al. 2020, Reformer, section 5 (shared-QK attention)",
      "separate W_Q, W_K / one shared W_QK: 2 variants");
  e.tracks = {fmnist_track(8, {vit("separate", "separate W_Q, W_K", json::object()),
                               vit("shared", "shared W_Q = W_K", {{"share_qk", true}})})};
  e.claims = {better("separate W_Q and W_K beat a shared projection", "separate", "shared")};
  return e;
}

Experiment cls_vs_gap() {
  Experiment e = described(
      "cls-vs-gap", "A class token and global average pooling do equally well, each with the right learning rate.",
      "Dosovitskiy et al. 2021, An Image Is Worth 16x16 Words, appendix D.3 (figure 9)",
      "class token / average pooling, each at learning rates 5e-4 and 2e-3: 4 variants");
  std::vector<Variant> v;
  for (const char* lr : {"5e-4", "2e-3"}) {
    const json extra = {{"lr", std::stod(lr)}};
    v.push_back(
        vit(std::string("token-lr") + lr, std::string("class token, lr ") + lr, {{"global_pool", "token"}}, extra));
    v.push_back(
        vit(std::string("gap-lr") + lr, std::string("average pooling, lr ") + lr, {{"global_pool", "avg"}}, extra));
  }
  e.tracks = {fmnist_track(5, std::move(v))};
  e.claims = {equal("average pooling equals the class token at lr 5e-4 (within 1 point)", {"gap-lr5e-4"},
                    {"token-lr5e-4"}, 1.0),
              equal("average pooling equals the class token at lr 2e-3 (within 1 point)", {"gap-lr2e-3"},
                    {"token-lr2e-3"}, 1.0),
              equal("each at its best learning rate (by validation accuracy), they are equal within 1 point",
                    {"gap-lr5e-4", "gap-lr2e-3"}, {"token-lr5e-4", "token-lr2e-3"}, 1.0)};
  return e;
}

Experiment positions() {
  Experiment e = described(
      "positions",
      "1-D, 2-D and relative position encodings perform alike; none is clearly worse, and having one beats "
      "having none.",
      "Dosovitskiy et al. 2021, An Image Is Worth 16x16 Words, appendix D.4 (table 8)",
      "no position information / learned 1-D / learned 2-D (row + column) / fixed sin-cos 2-D / a learned 2-D "
      "relative bias on each block's logits (BEiT's, class token included): 5 variants");
  e.tracks = {fmnist_track(
      4, {vit("learned-1d", "learned 1-D", {{"pos_embed", "learned"}}), vit("none", "none", {{"pos_embed", "none"}}),
          vit("learned-2d", "learned 2-D", {{"pos_embed", "learned2d"}}),
          vit("sincos-2d", "sin-cos 2-D", {{"pos_embed", "sincos2d"}}),
          vit("relative", "relative bias", {{"pos_embed", "relative"}})})};
  e.claims = {better("learned 1-D positions beat none", "learned-1d", "none"),
              equal("learned 2-D equals learned 1-D (within 1 point)", {"learned-2d"}, {"learned-1d"}, 1.0),
              equal("sin-cos 2-D equals learned 1-D (within 1 point)", {"sincos-2d"}, {"learned-1d"}, 1.0),
              equal("the relative bias equals learned 1-D (within 1 point)", {"relative"}, {"learned-1d"}, 1.0)};
  return e;
}

Experiment inductive_bias() {
  Experiment e =
      described("inductive-bias",
                "On small data a ViT trails a CNN, whose convolutions build in locality; the gap closes as the data "
                "grows, and a convolutional stem (hybrid) or local windows (Swin) close most of it.",
                "Dosovitskiy et al. 2021, An Image Is Worth 16x16 Words, sections 4.2-4.3; Liu et al. 2021, Swin "
                "Transformer",
                "ViT (vit_fmnist_small), CNN (resnet_fmnist), hybrid ViT (the same ViT on a 2-conv stem) and Swin "
                "(swin_fmnist), each on 10%, 30% and 100% of the 55,000 training images, the same 1,075 steps "
                "(2.5 epochs of the whole set): 12 variants");
  e.full_hours = 4;
  const std::vector<std::pair<std::string, json>> models = {
      {"vit", {{"model", "vit_fmnist_small"}}},
      {"cnn", {{"model", "resnet_fmnist"}}},
      {"hybrid", {{"model", "vit_fmnist_small"}, {"model_config", {{"hybrid_channels", {32, 64}}, {"patch_size", 1}}}}},
      {"swin", {{"model", "swin_fmnist"}}}};
  const std::vector<std::pair<std::string, int64_t>> fractions = {{"10", 5500}, {"30", 16500}, {"100", 55000}};
  std::vector<Variant> v;
  for (const auto& [frac, n] : fractions)
    for (const auto& [m, s] : models) {
      json settings = s;
      settings["limit_train"] = n;
      v.push_back({m + "-" + frac, m + ", " + frac + "% of the data", settings});
    }
  Track t = fmnist_track(0, std::move(v));
  // The same steps for every fraction: 2.5 epochs of the whole set (the 10% subset is seen 25 times), which
  // keeps the 36 runs inside 4 hours on 2 cores; warm-up in steps too: one epoch of the whole set.
  t.quick = {{"max_steps", 32}, {"warmup_steps", 8}, {"eval_every", 8}, {"limit_eval", 1000}};
  t.full = {{"max_steps", 1075}, {"warmup_steps", 430}, {"eval_every", 430}};
  e.tracks = {std::move(t)};
  e.claims = {better("the CNN beats the ViT on 10% of the data", "cnn-10", "vit-10"),
              better("the CNN beats the ViT on 30% of the data", "cnn-30", "vit-30"),
              larger_gain("the CNN's lead over the ViT shrinks from 10% to 100% of the data", "cnn-10", "vit-10",
                          "cnn-100", "vit-100"),
              better("the hybrid ViT beats the ViT on 10% of the data", "hybrid-10", "vit-10"),
              better("Swin beats the ViT on 10% of the data", "swin-10", "vit-10")};
  return e;
}

Experiment norm() {
  Experiment e =
      described("norm",
                "Layer normalization suits a Transformer better than batch normalization, in the pre-norm and the "
                "post-norm arrangement.",
                "Vaswani et al. 2017 (post-norm LayerNorm); Xiong et al. 2020, On Layer Normalization in the "
                "Transformer Architecture (pre-norm); Shen et al. 2020, PowerNorm (BatchNorm in Transformers)",
                "LayerNorm / BatchNorm (over the tokens of each channel, padding included), each pre-norm and "
                "post-norm, in the ViT on Fashion-MNIST (2 epochs) and in a small Transformer (2 + 2 layers, d 128, "
                "d_ff 512) on the Bible (500 steps): 4 variants each");
  // 2 epochs: at 3 epochs the 24 runs took 2:06 on 2 cores (a BatchNorm ViT step costs about a quarter
  // more than a LayerNorm one).
  e.tracks = {fmnist_track(2, {vit("ln-pre", "LayerNorm, pre-norm", json::object()),
                               vit("bn-pre", "BatchNorm, pre-norm", {{"norm", "batch"}}),
                               vit("ln-post", "LayerNorm, post-norm", {{"norm_first", false}}),
                               vit("bn-post", "BatchNorm, post-norm", {{"norm", "batch"}, {"norm_first", false}})}),
              bible_track(500, {{"ln-pre", "LayerNorm, pre-norm", small_transformer({{"norm_first", true}})},
                                {"bn-pre", "BatchNorm, pre-norm",
                                 small_transformer({{"norm_first", true}, {"norm", "batch"}})},
                                {"ln-post", "LayerNorm, post-norm", small_transformer(json::object())},
                                {"bn-post", "BatchNorm, post-norm", small_transformer({{"norm", "batch"}})}})};
  e.claims = {better("LayerNorm beats BatchNorm, pre-norm", "ln-pre", "bn-pre"),
              better("LayerNorm beats BatchNorm, post-norm", "ln-post", "bn-post"),
              better("LayerNorm beats BatchNorm, pre-norm (Bible)", "ln-pre", "bn-pre", "bible"),
              better("LayerNorm beats BatchNorm, post-norm (Bible)", "ln-post", "bn-post", "bible")};
  return e;
}

Experiment scores() {
  Experiment e =
      described("scores",
                "Dot-product attention scores translate as well as additive (concat) ones, and faster; the "
                "general (bilinear) and cosine scores are no better.",
                "Luong et al. 2015, Effective Approaches to Attention-based NMT (section 3.1, table 4); Bahdanau et "
                "al. 2015 (additive); Graves et al. 2014 (cosine content addressing)",
                "the RNN translator (bidirectional GRU encoder, Luong decoder, H 256) with dot / general / concat / "
                "cosine scores: 4 variants");
  auto rnn = [](const std::string& score, const std::string& label) {
    return Variant{score, label,
                   {{"model", "rnn-attention"},
                    {"model_config", {{"emb_dim", 256}, {"hidden", 256}, {"attention", "luong"}, {"score", score}}}}};
  };
  e.tracks = {bible_track(500, {rnn("dot", "dot"), rnn("general", "general"), rnn("concat", "concat (additive)"),
                                 rnn("cosine", "cosine")})};
  e.claims = {equal("dot equals concat in BLEU (within 1 BLEU)", {"dot"}, {"concat"}, 1.0, "bible"),
              {"dot trains faster than concat (tokens per second)", "bible",
               {{1, {"dot"}, "tokens_per_second"}, {-1, {"concat"}, "tokens_per_second"}}, Direction::better, 0},
              equal("general equals dot in BLEU (within 1 BLEU)", {"general"}, {"dot"}, 1.0, "bible"),
              equal("cosine equals dot in BLEU (within 1 BLEU)", {"cosine"}, {"dot"}, 1.0, "bible")};
  return e;
}

Experiment transformer_vs_rnn() {
  Experiment e = described(
      "transformer-vs-rnn",
      "Self-attention translates better than recurrent encoder-decoders with attention, given the same training time.",
      "Vaswani et al. 2017, Attention Is All You Need (section 6.1, table 2); Bahdanau et al. 2015; Luong et al. "
      "2015",
      "the Transformer (3 + 3 layers, d 256, 4 heads, d_ff 1,024), a bidirectional-GRU encoder-decoder with "
      "Bahdanau attention and an LSTM one with Luong (general) attention (embeddings and hidden 256), each trained "
      "for the same 10 minutes: 3 variants");
  auto rnn = [](json model_config) { return json{{"model", "rnn-attention"}, {"model_config", std::move(model_config)}}; };
  Track t = bible_track(0, {{"transformer", "Transformer",
                             {{"model", "transformer"},
                              {"model_config", {{"d_model", 256}, {"nhead", 4}, {"layers", 3}, {"d_ff", 1024}}}}},
                            {"gru-bahdanau", "GRU + Bahdanau",
                             rnn({{"emb_dim", 256}, {"hidden", 256}, {"cell", "gru"}, {"attention", "bahdanau"}})},
                            {"lstm-luong", "LSTM + Luong",
                             rnn({{"emb_dim", 256},
                                        {"hidden", 256},
                                        {"cell", "lstm"},
                                        {"attention", "luong"},
                                        {"score", "general"}})}});
  t.quick.erase("max_steps");
  t.quick["max_minutes"] = 0.5;
  t.full["max_minutes"] = 10;   // (the time includes the dev evaluations, the same 200 sentences for each)
  e.tracks = {std::move(t)};
  e.claims = {better("the Transformer beats GRU + Bahdanau in the same time", "transformer", "gru-bahdanau", "bible"),
              better("the Transformer beats LSTM + Luong in the same time", "transformer", "lstm-luong", "bible")};
  return e;
}

// Fashion-MNIST classifiers trained once (seed 0) as the distillation teachers.
Track teacher_track() {
  Track t = fmnist_track(8, {{"cnn", "CNN teacher (resnet_fmnist)", {{"model", "resnet_fmnist"}}},
                             {"vit", "ViT teacher (vit_fmnist_small)", json::object()}});
  t.name = "teachers";
  t.data_label = "Fashion-MNIST, the teachers";
  t.once = true;
  return t;
}

Experiment distillation() {
  Experiment e = described(
      "distillation",
      "Hard distillation beats soft, and soft beats none; a CNN teacher beats a transformer teacher; a "
      "distillation token does better than distilling into the class token.",
      "Touvron et al. 2021, Training Data-Efficient Image Transformers & Distillation Through Attention, section 5.2 "
      "(tables 3 and 4)",
      "teachers trained once for 8 epochs: a CNN (resnet_fmnist) and a ViT (vit_fmnist_small); students "
      "(vit_fmnist_small, 1,072 steps = 2.5 epochs): no teacher, and soft (tau 3, alpha 0.1) or hard (alpha 0.5) "
      "distillation from either teacher, into a distillation token (deit_fmnist_small_distilled, its two heads "
      "averaged at test) or into the class token: 9 variants");
  e.full_hours = 4;
  std::vector<Variant> v = {{"none", "no distillation", json::object()}};
  for (const char* teacher : {"cnn", "vit"})
    for (const char* type : {"soft", "hard"})
      for (const bool token : {true, false}) {
        json s = {{"teacher", {{"run", std::string("teachers/") + teacher}}}, {"distill", type}};
        if (std::string(type) == "soft") {
          s["tau"] = 3.0;
          s["alpha"] = 0.1;
        }
        if (token) s["model"] = "deit_fmnist_small_distilled";
        v.push_back({std::string(type) + "-" + teacher + (token ? "-token" : "-class"),
                     std::string(type) + ", " + (std::string(teacher) == "cnn" ? "CNN" : "ViT") + " teacher, " +
                         (token ? "distillation token" : "class token"),
                     s});
      }
  Track students = fmnist_track(0, std::move(v));
  students.full = {{"max_steps", 1072}, {"warmup_steps", 429}, {"eval_every", 268}};
  e.tracks = {teacher_track(), std::move(students)};
  e.claims = {better("hard distillation beats soft (CNN teacher, distillation token)", "hard-cnn-token", "soft-cnn-token"),
              better("soft distillation beats none (CNN teacher, distillation token)", "soft-cnn-token", "none"),
              better("hard distillation beats none (CNN teacher, distillation token)", "hard-cnn-token", "none"),
              better("a CNN teacher beats a ViT teacher (hard, distillation token)", "hard-cnn-token", "hard-vit-token"),
              better("the distillation token beats distilling into the class token (hard, CNN teacher)",
                     "hard-cnn-token", "hard-cnn-class")};
  return e;
}

Experiment pretraining() {
  Experiment e = described(
      "pretraining", "Pre-training helps a small labelled task; the fewer the labels, the more it helps.",
      "Devlin et al. 2019, BERT (section 5); Howard and Ruder 2018, ULMFiT (section 4.3, low-shot learning)",
      "BERT-Mini pre-trained once (masked LM and next sentence, 3,000 steps of 32 sequences on the Bible and "
      "WordNet's glosses, which it sees without their labels), then fine-tuned to classify WordNet glosses by "
      "lexicographer file (45 classes), against the same model from scratch, each on 1%, 10% and 100% of the "
      "94,127 training glosses for the same 800 steps at the classifier's default peak learning rates (1e-4 from "
      "the pre-trained weights, 3e-4 from scratch): 6 variants");
  Track pre;
  pre.name = "pretrain";
  pre.data_label = "Bible + WordNet (masked LM)";
  pre.metric = pre.selection = pre.curve = "val_mlm_accuracy";
  pre.metric_label = "validation masked-LM accuracy (%)";
  pre.metric_scale = 100;
  pre.once = true;
  pre.base = {{"model", "bert-mini"}, {"task", "pretrain"}, {"data", "bible+wordnet"}};
  pre.quick = {{"max_steps", 40}, {"eval_every", 20}, {"limit_eval", 256}};
  pre.full = {{"max_steps", 3000}, {"eval_every", 500}};
  pre.smoke = {{"limit_train", 64}, {"max_steps", 1}, {"limit_eval", 32}, {"batch", 4}};
  pre.variants = {{"bert", "BERT-Mini, pre-trained", json::object()}};

  Track ft = accuracy_track("wordnet", "WordNet glosses (lexicographer file)");
  ft.base = {{"model", "bert-mini"}, {"task", "classify"}, {"data", "wordnet-lexname"}, {"limit_eval", 5000}};
  ft.quick = {{"max_steps", 40}, {"warmup_steps", 4}, {"eval_every", 20}, {"limit_eval", 500}};
  ft.full = {{"max_steps", 800}, {"warmup_steps", 80}, {"eval_every", 200}};
  ft.smoke = {{"limit_train", 64}, {"max_steps", 1}, {"limit_eval", 32}, {"batch", 8}};
  for (const auto& [frac, n] : std::vector<std::pair<std::string, int64_t>>{{"1", 941}, {"10", 9413}, {"100", 94127}})
    for (const bool pretrained : {true, false}) {
      json s = {{"limit_train", n}};
      if (pretrained) s["init"] = {{"run", "pretrain/bert"}};
      ft.variants.push_back({std::string(pretrained ? "pretrained-" : "scratch-") + frac,
                             std::string(pretrained ? "pre-trained, " : "from scratch, ") + frac + "% of the labels",
                             s});
    }
  e.tracks = {std::move(pre), std::move(ft)};
  for (const char* frac : {"1", "10", "100"})
    e.claims.push_back(better(std::string("pre-training beats scratch with ") + frac + "% of the labels",
                              std::string("pretrained-") + frac, std::string("scratch-") + frac, "wordnet"));
  e.claims.push_back(larger_gain("pre-training helps more with 1% of the labels than with 100%", "pretrained-1",
                                 "scratch-1", "pretrained-100", "scratch-100", "wordnet"));
  return e;
}

Experiment attention_distance() {
  Experiment e =
      described("attention-distance",
                "Lower layers attend both locally and globally (their heads' mean attention distances spread wide); "
                "higher layers attend globally, so the mean distance grows with depth.",
                "Dosovitskiy et al. 2021, An Image Is Worth 16x16 Words, section 4.5 (figure 7, right)",
                "one ViT, its mean attention distance per layer and head (on the first 256 test images) after each "
                "quarter of training");
  Track t = fmnist_track(0, {vit("vit", "ViT", json::object())});
  t.probe = "attention_distance";
  t.quick = {{"limit_train", 4096}, {"max_steps", 32}, {"warmup_steps", 8}, {"limit_eval", 1000}};
  t.full = {{"max_steps", 4288}};  // 10 epochs, measured every 1,072 steps
  e.tracks = {std::move(t)};
  e.claims = {{"the mean attention distance grows with depth (slope over the layers, pixels per layer)",
               "fmnist",
               {{1, {"vit"}, "distance_slope"}},
               Direction::better,
               0},
              {"the first layer's heads spread wider in distance than the last layer's (sd over heads, pixels)",
               "fmnist",
               {{1, {"vit"}, "distance_spread_drop"}},
               Direction::better,
               0}};
  return e;
}

}  // namespace

const std::vector<Experiment>& catalog() {
  static const std::vector<Experiment> all = {scaling(),     heads(),        qk_sharing(),         cls_vs_gap(),
                                              positions(),   inductive_bias(), distillation(),     scores(),
                                              norm(),        transformer_vs_rnn(), pretraining(),  attention_distance()};
  return all;
}

const Experiment& find_experiment(const std::string& name) {
  std::string known;
  for (const auto& e : catalog()) {
    if (e.name == name) return e;
    known += (known.empty() ? "" : ", ") + e.name;
  }
  throw Error("attn experiment: no experiment '" + name + "' (known: " + known + ")");
}

}  // namespace attn::experiment
