#!/usr/bin/env python3
"""Writes docs/results.md from benchmark records (JSON lines); python3 standard library only.

  python3 bench/results_table.py                      # bench/results/*.jsonl -> docs/results.md
  python3 bench/results_table.py A.jsonl B.jsonl      # other record files (--out PATH for another page)
  python3 bench/results_table.py --add RUN.jsonl      # a bench/run_all.sh run: normalise it into
                                                      # bench/results/<date>-<host>.jsonl (other cases
                                                      # already there kept), then rewrite the page
  python3 bench/results_table.py --host-record        # prints this machine as a host record (from /proc/cpuinfo)
  python3 bench/results_table.py --compare before B1.jsonl B2.jsonl --compare after A1.jsonl A2.jsonl
                                                      # two builds' raw runs (bench/compare_builds.sh): a table

Record schema (one JSON object a line; bench/results/*.jsonl hold normalised records only):

  host record    {"kind": "host", "host": "zen5", "cpu": "AMD EPYC ...", "flags": "AVX2, FMA, AVX-512, ...",
                  "vcpus": 2, "date": "2026-12-01", "time": "14:43 UTC", "fma_gflops": 410.2 | [407, 412],
                  "gemm_gflops": "...", "note": "..."}                      (fma_gflops .. note optional)
  result record  {"kind": "speed" | "memory" | "accuracy", "benchmark": "vit_infer", "case": "ViT-B/16, batch 1",
                  "host": "zen5", "date": "2026-12-01", "time": "14:43–14:47 UTC", "command": "bash bench/...",
                  "unit": "ms", "attn": 103.7, "peers": {"PyTorch": 274.7}, "ratio": 2.65, "met": true,
                  "extra": {"limit_mb": 550, "seconds": 6205, "gflops": 219.0, "fraction_of_onednn": 0.954},
                  "note": "..."}
    A figure is a number or [low, high] (a range over runs). "ratio" (speed: how many times faster attn is,
    peer time / attn time or attn rate / peer rate) is computed from "attn" and the first peer when absent and
    both are single numbers. The target of each (benchmark, case) is in BENCHMARKS (bench/results_targets.py),
    stated once; "met" is given only where the figures cannot decide it (a summary over rows), otherwise the
    target decides it, from the lowest value of a range. time, peers, ratio, met, extra and note are optional; "attn" is null
    where only the ratio was recorded. unit: ms, s, MB, MiB (lower is better), tok/s, GFLOP/s, %, BLEU.
    Accuracy tables show attn minus the first peer ("difference") instead of a ratio.

bench/run_all.sh writes a raw file: a host record (--host-record), then for each benchmark a
{"kind": "command", "command": "..."} record followed by the lines the program printed (the bench
programs' own JSON summaries, {"bench": "linear", ...}, and bench/vit_infer.sh's per-run lines
{"model": ..., "batch": ..., "policy": ..., "attn": {...}, "torch": {...}}). --add turns those into result
records; the host, date and command come from the records before them, the targets from BENCHMARKS.
bench/int8_infer.sh writes such a file itself ($WORK/int8_infer.raw.jsonl: its per-round lines
{"bench": "int8_infer", "round": ..., "attn_int8": {...}, "attn_f32": {...}, "ort": {...}, "torch_int8": {...}}
after a host and a command record); a run whose attn int8 side ran another dtype (ATTN_INT8_DTYPE, its
plumbing check) is refused.
"""
import argparse
import datetime
import glob
import json
import os
import re
import sys
from decimal import Decimal

from results_targets import (BENCH, BENCHMARKS, INT8_PEERS, LOWER_IS_BETTER, MODEL_LABEL, NO_TARGET, Target, faster,
                             fmt_fig, fmt_num, fmt_ratio, is_figure, is_num, low, ratio_of, sig)
import gemm_limit_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
PAGE = os.path.join(ROOT, "docs", "results.md")


class RecordError(Exception):
    pass


# ---- reading records -------------------------------------------------------------------------------------

REQUIRED = {
    "host": ["host", "cpu", "flags", "date"],
    "speed": ["benchmark", "case", "host", "date", "command", "unit", "attn"],
    "memory": ["benchmark", "case", "host", "date", "command", "unit", "attn"],
    "accuracy": ["benchmark", "case", "host", "date", "command", "unit", "attn"],
}


def check_record(rec, where):
    kind = rec.get("kind")
    if kind not in REQUIRED:
        raise RecordError(f"{where}: expected \"kind\" to be one of {sorted(REQUIRED)}, found {kind!r}")
    missing = [k for k in REQUIRED[kind] if k not in rec]
    if missing:
        raise RecordError(f"{where}: a {kind} record needs {', '.join(missing)}; found keys {sorted(rec)}")
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", rec["date"]):
        raise RecordError(f"{where}: expected \"date\" as YYYY-MM-DD, found {rec['date']!r}")
    if kind == "host":
        return
    if rec["benchmark"] not in BENCH:
        raise RecordError(f"{where}: unknown benchmark {rec['benchmark']!r}; known: {', '.join(BENCH)}")
    if BENCH[rec["benchmark"]].kind != kind:
        raise RecordError(f"{where}: benchmark {rec['benchmark']!r} is a {BENCH[rec['benchmark']].kind} "
                          f"benchmark, found kind {kind!r}")
    for name, x in [("attn", rec["attn"])] + [(f"peers.{k}", v) for k, v in (rec.get("peers") or {}).items()]:
        if x is not None and not is_figure(x):
            raise RecordError(f"{where}: expected {name} to be a number or [low, high], found {x!r}")
    if rec.get("ratio") is not None and not is_figure(rec["ratio"]):
        raise RecordError(f"{where}: expected ratio to be a number or [low, high], found {rec['ratio']!r}")


def read_lines(path, parse_float=float):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append((f"{path}:{n}", json.loads(line, parse_float=parse_float)))
            except json.JSONDecodeError as e:
                raise RecordError(f"{path}:{n}: not a JSON object ({e})") from None
    return out


def read_records(paths):
    hosts, results = {}, []
    for i, path in enumerate(paths):
        for where, rec in read_lines(path, parse_float=Decimal):
            check_record(rec, where)
            rec["_order"] = (i, where)
            if rec["kind"] == "host":
                old = hosts.get(rec["host"])
                if old is None or (old["date"], old.get("time", "")) <= (rec["date"], rec.get("time", "")):
                    hosts[rec["host"]] = rec
            else:
                results.append(rec)
    for r in results:
        if r["host"] not in hosts:
            raise RecordError(f"{r['_order'][1]}: host {r['host']!r} has no host record in the files read")
    return hosts, results


# ---- this machine ----------------------------------------------------------------------------------------

def amd_zen(family, model):
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen"
    if family == 25:
        return "Zen 4" if 0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF else "Zen 3"
    if family == 26:
        return "Zen 5"
    return None


def host_record():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                if info:
                    break
                continue
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    flags = set(info.get("flags", "").split())
    family, model = int(info.get("cpu family", "0")), int(info.get("model", "0"))
    name = info.get("model name", "unknown CPU")
    gen = amd_zen(family, model) if info.get("vendor_id") == "AuthenticAMD" else None
    have = [label for flag, label in [("avx2", "AVX2"), ("fma", "FMA"), ("avx512f", "AVX-512"),
                                      ("avx512_bf16", "AVX512-BF16"), ("amx_tile", "AMX")] if flag in flags]
    lack = [label for flag, label in [("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"), ("amx_tile", "AMX")]
            if flag not in flags]
    now = datetime.datetime.now(datetime.timezone.utc)
    if gen:
        key = gen.lower().replace(" ", "")
    elif info.get("vendor_id") == "GenuineIntel" and "amx_tile" in flags:
        key = "xeon-amx"   # virtual machines often hide the model name ("Intel(R) Xeon(R) Processor")
    else:
        key = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return {"kind": "host", "host": key,
            "cpu": f"{name}, CPU family {family} model {model}" + (f" ({gen})" if gen else ""),
            "flags": ", ".join(have) + ("; no " + ", no ".join(lack) if lack else ""),
            "vcpus": os.cpu_count(), "date": now.strftime("%Y-%m-%d"), "time": now.strftime("%H:%M UTC")}


# ---- a run_all.sh run: raw lines -> result records -------------------------------------------------------

def int8_records(runs, rec):
    """bench/int8_infer.sh's lines of one case (one a round) -> a speed record against each peer and the
    weight-memory record: the median of the rounds' medians, the spread over the rounds in the note."""
    def median(v):
        v = sorted(v)
        n = len(v)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

    first = runs[0]
    for j in runs:
        if j.get("attn_int8_dtype", "int8") != "int8" or j["attn_int8"].get("dtype") != "int8":
            raise RecordError(f"int8_infer: attn's int8 side of {j['model']} batch {j['batch']} ran --dtype "
                              f"{j['attn_int8'].get('dtype')} (ATTN_INT8_DTYPE={j.get('attn_int8_dtype')}, a "
                              f"plumbing check): not an int8 measurement, not added")
    case = f"{MODEL_LABEL.get(first['model'], first['model'])}, batch {first['batch']}"
    if first.get("seq_len"):
        case += f", sequence {first['seq_len']}"
    rounds = sorted({j["round"] for j in runs})
    if len(rounds) != len(runs):
        raise RecordError(f"int8_infer: {case} has {len(runs)} lines for rounds {rounds} (one a round expected)")
    ms = {side: [j[side]["latency_ms"]["median"] for j in runs] for side in ["attn_int8"] + [p[0] for p in INT8_PEERS]}
    a = median(ms["attn_int8"])
    spread = lambda v: f"{sig(min(v))}–{sig(max(v))} ms"
    t = first["torch_int8"]
    q = t["quantized"]
    probe = ", ".join(f"{e} {sig(v)} ms" for e, v in (first.get("qengine_probe_ms") or {}).items())
    torch_about = (f"; PyTorch: {t['qengine']} engine" + (f" (probe: {probe})" if probe else "") +
                   (f", {t['impl']} tree" if t.get("impl") else "") +
                   f", {q['linear_layers_int8']} Linear layers int8 and {q['linear_layers_f32']} f32, "
                   f"{100 * q['int8_share_of_linear_weights']:.0f}% of the Linear weights int8")
    for side, name, _ in INT8_PEERS:
        p = median(ms[side])
        rec("speed", "int8_infer", f"{case}, vs {name}", "ms", a, None, peers={name: sig(p)}, ratio=round(p / a, 2),
            extra={"rounds": len(runs), "attn_range_ms": [sig(min(ms["attn_int8"])), sig(max(ms["attn_int8"]))],
                   "peer_range_ms": [sig(min(ms[side])), sig(max(ms[side]))]},
            note=f"{len(runs)} round{'s' if len(runs) != 1 else ''}; over the rounds attn int8 "
                 f"{spread(ms['attn_int8'])}, {name} {spread(ms[side])}" + (torch_about if side == "torch_int8" else ""))
    wi, wf = first["attn_int8"]["weights_mb"], first["attn_f32"]["weights_mb"]
    rec("memory", "int8_weights", case, "MB", wi, None,
        extra={"limit_mb": sig(0.3 * wf), "f32_weights_mb": sig(wf), "fraction": sig(wi / wf, 3)},
        note=f"attn f32: {sig(wf)} MB of weights; int8 / f32 = {wi / wf:.3f}")


def gemm_limit_records(runs, rec):
    """bench/gemm_limit.sh's lines of one case (one a round) -> per dtype the overhead record (the model's
    median latency against its GEMMs' time; the ratio the median overhead over the rounds) and the record
    against the dtype's peer (ONNX Runtime f32, PyTorch bf16): medians of the rounds' medians."""
    rounds = sorted({j["round"] for j in runs})
    if len(rounds) != len(runs):
        raise RecordError(f"gemm_limit: {runs[0]['model']} batch {runs[0]['batch']} has {len(runs)} lines for "
                          f"rounds {rounds} (one a round expected)")
    (e,) = gemm_limit_table.summarize(runs).values()
    n = e["rounds"]
    span = lambda t, unit="ms": f"{sig(t[1])}–{sig(t[2])}{' ' + unit if unit else ''}"
    for d, peer, name in (("f32", "ort", "ONNX Runtime f32"), ("bf16", "torch_bf16", "PyTorch bf16")):
        a = e["sides"].get(f"attn_{d}")
        if a is None:
            continue
        o, g = e["overhead"][d], e["gemm_ms"][d]
        rec("speed", "gemm_overhead", f"{e['case']}, {d}", "ms", sig(a[0]), None, peers={"its GEMMs alone": sig(g[0])},
            ratio=round(o[0], 3), extra={"rounds": n, "overhead_range": [sig(o[1], 3), sig(o[2], 3)]},
            note=f"{n} round{'s' if n != 1 else ''}; over the rounds the overhead {span(o, '')}, attn {span(a)}, "
                 f"its GEMMs {span(g)}")
        p = e["sides"][peer]
        impl = f"; PyTorch ran {e['peer_impl'][peer]}" if peer in e["peer_impl"] else ""
        rec("speed", "gemm_limit", f"{e['case']}, {d}, vs {name}", "ms", sig(a[0]), None, peers={name: sig(p[0])},
            ratio=round(p[0] / a[0], 2), extra={"rounds": n},
            note=f"{n} round{'s' if n != 1 else ''}; over the rounds attn {d} {span(a)}, {name} {span(p)}{impl}")


def swin_records(j, rec):
    """bench/swin_infer.sh's line of one case -> its speed records (PyTorch, ONNX Runtime) and memory record."""
    a = j["attn"]
    bench = "swin_infer" if j["dtype"] == "f32" else "swin_infer_bf16"
    base = j["case"] if j["model"] == "swin_t" else f"{j['model']}, {j['case']}"
    ms = a["latency_ms"]["median"]
    gflop = 2.0 * a["gmacs_per_image"] * a["batch"]
    frac = lambda t: sig(gflop / (t * 1e-3) / a["gemm_ceiling_gflops"], 2)
    tm = j["torch"]["latency_ms"]["median"]
    rec("speed", bench, f"{base}, vs PyTorch", "ms", ms, tm,
        extra={"gemm_fraction": frac(ms), "peer_gemm_fraction": frac(tm)},
        note=f"PyTorch: {j['torch']['impl']}; fraction of the GEMM ceiling: attn {frac(ms):.2f}, PyTorch {frac(tm):.2f}")
    if j.get("ort"):
        om = j["ort"]["latency_ms"]["median"]
        rec("speed", bench, f"{base}, vs ONNX Runtime", "ms", ms, None, peers={"ONNX Runtime": sig(om)},
            extra={"gemm_fraction": frac(ms), "peer_gemm_fraction": frac(om)},
            note=f"fraction of the GEMM ceiling: attn {frac(ms):.2f}, ONNX Runtime {frac(om):.2f}")
    rec("memory", "swin_memory", f"{j['dtype']} {base}", "MB", a["peak_rss_steady_mb"], None,
        extra={"limit_mb": round(1.3 * a["weights_mb"] + 100)})


def normalise(path, detail=False):
    """A raw run file -> (host record, result records). detail: one record per row of the benchmarks that
    summarise their rows in one record (kernels), as the build comparison wants them."""
    host, command, out, vit_infer, int8_infer, gemm_limit, fma = None, None, [], {}, {}, {}, []

    def rec(kind, bench, case, unit, attn, peer, **kw):
        r = {"kind": kind, "benchmark": bench, "case": case, "host": host["host"], "date": host["date"],
             "time": host["time"], "command": command, "unit": unit, "attn": sig(attn),
             "peers": {} if peer is None or peer != peer else {"PyTorch": sig(peer)}}
        r.update({k: v for k, v in kw.items() if v is not None})
        out.append(r)

    def convert(j, b):
        """One line a program printed -> result records (appended to out)."""
        if b == "fma_peak":
            fma.append(j["gflops_n"])
        elif b == "linear":
            m, k, n = j["shape"]
            gf = 2.0 * m * k * n * 1e-6
            shape = f"{m} × {k} × {n}"
            default = [m, k, n] == [197, 768, 3072]
            for case, ms, frac in [("packed weight (inference's path)", j["attn_packed_ms"],
                                    j["packed_fraction_of_onednn"]),
                                   ("plain weight (training's path)", j["attn_ms"], j["fraction_of_onednn"])]:
                rec("speed", "linear", case if default else f"{shape}, {case}", "GFLOP/s", gf / ms, gf / j["torch_ms"],
                    extra={"fraction_of_onednn": sig(frac, 3)})
        elif b == "linear_train":
            rec("speed", "linear_train", "all products of the shapes run", "ms", j["attn_ms"], j["torch_ms"])
        elif b == "mlp_train":
            rec("speed", "mlp_train", "training step", "ms", j["attn_ms"], j["torch_ms"])
        elif b == "conv":
            rec("speed", "conv", "training step", "ms", j["attn_step_ms"], j["torch_step_ms"])
        elif b == "encoder_block":
            # --precision bf16: both sides under bf16 autocast, and attn's own f32 step of the same run
            bf16 = j.get("precision") == "bf16"
            suffix = ", bf16" if bf16 else ""
            for key, case in [("step", "forward + backward"), ("fwd", "forward (training)"),
                              ("infer", "forward, no grad")]:
                if key in j:
                    note = None
                    need, gemm = j[key]["torch_median_ms"] / 1.5, j.get("step_gemm_ms")
                    if key == "step" and gemm is not None and need < gemm:
                        note = (f"1.5× PyTorch needs a step of at most {need:.1f} ms, less than the {gemm:.1f} ms "
                                f"that the step's GEMMs alone take on oneDNN in the same run: out of reach "
                                f"without a faster GEMM")
                    rec("speed", "encoder_block", case + suffix, "ms", j[key]["attn_median_ms"],
                        j[key]["torch_median_ms"], note=note)
            if j.get("step_overhead") is not None:
                rec("speed", "encoder_block", "forward + backward, over its GEMMs alone" + suffix, "ms",
                    j["step"]["attn_median_ms"], None, ratio=round(j["step_overhead"], 3))
                out[-1]["peers"] = {"its GEMMs alone": sig(j["step_gemm_ms"])}
            if bf16 and j.get("attn_f32_step_median_ms") is not None:
                rec("speed", "encoder_block", "forward + backward, bf16, vs attn f32", "ms",
                    j["step"]["attn_median_ms"], None,
                    ratio=round(j["attn_f32_step_median_ms"] / j["step"]["attn_median_ms"], 2))
                out[-1]["peers"] = {"attn f32": sig(j["attn_f32_step_median_ms"])}
        elif b == "attention":
            mem = j.get("mem4096") or {}
            for key, case in [("fwd197", "forward, T = 197"), ("fwd1024", "forward, T = 1024"),
                              ("fwd4096", "forward, T = 4096"), ("fwdbwd1024", "forward + backward, T = 1024")]:
                if key not in j:
                    continue
                note = None
                if key == "fwd4096" and mem.get("fused_bytes") is not None and mem.get("torch_bytes") is not None:
                    note = (f"peak extra memory of one forward: attn {mem['fused_bytes'] / 2**20:,.2f} MiB, "
                            f"PyTorch {mem['torch_bytes'] / 2**20:,.1f} MiB")
                q = j[key].get("torch_over_fused")
                rec("speed", "attention", case, "ms", j[key]["fused_ms"], j[key]["torch_ms"],
                    ratio=None if q is None else round(q, 2), note=note)
        elif b in ("vit_train", "swin_train", "bert_train") and j.get("precision") == "bf16":
            # --precision bf16: the training step only (inference stays f32), against PyTorch's bf16
            # autocast and against attn's own f32 step of the same run
            case = f"{j['model']}, training step, bf16"
            q = j.get("train_speedup")
            note, gemm = None, j.get("step_gemm_ms")
            if q is not None and gemm is not None and j["torch_ms"] / 1.5 < gemm:
                note = (f"1.5× PyTorch needs a step of at most {j['torch_ms'] / 1.5:.1f} ms, less than the "
                        f"{gemm:.1f} ms that the step's bf16 GEMMs alone take on oneDNN in the same run "
                        f"(attn's step is {j['attn_ms'] / gemm:.2f}× that): out of reach without a faster GEMM")
            rec("speed", b, f"{case}, vs PyTorch bf16 autocast", "ms", j["attn_ms"], j["torch_ms"],
                ratio=None if q is None else round(q, 2), note=note)
            q = j.get("speedup_over_f32")
            rec("speed", b, f"{case}, vs attn f32", "ms", j["attn_ms"], None, ratio=None if q is None else round(q, 2))
            if j.get("attn_f32_ms") is not None:
                out[-1]["peers"] = {"attn f32": sig(j["attn_f32_ms"])}
        elif b == "vit_train":
            model = j["model"]
            rec("speed", "vit_train", f"{model}, training step", "ms", j["attn_ms"], j["torch_ms"],
                ratio=round(j["train_speedup"], 2))
            rec("speed", "vit_train", f"{model}, inference", "ms", j["attn_infer_ms"], j["torch_infer_ms"],
                ratio=round(j["infer_speedup"], 2))
        elif b == "swin_train":
            rec("speed", "swin_train", f"{j['model']}, training step", "ms", j["attn_ms"], j["torch_ms"],
                ratio=round(j["train_speedup"], 2))
        elif b == "bert_finetune":
            rec("speed", "bert_finetune", f"{j['model']}, batch {j['batch']} × {j['seq_len']}, training step", "ms",
                j["attn_ms"], j["torch_ms"], ratio=round(j["speedup"], 2))
        elif b == "bert_train":
            rec("speed", "bert_train", f"{j['model']}, training step", "ms", j["attn_ms"], j["torch_ms"],
                ratio=None if j.get("train_speedup") is None else round(j["train_speedup"], 2))
        elif b == "transformer_decode":
            rec("speed", "transformer_decode", "with a KV cache", "tok/s", j["attn_cached_tok_s"],
                j["torch_cached_tok_s"])
            rec("speed", "transformer_decode", "without a cache", "tok/s", j["attn_uncached_tok_s"],
                j["torch_uncached_tok_s"])
        elif b == "kernels":
            rows = [r for r in j["rows"] if r.get("torch_ms") and r["op"] != "memcpy"]   # memcpy: the yardstick
            if detail:
                for r in rows:
                    rec("speed", "kernels", f"{r['op']} {r['shape']}", "ms", r["attn_ms"], r["torch_ms"])
            elif rows:
                q = [r["torch_ms"] / r["attn_ms"] for r in rows]
                rec("speed", "kernels", "every row", "ms", None, None,
                    ratio=[sig(min(q), 2), sig(max(q), 3)], met=bool(j["met"]))
        elif b == "rnn":
            for mode, label in [("gru", "GRU"), ("lstm", "LSTM")]:
                m = j[mode]
                rec("speed", "rnn", f"{label}, forward + backward", "ms", m["attn_fwdbwd_ms"], m["torch_fwdbwd_ms"])
                rec("speed", "rnn", f"{label}, forward", "ms", m["attn_fwd_ms"], m["torch_fwd_ms"])
        elif b == "translate_train":
            # --precision bf16: both sides' training under bf16 autocast, filed as its own case; with
            # --compare-f32, attn's bf16 against its own f32 on the same batches of the same run
            bf16 = j.get("precision") == "bf16"
            if j.get("sides") == "both":
                rec("speed", "translate_train", "training, bf16" if bf16 else "training", "tok/s",
                    j["attn"]["tokens_per_second"], j["torch"]["tokens_per_second"])
            cmp = j["attn"].get("compare_f32") if bf16 else None
            if cmp:
                rec("speed", "translate_train", "training, bf16, vs attn f32", "tok/s",
                    cmp["bf16_tokens_per_second"], None, ratio=round(cmp["speedup_over_f32"], 2),
                    peers={"attn f32": sig(cmp["f32_tokens_per_second"])})
        elif b == "bert_infer":
            bench = "bert_infer" if j["dtype"] == "f32" else "bert_infer_bf16"
            a = j["attn"]["latency_ms"]["median"]
            base = j["case"] if j["model"] == "bert-base-uncased" else f"{j['model']}, {j['case']}"
            if j["case"].startswith("mixed") and j["model"] == "bert-base-uncased":
                rec("speed", bench, "mixed lengths, vs ONNX Runtime padded to 128", "ms", a, None,
                    peers={"ONNX Runtime": sig(j["ort"]["latency_ms"]["median"])})
                rec("speed", bench, "mixed lengths, vs attn's 8 batch-1 passes", "ms", a, None,
                    peers={"attn, 8 × batch 1": sig(j["attn_batch1_sum_ms"])})
                rec("speed", bench, "mixed lengths, vs PyTorch", "ms", a, j["torch"]["latency_ms"]["median"])
            else:
                rec("speed", bench, f"{base}, vs PyTorch", "ms", a, j["torch"]["latency_ms"]["median"],
                    note=f"PyTorch: {j['torch']['impl']}")
                if j.get("ort"):
                    rec("speed", bench, f"{base}, vs ONNX Runtime", "ms", a, None,
                        peers={"ONNX Runtime": sig(j["ort"]["latency_ms"]["median"])})
                if j["dtype"] == "f32" and base.startswith("batch 1"):
                    w = j["attn"]["weights_mb"]
                    rec("memory", "bert_memory", "f32 " + base, "MB", j["attn"]["peak_rss_steady_mb"], None,
                        extra={"limit_mb": round(1.3 * w + 100)})
        elif b == "mixed_precision":
            # bench/mixed_precision.sh: per task, bf16 mixed precision against f32 on the same runs' metric
            case = {"vit": "Fashion-MNIST ViT, test accuracy", "translate": "Bible Transformer, test BLEU (greedy)",
                    "bert": "bert-mini pre-training, validation masked-LM accuracy"}[j["task"]]
            unit = "BLEU" if j["task"] == "translate" else "%"
            runs = ", ".join(f"{a:.2f} / {b:.2f}" for a, b in zip(j["f32"], j["bf16"]))
            rec("accuracy", "mixed_precision", case, unit, round(j["bf16_mean"], 2), None,
                peers={"attn f32": round(j["f32_mean"], 2)},
                note=f"seeds {', '.join(str(s) for s in j['seeds'])}: f32 / bf16 {runs}; mean seconds f32 "
                     f"{sum(j['f32_seconds']) / len(j['f32_seconds']):,.0f}, bf16 "
                     f"{sum(j['bf16_seconds']) / len(j['bf16_seconds']):,.0f}")
        elif b == "bert_pretraining_effect":
            for data, key, case in [("wordnet-lexname", "test_accuracy", "lexicographer file (45 classes), accuracy"),
                                    ("wordnet-lexname", "test_macro_f1", "lexicographer file (45 classes), macro-F1"),
                                    ("wordnet-pairs", "test_accuracy", "gloss–lemma pairs, accuracy"),
                                    ("wordnet-supersense", "test_span_f1", "supersense tagging, span F1")]:
                t = j["tasks"][data]
                rec("accuracy", "bert_pretraining_effect", case, "%", 100 * t[key]["pretrained"], None,
                    peers={"from scratch": sig(100 * t[key]["scratch"])},
                    note=f"{j['model']}, {t['steps'][0]:,} steps each; pre-trained: {j.get('pretraining', j['init'])}")
        elif b == "allreduce":
            where = "TCP on the loopback" if "tcp" in j["transport"] else "shared memory"
            rec("speed", "allreduce", f"ViT-B/16's gradients, {j['ranks']} ranks, {where}", "ms", j["attn_ms"], None,
                peers={"bare MPI_Allreduce": sig(j["bare_ms"])},
                note=f"{j['buckets']} buckets; bus bandwidth {j['bus_gbps_bare']:.2f} GB/s bare, "
                     f"{j['bus_gbps_attn']:.2f} GB/s attn; {j['transport']}")
        elif b == "mpi_train":
            unit = "img/s" if j["unit"] == "images_per_second" else "tok/s"
            for key, where in [("shm", "shared memory"), ("tcp", "TCP on the loopback")]:
                hidden = j.get(f"hidden_{key}")
                rec("speed", "mpi_train", f"{j['model']}, {where}", unit, j[f"two_ranks_{key}"], None,
                    peers={"1 process × 2 threads": sig(j["one_process"])},
                    note=f"{j['steps']} steps; rank 0 waited {100 * j.get(f'wait_fraction_{key}', 0):.1f}% of the step "
                         f"after its backward, communication not hidden {100 * j[f'exposed_fraction_{key}']:.1f}%"
                         + ("" if hidden is None else f"; {100 * hidden:.0f}% of a blocking all-reduce hidden"))
        elif b == "swin_infer":
            swin_records(j, rec)
        elif b == "int8_infer":
            int8_infer.setdefault((command, j["model"], j["batch"], j.get("seq_len"), j["threads"]), []).append(j)
        elif b == "gemm_limit":
            gemm_limit.setdefault((command, j["model"], j["batch"], j.get("seq_len"), j["threads"]), []).append(j)
        elif "model" in j and "policy" in j and "attn" in j and "torch" in j:   # bench/vit_infer.sh
            key = (command, j["model"], j["batch"], j["attn"].get("dtype", "f32"))
            vit_infer.setdefault(key, []).append(j)
        # other lines (a bench without a JSON summary, or one this script does not know) are skipped

    for where, j in read_lines(path):
        if j.get("kind") == "host":
            host = j
            continue
        if j.get("kind") == "command":
            command = j["command"]
            continue
        b = j.get("bench")
        if host is None or (command is None and b != "fma_peak"):
            raise RecordError(f"{where}: expected a host record and a command record before the benchmark lines "
                              f"(bench/run_all.sh writes them), found {json.dumps(j)[:80]}")
        try:
            convert(j, b)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            raise RecordError(f"{where}: expected a complete {b or 'vit_infer.sh'} summary line "
                              f"({type(e).__name__}: {e}), found {json.dumps(j)[:80]}...") from None
    for (cmd, *_), runs in int8_infer.items():
        command = cmd
        int8_records(runs, rec)
    for (cmd, *_), runs in gemm_limit.items():
        command = cmd
        gemm_limit_records(runs, rec)
    for (cmd, model, batch, dtype), runs in vit_infer.items():
        command = cmd
        a = min(runs, key=lambda r: r["attn"]["latency_ms"]["median"])
        t = min(runs, key=lambda r: r["torch"]["latency_ms"]["median"])
        case = f"{MODEL_LABEL.get(model, model)}, batch {batch}"
        rec("speed", "vit_infer" if dtype == "f32" else "vit_infer_bf16", case, "ms",
            a["attn"]["latency_ms"]["median"], t["torch"]["latency_ms"]["median"])
        w = a["attn"]["weights_mb"]
        rec("memory", "vit_memory", f"{dtype} {case}", "MB", a["attn"]["peak_rss_steady_mb"], None,
            extra={"limit_mb": round(1.3 * w + 100)})
    if host is None:
        raise RecordError(f"{path}: no host record (bench/run_all.sh writes one first)")
    host = dict(host)
    if fma:
        host["fma_gflops"] = sig(fma[0]) if len(fma) == 1 else [sig(min(fma)), sig(max(fma))]
    return host, out


# ---- the page --------------------------------------------------------------------------------------------

INTRO = """\
# Measured results

Generated by `python3 bench/results_table.py` from the records in `bench/results/*.jsonl`; do not edit by
hand. `bash bench/run_all.sh BUILD_DIR` measures the speed benchmarks on the machine it runs on, writes
their records to `bench/results/<date>-<host>.jsonl` and regenerates this page.

Every speed figure is attn's and its peer's from the same run: same host, same thread count (2), PyTorch
1.13.1 (Debian's build) on OpenBLAS. Peers run with `OMP_WAIT_POLICY=PASSIVE` and without; the better
counts. **Ratio** is how many times faster attn is (peer time / attn time, or attn's rate / the peer's). A
figure written low–high is the range over several runs; its lowest value decides met / not met. Each
table shows the latest measurement of each case on each host. The targets were set for an Intel CPU with
AMX; none of the hosts below has AMX, and on some of them a target needs more than the CPU's GEMM
ceiling (the notes say where). Correctness against PyTorch is checked by the tests (`bash
scripts/test.sh`), not here.

Reproduce: `bash bench/run_all.sh build/test` runs the speed benchmarks with the commands shown in the
tables (linear_train and folder_eval are run by hand), bracketed by FMA-ceiling probes (`bench/fma_peak_bench`:
a 2-thread figure well under twice the 1-thread one means the run did not get both cores). The accuracy
runs take hours: `bash bench/fmnist_accuracy.sh build/test budget|peer|teacher|distill|same-budget` and `bash
bench/translate.sh build/test hour|rnn-hour`. Use a quiet machine: on a shared one 2-thread OpenMP
regions wait for cores and ratios move by 2×.

Comparing two builds (before and after a change): `bash bench/compare_builds.sh BUILD_A BUILD_B --rounds
3` runs the same benchmarks with fewer repetitions on both builds, alternated round by round, and prints
each case's median ratio per build and the change.
"""


def esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def when(r):
    return r["date"] + (f" {r['time']}" if r.get("time") else "")


def state(rec, target):
    if "met" in rec:
        ok = rec["met"]
    elif target.check is None:
        return "—"
    else:
        ok = target.check(rec)
    return "?" if ok is None else ("met" if ok else "**not met**")


def latest(results):
    best = {}
    for r in results:
        k = (r["benchmark"], r["case"], r["host"])
        if k not in best or (best[k]["date"], best[k].get("time", ""), best[k]["_order"]) <= \
                (r["date"], r.get("time", ""), r["_order"]):
            best[k] = r
    return best


def render(hosts, results, sources):
    # Hosts newest first (by their host record), and so the rows of each case.
    host_order = sorted(hosts, key=lambda h: (hosts[h]["date"], hosts[h].get("time", ""), h), reverse=True)
    hrank = {h: i for i, h in enumerate(host_order)}
    best = latest(results)
    lines = [INTRO, "Records read: " + ", ".join(f"`{s}`" for s in sources) + ".", "", "## Hosts", "",
             "| host | CPU | SIMD and matrix units | vCPUs | FMA probe, 2 threads (GFLOP/s) | notes |",
             "|---|---|---|---|---|---|"]
    for h in host_order:
        x = hosts[h]
        fma = fmt_fig(x.get("fma_gflops")) if x.get("fma_gflops") is not None else "—"
        if x.get("gemm_gflops"):
            fma += f"; {x['gemm_gflops']}"
        lines.append(f"| {h} | {esc(x['cpu'])} | {esc(x['flags'])} | {x.get('vcpus', '—')} | {esc(fma)} | "
                     f"{esc(x.get('note', ''))} |")
    lines.append("")
    sections = [("speed", "Speed"), ("memory", "Memory"), ("accuracy", "Accuracy and quality")]
    for kind, heading in sections:
        benches = [b for b in BENCHMARKS if b.kind == kind and any(k[0] == b.key for k in best)]
        if not benches:
            continue
        lines += [f"## {heading}", ""]
        for b in benches:
            rows = [r for k, r in best.items() if k[0] == b.key]
            case_rank = {c: i for i, c in enumerate(b.cases)}
            rows.sort(key=lambda r: (case_rank.get(r["case"], len(case_rank)), r["case"], hrank[r["host"]]))
            peer_names = []
            for r in rows:
                for p in r.get("peers") or {}:
                    if p not in peer_names:
                        peer_names.append(p)
            lines += [f"### {b.title}", "", b.about, ""]
            targets = {b.cases[c].text for c in b.cases if b.cases[c] is not NO_TARGET}
            if kind == "memory" and targets:
                lines += ["Target: " + "; ".join(sorted(targets)) + ".", ""]
            if kind == "speed":
                cols = ["case", "host", "date", "attn"] + peer_names + ["ratio", "target", "state", "command"]
            elif kind == "memory":
                cols = ["case", "host", "date", "attn", "limit", "state", "command"]
            else:
                cols = ["case", "host", "date", "attn"] + peer_names + (["difference"] if peer_names else []) + \
                       ["target", "state", "command"]
            lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            notes = []
            for r in rows:
                target = b.cases.get(r["case"], NO_TARGET)
                case = esc(r["case"])
                if r.get("note"):
                    notes.append(r["note"])
                    case += f" [{len(notes)}]"
                unit = r["unit"]
                attn = fmt_fig(r["attn"], unit)
                extra = r.get("extra") or {}
                if kind == "accuracy" and "seconds" in extra:
                    attn += f" in {fmt_num(extra['seconds'])} s"
                peers = r.get("peers") or {}
                cells = [case, r["host"], esc(when(r)), esc(attn)]
                if kind == "speed":
                    cells += [esc(fmt_fig(peers.get(p), unit)) for p in peer_names]
                    cells += [fmt_ratio(ratio_of(r)), esc(target.text), state(r, target)]
                elif kind == "memory":
                    lim = extra.get("limit_mb")
                    cells += ["—" if lim is None else f"{fmt_num(lim)} MB", state(r, target)]
                else:
                    cells += [esc(fmt_fig(peers.get(p), unit)) for p in peer_names]
                    if peer_names:
                        p = peers.get(peer_names[0])
                        cells.append("—" if not is_num(p) or not is_num(r["attn"])
                                     else f"{r['attn'] - p:+.2f}".replace("-", "−"))
                    cells += [esc(target.text), state(r, target)]
                cells.append(f"`{esc(r['command'])}`")
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
            for i, n in enumerate(notes, 1):
                lines.append(f"[{i}] {n}  ")
            if notes:
                lines[-1] = lines[-1].rstrip()
                lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_page(paths, out):
    hosts, results = read_records(paths)
    sources = [os.path.relpath(p, ROOT) for p in paths]
    text = render(hosts, results, sources)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(out, ROOT)} from {len(results)} records of {len(paths)} file(s)")


def compare(groups):
    """Markdown table comparing builds: groups is [(label, [raw run files, one a round])]. For each
    (benchmark, case): each build's median ratio over its rounds (with the range) and its median attn figure,
    then each later build's change against the first."""
    def median(v):
        v = sorted(v)
        n = len(v)
        return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

    per = []          # per group: {(bench, case): {"ratio": [...], "attn": [...], "unit": u}}
    order = []
    for _, paths in groups:
        d = {}
        for path in paths:
            _, recs = normalise(path, detail=True)
            for r in recs:
                if r["kind"] != "speed":
                    continue
                k = (r["benchmark"], r["case"])
                if k not in order:
                    order.append(k)
                e = d.setdefault(k, {"ratio": [], "attn": [], "unit": r["unit"]})
                q = ratio_of(r)
                if is_num(q):
                    e["ratio"].append(float(q))
                if is_num(r.get("attn")):
                    e["attn"].append(float(r["attn"]))
        per.append(d)
    base = groups[0][0]
    cols = ["benchmark", "case"]
    for label, paths in groups:
        cols += [f"ratio, {label} ({len(paths)} rounds)", f"attn, {label}"]
    for label, _ in groups[1:]:
        cols += [f"ratio change, {label} vs {base}", f"attn change, {label} vs {base}"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    worst = 0.0
    for k in order:
        cells = [k[0], esc(k[1])]
        meds = []
        for d in per:
            e = d.get(k)
            if not e:
                cells += ["—", "—"]
                meds.append((None, None, None))
                continue
            rq = median(e["ratio"]) if e["ratio"] else None
            am = median(e["attn"]) if e["attn"] else None
            cells.append("—" if rq is None else f"{rq:.2f}× ({min(e['ratio']):.2f}–{max(e['ratio']):.2f})")
            cells.append("—" if am is None else f"{sig(am)} {e['unit']}")
            meds.append((rq, am, (min(e["ratio"]), max(e["ratio"])) if e["ratio"] else None,
                         (min(e["attn"]), max(e["attn"])) if e["attn"] else None))
        unit = next((d[k]["unit"] for d in per if k in d), "ms")
        def apart(x, y):
            return " (ranges overlap)" if x[0] <= y[1] and y[0] <= x[1] else " (ranges apart)"

        for rq, am, rng, arng in meds[1:]:
            r0, a0, rng0, arng0 = meds[0]
            if rq is not None and r0:
                ch = rq / r0 - 1
                worst = max(worst, abs(ch))
                # Beyond 5%: do the two builds' ranges of ratios over the rounds overlap (run-to-run noise)?
                cells.append(f"{ch * 100:+.1f}%{'' if abs(ch) <= 0.05 else apart(rng, rng0)}")
            else:
                cells.append("—")
            if am is not None and a0:
                # attn's own figure: + means attn got faster
                ch = (a0 / am - 1) if unit in LOWER_IS_BETTER else (am / a0 - 1)
                cells.append(f"{ch * 100:+.1f}% {'faster' if ch >= 0 else 'slower'}"
                             f"{'' if abs(ch) <= 0.05 else apart(arng, arng0)}")
            else:
                cells.append("—")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Largest ratio change: {worst * 100:.1f}%. Beyond 5%, \"ranges overlap\" says that the two builds' "
              "ranges over the rounds overlap (the change is within run-to-run spread)."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="record files (default: bench/results/*.jsonl)")
    ap.add_argument("--out", default=PAGE, help="the page to write (default: docs/results.md)")
    ap.add_argument("--add", metavar="RUN.jsonl", help="a bench/run_all.sh run to normalise into --results-dir")
    ap.add_argument("--results-dir", default=RESULTS_DIR, help="where --add writes (default: bench/results)")
    ap.add_argument("--host-record", action="store_true", help="print this machine's host record and exit")
    ap.add_argument("--compare", nargs="+", action="append", metavar=("LABEL", "RUN.jsonl"),
                    help="a build's raw run files, one per round, after its label; give it once per build "
                         "(the first is the baseline): prints a comparison table instead of writing the page")
    a = ap.parse_args()
    try:
        if a.host_record:
            print(json.dumps(host_record(), ensure_ascii=False))
            return 0
        if a.compare:
            if any(len(g) < 2 for g in a.compare) or len(a.compare) < 2:
                raise RecordError("--compare expects LABEL RUN.jsonl... at least twice (one per build)")
            print(compare([(g[0], g[1:]) for g in a.compare]))
            return 0
        if a.add:
            host, recs = normalise(a.add)
            os.makedirs(a.results_dir, exist_ok=True)
            dest = os.path.join(a.results_dir, f"{host['date']}-{host['host']}.jsonl")
            # A day's file collects that day's runs on the host: records of other (benchmark, case)s
            # already there stay; a case measured again is replaced.
            kept = []
            if os.path.exists(dest):
                new_keys = {(r["benchmark"], r["case"]) for r in recs}
                with open(dest, encoding="utf-8") as f:
                    old = [json.loads(line) for line in f if line.strip()]
                kept = [r for r in old if r.get("kind") != "host" and (r["benchmark"], r["case"]) not in new_keys]
            with open(dest, "w", encoding="utf-8") as f:
                for r in [host] + kept + recs:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            print(f"wrote {len(recs)} records to {os.path.relpath(dest, ROOT)} ({len(kept)} of earlier runs kept)")
        paths = a.files or sorted(glob.glob(os.path.join(a.results_dir, "*.jsonl")))
        if not paths:
            raise RecordError(f"no record files given and none in {a.results_dir}")
        write_page(paths, a.out)
        return 0
    except (RecordError, OSError, KeyError, TypeError, ValueError) as e:
        kind = "" if isinstance(e, (RecordError, OSError)) else f"{type(e).__name__}: "
        print(f"results_table.py: {kind}{e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
