"""The benchmarks of docs/results.md and their targets, one table (BENCHMARKS), and the figure helpers the
targets and the page share; results_table.py reads, normalises and renders the records against it."""
from decimal import Decimal

LOWER_IS_BETTER = {"ms", "s", "MB", "MiB"}


# ---- figures ---------------------------------------------------------------------------------------------

NUM = (int, float, Decimal)   # record files are read with parse_float=Decimal: figures print as written


def is_num(x):
    return isinstance(x, NUM) and not isinstance(x, bool)


def is_figure(x):
    return is_num(x) or (isinstance(x, list) and len(x) == 2 and all(is_num(v) for v in x))


def low(x):
    return min(x) if isinstance(x, list) else x


def fmt_num(x):
    if isinstance(x, int) or (abs(x) >= 1000 and x == int(x)):
        return f"{int(x):,}"
    return f"{x:,}"


def fmt_fig(x, unit=""):
    if x is None:
        return "—"
    s = f"{fmt_num(x[0])}–{fmt_num(x[1])}" if isinstance(x, list) else fmt_num(x)
    if unit == "%":
        return s + "%"
    return f"{s} {unit}" if unit else s


def fmt_ratio(x):
    if x is None:
        return "—"
    if isinstance(x, list):
        return f"{fmt_num(x[0])}–{fmt_num(x[1])}×"
    return f"{x:.2f}×"


def sig(x, digits=4):
    """Rounds a measured float for the page (derived records only)."""
    if x is None or x != x:
        return None
    if x == 0:
        return 0
    from math import floor, log10
    d = max(0, digits - 1 - int(floor(log10(abs(x)))))
    return round(x, min(d, 3)) if abs(x) < 1000 else round(x)


def ratio_of(rec):
    """How many times faster attn is than the first peer, or None."""
    if rec.get("ratio") is not None:
        return rec["ratio"]
    if rec["kind"] != "speed":
        return None
    peers = rec.get("peers") or {}
    if not peers:
        return None
    a, p = rec.get("attn"), next(iter(peers.values()))
    if not is_num(a) or not is_num(p) or not a or not p:
        return None
    return round(float(p / a if rec["unit"] in LOWER_IS_BETTER else a / p), 2)


# ---- targets: one table of them, per benchmark and case ---------------------------------------------------

class Target:
    def __init__(self, text, check=None):
        self.text, self.check = text, check   # check(record) -> True / False / None (cannot tell)


def faster(x, what="PyTorch"):
    """attn at least x times as fast as the peer."""
    def check(r):
        q = ratio_of(r)
        return None if q is None else low(q) >= x
    return Target(f"≥ {x:g}× {what}", check)


def linear_target():
    def check(r):
        e = r.get("extra") or {}
        gf = r["attn"] if r["unit"] == "GFLOP/s" else e.get("gflops")
        fr = e.get("fraction_of_onednn")
        parts = [None if gf is None else low(gf) >= 370, None if fr is None else low(fr) >= 0.95]
        if False in parts:
            return False
        return None if None in parts else True
    return Target("≥ 370 GFLOP/s and ≥ 95% of a bare pre-packed oneDNN matmul", check)


def within_limit(text):
    """attn's figure at most the record's own limit (extra.limit_mb, worked out by the benchmark)."""
    def check(r):
        lim = (r.get("extra") or {}).get("limit_mb")
        return None if lim is None else low(r["attn"]) <= lim
    return Target(text, check)


def weights_target(x):
    return within_limit(f"int8 weights ≤ {x:g} × attn's f32 weights")


def memory_target():
    return within_limit("steady-state RSS ≤ 1.3 × weights + 100 MB")


def accuracy_at_least(pct, seconds=None):
    def check(r):
        ok = low(r["attn"]) >= pct
        if seconds is not None:
            s = (r.get("extra") or {}).get("seconds")
            if s is None:
                return None
            ok = ok and s <= seconds
        return ok
    text = f"≥ {pct:g}% test accuracy" + (f" within {seconds:,} s of training" if seconds else "")
    return Target(text, check)


def within_points_of_peer(points, what="PyTorch"):
    def check(r):
        peers = r.get("peers") or {}
        if not peers:
            return None
        return abs(r["attn"] - next(iter(peers.values()))) <= points + 1e-9
    return Target(f"within {points:g} point{'s' if points != 1 else ''} of {what}", check)


def beats_peer(what):
    def check(r):
        peers = r.get("peers") or {}
        return None if not peers else r["attn"] > next(iter(peers.values()))
    return Target(f"above {what}", check)


def overhead_at_most(x):
    """attn's model time at most x times the time of its own GEMMs alone (the record's ratio)."""
    def check(r):
        q = r.get("ratio")
        return None if q is None else low(q) <= x + 1e-9
    return Target(f"≤ {x:.2f}× its GEMMs alone", check)


NO_TARGET = Target("none (reported)")


class Bench:
    def __init__(self, key, kind, title, about, cases, peer_label="PyTorch"):
        self.key, self.kind, self.title, self.about, self.cases = key, kind, title, about, cases
        self.peer_label = peer_label


VIT_CASES = ["ViT-B/16, batch 1", "ViT-B/16, batch 8", "DeiT-Ti, batch 1", "DeiT-S, batch 1"]
INT8_CASES = ["ViT-B/16, batch 1", "ViT-B/16, batch 8", "DeiT-S, batch 1", "DeiT-S, batch 8",
              "BERT-base, batch 1, sequence 128", "BERT-base, batch 8, sequence 128"]
# int8_infer.sh's sides: (its JSON key, the peer's name in the records, the target against it)
INT8_PEERS = [("attn_f32", "attn f32", faster(1.5, "attn f32")),
              ("ort", "ONNX Runtime f32", faster(1.5, "ONNX Runtime f32")),
              ("torch_int8", "PyTorch int8", faster(2, "PyTorch dynamic int8"))]

MODEL_LABEL = {"vit_base_patch16_224": "ViT-B/16", "deit_tiny_patch16_224": "DeiT-Ti",
               "deit_small_patch16_224": "DeiT-S", "bert-base-uncased": "BERT-base", "swin_t": "Swin-T"}
# bench/gemm_limit.sh: attn's overhead over its own GEMMs, at most this, f32 and bf16, batch 1 and 8
GEMM_OVERHEAD_TARGETS = {"deit_tiny_patch16_224": 1.25, "deit_small_patch16_224": 1.15,
                         "vit_base_patch16_224": 1.10, "swin_t": 1.15, "bert-base-uncased": 1.15}


def gemm_limit_case(model, batch):
    return f"{MODEL_LABEL.get(model, model)}, batch {batch}" + (", sequence 128" if model.startswith("bert") else "")


GEMM_LIMIT_CASES = [gemm_limit_case(m, b) for m in GEMM_OVERHEAD_TARGETS for b in (1, 8)]


def bf16_train_cases(model):
    """A training bench's --precision bf16 rows (results_table.py): the bf16 step against PyTorch's bf16
    autocast step and against attn's own f32 step of the same run."""
    case = f"{model}, training step, bf16"
    return {f"{case}, vs PyTorch bf16 autocast": faster(1.5, "PyTorch bf16 autocast"),
            f"{case}, vs attn f32": faster(1.6, "attn f32")}


BENCHMARKS = [
    Bench("vit_infer", "speed", "ViT / DeiT inference, f32",
          "`attn bench` against torchvision's VisionTransformer with the same config, random weights, 224 × 224, "
          "median latency; each side the better of OMP_WAIT_POLICY=PASSIVE and the default.",
          dict(zip(VIT_CASES, [faster(1.45), faster(1.2), faster(2), faster(2)]))),
    Bench("vit_infer_bf16", "speed", "ViT / DeiT inference, bf16",
          "The same with bf16 Linear weights (f32 accumulation) against PyTorch with the model and input cast "
          "to bf16. Needs a CPU with a bf16 matmul (AVX512-BF16 or AMX) on both sides; the targets were set for "
          "an Intel with AMX.",
          dict(zip(VIT_CASES, [faster(1.8), faster(1.5), faster(1.8), faster(1.8)]))),
    Bench("bert_infer", "speed", "BERT inference, f32",
          "`attn bench` of bert-base-uncased's BertModel (last hidden state and pooler), random weights and token "
          "ids, against PyTorch (the faster of a module tree in Hugging Face's layout and torch.nn.TransformerEncoder's "
          "inference fast path, named in the run's raw lines) and ONNX Runtime 1.30 (that tree exported with "
          "torch.onnx.export, graph optimizations all); median latency, attn the better of its two wait policies. "
          "Mixed lengths: one batch of 8 sequences of 16, 32, ..., 128 tokens.",
          {"batch 1, sequence 128, vs PyTorch": faster(1.5), "batch 1, sequence 128, vs ONNX Runtime":
           faster(1.0, "ONNX Runtime"), "batch 8, sequence 128, vs PyTorch": faster(1.3),
           "batch 8, sequence 128, vs ONNX Runtime": faster(1.0, "ONNX Runtime"),
           "mixed lengths, vs ONNX Runtime padded to 128": faster(1.5, "ONNX Runtime"),
           "mixed lengths, vs attn's 8 batch-1 passes": faster(1.0, "the sum of attn's batch-1 times"),
           "mixed lengths, vs PyTorch": NO_TARGET}),
    Bench("bert_infer_bf16", "speed", "BERT inference, bf16",
          "The same with attn's bf16 Linear weights against PyTorch's bf16 autocast; needs a CPU with a bf16 matmul.",
          {"batch 1, sequence 128, vs PyTorch": faster(1.5), "batch 8, sequence 128, vs PyTorch": faster(1.5)}),
    Bench("bert_finetune", "speed", "BERT fine-tuning step",
          "bert-base-uncased as BertForSequenceClassification (dropout 0.1), batch 8 × 128 random token ids, "
          "cross-entropy, AdamW, f32, train mode (bench/bert_finetune_bench.cpp), against the Hugging Face-layout "
          "module tree of tests/golden/gen/bert.py in PyTorch on the same shapes; median step time, with --rounds "
          "the median of alternated rounds' ratios.",
          {"bert-base-uncased, batch 8 × 128, training step": faster(1.3)}),
    Bench("swin_infer", "speed", "Swin inference, f32",
          "`attn bench swin_t` (torchvision's layout, random weights, 224 × 224) against torchvision's swin_t in "
          "PyTorch (the faster of eager and torch.jit.trace + freeze, named in the note) and ONNX Runtime 1.30 "
          "(the module exported with torch.onnx.export, graph optimizations all); median latency, attn and PyTorch "
          "each the better of their two wait policies. The note gives each side's fraction of the GEMM ceiling "
          "`attn bench` measured in the same run (GFLOP/s from attn's MAC count over a square oneDNN matmul's).",
          {"batch 1, vs PyTorch": faster(2), "batch 1, vs ONNX Runtime": faster(1.2, "ONNX Runtime"),
           "batch 8, vs PyTorch": faster(1.5), "batch 8, vs ONNX Runtime": faster(1.0, "ONNX Runtime")}),
    Bench("swin_infer_bf16", "speed", "Swin inference, bf16",
          "The same with attn's bf16 Linear weights against PyTorch's bf16 autocast; needs a CPU with a bf16 matmul.",
          {"batch 1, vs PyTorch": faster(1.8), "batch 8, vs PyTorch": faster(1.8)}),
    Bench("int8_infer", "speed", "int8 inference",
          "`attn bench --dtype int8` against attn's own f32, ONNX Runtime 1.30's f32 (ONNX Runtime's int8 quantizer "
          "is not installable here) and PyTorch's dynamic int8 (torch.quantization.quantize_dynamic of the f32 "
          "model's nn.Linear modules, qint8, the faster of its onednn and qnnpack engines in a probe before the "
          "rounds); ViT / DeiT as in vit_infer (torchvision's VisionTransformer: its attention projections stay "
          "f32 under quantize_dynamic, the note gives the share of Linear weights PyTorch ran in int8), BERT as "
          "in bert_infer (the Hugging Face-layout tree: every Linear int8; torch 1.13's TransformerEncoder fast "
          "path cannot run quantized Linears). Random weights; R alternated rounds, each side once a case per "
          "round, attn and PyTorch the better of their two wait policies; the median of the rounds' medians, "
          "the spread over the rounds in the note.",
          {f"{c}, vs {name}": t for c in INT8_CASES for _, name, t in INT8_PEERS}),
    Bench("gemm_overhead", "speed", "Inference at the GEMM limit: overhead over the model's own GEMMs",
          "`attn bench`'s model time over the time of exactly its own GEMMs run alone on oneDNN in the same run "
          "(same shapes and count, same dtype, the same packed weights; the fused attention's QKᵀ and PV as the "
          "batched GEMMs they are): the ratio column is that overhead, the attn column the model's median latency "
          "and the peer column the GEMMs' time (bench/gemm_limit.sh, random weights, BERT-base as BertModel at "
          "sequence 128, R alternated rounds: medians over the rounds, the spread in the note). bf16 needs a CPU "
          "with a native bf16 matmul.",
          {f"{gemm_limit_case(m, b)}, {d}": overhead_at_most(x)
           for m, x in GEMM_OVERHEAD_TARGETS.items() for b in (1, 8) for d in ("f32", "bf16")}),
    Bench("gemm_limit", "speed", "Inference at the GEMM limit: against ONNX Runtime and PyTorch",
          "The same runs: attn f32 against ONNX Runtime 1.30's f32 (torch.onnx.export of the same torchvision / "
          "Hugging Face-layout model, graph optimizations all, the same intra-op threads) and attn bf16 against "
          "PyTorch's bf16 (the faster of autocast and the model cast to bf16, each at the better of its two wait "
          "policies; torch 1.13's autocast cannot run torchvision's Swin, which runs cast).",
          {f"{c}, {d}": faster(x, name) for c in GEMM_LIMIT_CASES
           for d, x, name in (("f32, vs ONNX Runtime f32", 1.3, "ONNX Runtime f32"),
                              ("bf16, vs PyTorch bf16", 1.5, "PyTorch bf16"))}),
    Bench("vit_train", "speed", "Fashion-MNIST ViTs: training step and inference",
          "Training step at batch 128 (AdamW) and inference at batch 256, against the same model in PyTorch "
          "(its inference timed whole and in slices of 16 and 32, its best counted); with --rounds, the median "
          "of alternated rounds. vit_fmnist_small: patch 4, D 128, depth 6, 4 heads, MLP 256; vit_fmnist: "
          "D 192, 3 heads, MLP 768.",
          {"vit_fmnist_small, training step": faster(1.5), "vit_fmnist_small, inference": faster(2),
           "vit_fmnist, training step": faster(1.5), "vit_fmnist, inference": faster(2),
           **bf16_train_cases("vit_fmnist_small"), **bf16_train_cases("vit_fmnist")}),
    Bench("swin_train", "speed", "Fashion-MNIST Swin: training step",
          "swin_fmnist (patch 2, window 7, C 48, depths 2 / 6, heads 3 / 6, drop-path 0.1) at batch 128, AdamW, "
          "label smoothing 0.1, f32, against torchvision's SwinTransformer of the same sizes "
          "(`vit_train_bench --model swin_fmnist`); with --rounds, the median of alternated rounds.",
          {"swin_fmnist, training step": faster(1.5), **bf16_train_cases("swin_fmnist")}),
    Bench("bert_train", "speed", "BERT pre-training step",
          "bert-mini (4 layers, 256 hidden, 4 heads) BertForPreTraining, batch 32 x 128 tokens, 19 masked positions "
          "per sequence, MLM + NSP cross-entropy, AdamW, dropout 0.1, f32 (bench/bert_train_bench.cpp), against "
          "PyTorch running Hugging Face's module tree of the same model (bench/peers/bert_train.py: the MLM head "
          "at every position, as transformers computes it; attn runs it at the masked positions, as Google's "
          "BERT gathers them); with --rounds, the median of alternated rounds.",
          {"bert-mini, training step": faster(1.5), **bf16_train_cases("bert-mini")}),
    Bench("encoder_block", "speed", "Pre-norm Transformer encoder block",
          "D 768, 12 heads, T 197, batch 8, f32, and bf16 mixed precision (--precision bf16: attn's autocast against "
          "PyTorch's CPU autocast); median of the timed runs, each side at its better wait policy. \"Over its GEMMs "
          "alone\": the step against the oneDNN time of exactly its GEMMs (forward and backward), same run.",
          {"forward + backward": faster(1.5), "forward (training)": NO_TARGET, "forward, no grad": NO_TARGET,
           "forward + backward, over its GEMMs alone": overhead_at_most(1.15),
           "forward + backward, bf16": faster(1.5, "PyTorch bf16 autocast"),
           "forward (training), bf16": NO_TARGET, "forward, no grad, bf16": NO_TARGET,
           "forward + backward, over its GEMMs alone, bf16": NO_TARGET,
           "forward + backward, bf16, vs attn f32": faster(1.6, "attn f32")}),
    Bench("attention", "speed", "Scaled dot-product attention",
          "attn's fused kernel against PyTorch's softmax(q·kᵀ/√d)·v at B 1, 12 heads, head size 64, f32; "
          "median of the rounds' ratios, attn and PyTorch alternated.",
          {"forward, T = 197": faster(1.5), "forward, T = 1024": faster(3), "forward, T = 4096": faster(3),
           "forward + backward, T = 1024": faster(2)}),
    Bench("linear", "speed", "Linear layer at ViT-B/16's MLP shape",
          "(197 × 768) · (768 × 3072) + bias, f32, against PyTorch's F.linear and a bare oneDNN matmul with "
          "pre-packed weights (the ceiling for this shape).",
          {"packed weight (inference's path)": linear_target(), "plain weight (training's path)": linear_target()}),
    Bench("linear_train", "speed", "A linear layer's three training products",
          "x·Wᵀ + b, dy·W and dyᵀ·x as attn's linear node runs them, against PyTorch's same three: the "
          "training-step speed-up the GEMMs alone allow.",
          {}),
    Bench("kernels", "speed", "Layer norm, softmax, GELU and the fused kernels",
          "Forward and backward at 8 × 197 × 768 and 128 × 50 × 192; fused: bias + GELU and residual + "
          "layer norm against PyTorch's unfused ops.",
          {"every row": Target("each row: forward ≥ 1.2× (or ≥ 80% of memcpy), backward ≥ 1.5×, fused ≥ 2×")}),
    Bench("mlp_train", "speed", "MLP training step",
          "784-512-512-10, batch 128, AdamW, f32.",
          {"training step": faster(1.5)}),
    Bench("conv", "speed", "Convolution stack training step",
          "A small ResNet-style stack (3 × 3 convolutions, batch norm, ReLU, max pool) on 128 images of 28 × 28.",
          {"training step": NO_TARGET}),
    Bench("translate_train", "speed", "Translation training",
          "Transformer 3 + 3 layers, d 256, 4 heads, d_ff 1,024, dropout 0.1, 8,000-piece vocabulary, "
          "4,096-token batches on the English → Spanish Bible, against torch.nn.Transformer on the identical "
          "batches; target tokens per second over steps after the tenth, both under OMP_WAIT_POLICY=PASSIVE.",
          {"training": faster(1.5), "training, bf16": faster(1.5, "PyTorch bf16 autocast"),
           "training, bf16, vs attn f32": faster(1.6, "attn f32")}),
    Bench("transformer_decode", "speed", "Batched greedy decoding",
          "Transformer 3 + 3 layers, d 256, 8 heads, vocabulary 8,000, batch 32, 32 steps; attn's KV cache "
          "against PyTorch's functional ops with its own KV cache (target tokens per second).",
          {"with a KV cache": faster(1.5), "without a cache": NO_TARGET}),
    Bench("rnn", "speed", "GRU and LSTM layers",
          "One layer, one direction, T 50, batch 64, 256 → 256, f32, against torch.nn.GRU / LSTM; median of 15 "
          "runs, the peer under OMP_WAIT_POLICY=PASSIVE.",
          {f"{m}, {w}": NO_TARGET for m in ("GRU", "LSTM") for w in ("forward + backward", "forward")}),
    Bench("folder_eval", "speed", "Evaluating foreign weights on an image folder",
          "`attn eval --weights` against ImageFolder + DataLoader + VisionTransformer: the whole loop "
          "(decoding, resize, crop, normalise, forward).",
          {}),
    Bench("vit_memory", "memory", "Inference memory",
          "Peak resident set of `attn bench`'s timed passes (counted afresh after loading).",
          {f"{d} {c}": memory_target() for d in ("f32", "bf16") for c in VIT_CASES}),
    Bench("bert_memory", "memory", "BERT inference memory",
          "Peak resident set of `attn bench`'s timed passes of bert-base-uncased's BertModel (counted afresh after "
          "loading).",
          {"f32 batch 1, sequence 128": memory_target()}),
    Bench("int8_weights", "memory", "int8 weight memory",
          "`attn bench --dtype int8`'s weights_mb against the same model's f32 weights_mb (bench/int8_infer.sh).",
          {c: weights_target(0.3) for c in INT8_CASES}),
    Bench("swin_memory", "memory", "Swin inference memory",
          "Peak resident set of `attn bench`'s timed passes of swin_t (counted afresh after loading).",
          {f"{d} batch {b}": memory_target() for d in ("f32", "bf16") for b in (1, 8)}),
    Bench("fmnist_budget", "accuracy", "Fashion-MNIST in a 2-hour budget",
          "A ViT trained from scratch on 2 threads; final-epoch test accuracy; recipe: AdamW 1e-3, weight decay "
          "0.05, 1 warm-up epoch then cosine, label smoothing 0.1, crop + flip, batch 128, seed 0.",
          {"vit_fmnist_small, patch 4, 50 epochs": accuracy_at_least(92, 7200),
           "hybrid ViT (2-conv stem), 50 epochs": accuracy_at_least(92, 7200)}, peer_label=None),
    Bench("fmnist_vs_pytorch", "accuracy", "Fashion-MNIST, attn against PyTorch on one recipe",
          "vit_fmnist_small, 10 epochs, the same recipe and 55,000 training images on both sides; test accuracy, "
          "mean of seeds 0 and 1.",
          {"vit_fmnist_small, 10 epochs": within_points_of_peer(0.5)}),
    Bench("fmnist_teacher", "accuracy", "CNN teacher for distillation",
          "resnet_fmnist (stages 32 / 64 / 128 × 2 basic blocks), 15 epochs, AdamW 2e-3; test accuracy.",
          {"resnet_fmnist, 15 epochs": accuracy_at_least(93)}, peer_label=None),
    Bench("fmnist_same_budget", "accuracy", "Fashion-MNIST at one time budget: ViT, Swin and the CNN",
          "vit_fmnist_small, swin_fmnist and resnet_fmnist each trained for the same wall time on 2 threads, seed 0 "
          "(`bash bench/fmnist_accuracy.sh build/test same-budget MINUTES`): the epochs each one's measured "
          "speed fits in the budget, the budget recipe (resnet_fmnist: lr 2e-3, as the teacher); test accuracy.",
          {}, peer_label=None),
    Bench("distillation", "accuracy", "DeiT distillation on Fashion-MNIST",
          "deit_fmnist_small_distilled with the resnet_fmnist teacher against vit_fmnist_small without it, "
          "10 epochs, the budget recipe; test accuracy (both heads averaged), mean of seeds 0 and 1.",
          {"hard distillation": beats_peer("no distillation"), "soft distillation": NO_TARGET},
          peer_label="no distillation"),
    Bench("bert_pretraining_effect", "accuracy", "BERT fine-tuning: pre-trained against from scratch",
          "bert-mini fine-tuned on each WordNet task for the same number of steps, once from the checkpoint of "
          "`bash bench/bert_pretrain.sh` (masked LM + next sentence on the KJV and WordNet's glosses) and once from "
          "random weights, seed 0 (`bash bench/bert_finetune.sh BUILD --init CKPT --steps N`); test metrics in %. "
          "The note gives the pre-training run and each run's steps.",
          {c: NO_TARGET for c in ("lexicographer file (45 classes), accuracy", "lexicographer file (45 classes), "
                                  "macro-F1", "gloss–lemma pairs, accuracy", "supersense tagging, span F1")},
          peer_label="from scratch"),
    Bench("allreduce", "speed", "Gradient all-reduce of data-parallel training",
          "attn's bucketed all-reduce (dist::GradReducer: about 25 MB buckets, non-blocking, in place in the "
          "gradients' own buffers) of ViT-B/16's gradients (86,567,656 floats) against one bare MPI_Allreduce of the "
          "same bytes, 2 ranks on one machine, Open MPI 4.1.4 (`mpirun -np 2 build/test/bench/allreduce_bench`); "
          "median of 7.",
          {"ViT-B/16's gradients, 2 ranks, shared memory": faster(0.9, "a bare MPI_Allreduce"),
           "ViT-B/16's gradients, 2 ranks, TCP on the loopback": faster(0.9, "a bare MPI_Allreduce")},
          peer_label="bare MPI_Allreduce"),
    Bench("mpi_train", "speed", "Data-parallel training on one machine",
          "2 ranks × 1 thread (`mpirun -np 2 --bind-to none attn train ... --threads 1`) against 1 process × 2 "
          "threads at the same combined batch (vit_fmnist: 2 × 64 images; the Transformer on bible-en-es: 2 × 2,048 "
          "target tokens), training items per second; the note gives the share of the step rank 0 waited after "
          "its backward (the all-reduce left, plus waiting for the slower rank), the share not hidden (the wait of "
          "the rank whose backward ended last) and how much of a blocking all-reduce of the same gradients "
          "was hidden.",
          {c: NO_TARGET for c in ("vit_fmnist, shared memory", "vit_fmnist, TCP on the loopback",
                                  "transformer, shared memory", "transformer, TCP on the loopback")},
          peer_label="1 process × 2 threads"),
    Bench("mixed_precision", "accuracy", "bf16 mixed-precision training against f32",
          "`attn train --precision bf16` against `--precision f32`: the same model, data, recipe, steps and seeds "
          "(0 and 1), the mean of the seeds (bench/mixed_precision.sh). Short runs at its default sizes: "
          "vit_fmnist_small 2 epochs, the Transformer (d_model 256, 3 layers) 400 steps, bert-mini 400 steps.",
          {"Fashion-MNIST ViT, test accuracy": within_points_of_peer(0.5, "attn f32"),
           "Bible Transformer, test BLEU (greedy)": within_points_of_peer(1, "attn f32"),
           "bert-mini pre-training, validation masked-LM accuracy": within_points_of_peer(1, "attn f32")},
          peer_label="attn f32"),
    Bench("translation_bleu", "accuracy", "Translation quality after one hour of training",
          "English → Spanish Bible verses (KJV → Reina-Valera 1909), 8,000-piece SentencePiece vocabulary, "
          "test BLEU on 1,000 verses as sacreBLEU computes it (13a); PyTorch trained on the identical batches.",
          {"Transformer, greedy": within_points_of_peer(1), "Transformer, beam 4": NO_TARGET,
           "RNN with attention, greedy": NO_TARGET, "RNN with attention, beam 4": NO_TARGET}),
]
BENCH = {b.key: b for b in BENCHMARKS}
