"""bench/gemm_limit.sh's lines (one per case and round) summarised per case: the median of the rounds' medians
and their spread for each side, attn's overhead over its own GEMMs (model time / gemm_time_ms, the median over
the rounds), and the ratios to the peers. results_table.py turns the same summary into records.

    python3 bench/gemm_limit_table.py GEMM_LIMIT_JSONL [THREADS]     # prints the table
"""
import json
import sys

from results_targets import GEMM_OVERHEAD_TARGETS, gemm_limit_case

# (side, its name in tables and records)
SIDES = [("attn_f32", "attn f32"), ("attn_bf16", "attn bf16"), ("ort", "ONNX Runtime f32"),
         ("torch_bf16", "PyTorch bf16")]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summarize(rows):
    """{(model, batch): {"case", "rounds", "sides": {side: (median, min, max) of latency ms},
    "overhead": {"f32"|"bf16": (median, min, max)}, "gemm_ms": {...}, "target": x, "peer_impl": {...}}}."""
    out = {}
    for r in rows:
        k = (r["model"], r["batch"])
        e = out.setdefault(k, {"case": gemm_limit_case(r["model"], r["batch"]), "rounds": 0,
                               "ms": {}, "over": {}, "gemm": {}, "target": GEMM_OVERHEAD_TARGETS[r["model"]],
                               "peer_impl": {}})
        e["rounds"] += 1
        for side, _ in SIDES:
            j = r.get(side)
            if not j:
                continue
            e["ms"].setdefault(side, []).append(j["latency_ms"]["median"])
            if side.startswith("attn_") and j.get("gemm_time_ms"):
                d = side[5:]
                e["over"].setdefault(d, []).append(j["overhead_vs_gemm"])
                e["gemm"].setdefault(d, []).append(j["gemm_time_ms"])
            if side == "torch_bf16":
                e["peer_impl"][side] = f"{j.get('impl', 'eager')}, OMP_WAIT_POLICY {j.get('policy', '?')}"
    stat = lambda v: (median(v), min(v), max(v))
    for e in out.values():
        e["sides"] = {s: stat(v) for s, v in e.pop("ms").items()}
        e["overhead"] = {d: stat(v) for d, v in e.pop("over").items()}
        e["gemm_ms"] = {d: stat(v) for d, v in e.pop("gemm").items()}
    return out


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]
    threads = sys.argv[2] if len(sys.argv) > 2 else rows[0]["threads"]
    summary = summarize(rows)
    rounds = max(r["round"] for r in rows)
    print(f"\nInference at the GEMM limit, {threads} threads, {rounds} round(s): median of the rounds' medians, ms "
          f"(min-max over rounds)")
    if rounds < 5:
        print("fewer than 5 rounds: a plumbing check, not a reading of the targets")
    present = [(s, n) for s, n in SIDES if any(s in e["sides"] for e in summary.values())]
    print(f"{'case':32}" + "".join(f" {n:>24}" for _, n in present))
    for e in summary.values():
        print(f"{e['case']:32}" + "".join(
            f" {f'{m:.2f} ({lo:.2f}-{hi:.2f})':>24}" if s in e["sides"] else f" {'-':>24}"
            for (s, _), (m, lo, hi) in ((p, e["sides"].get(p[0], (0, 0, 0))) for p in present)))
    st = lambda ok: "met" if ok else "NOT met"
    print(f"\n{'case':32} {'dtype':>5} {'GEMMs ms':>9} {'overhead':>9} {'(target)':>9} {'state':>8} "
          f"{'peer':>17} {'peer/attn':>10} {'(target)':>9} {'state':>8}")
    for e in summary.values():
        for d, peer, want in (("f32", "ort", 1.3), ("bf16", "torch_bf16", 1.5)):
            if f"attn_{d}" not in e["sides"]:
                print(f"{e['case']:32} {d:>5} not measurable here (no native bf16 matmul)")
                continue
            o = e["overhead"][d][0]
            q = e["sides"][peer][0] / e["sides"][f"attn_{d}"][0]
            print(f"{e['case']:32} {d:>5} {e['gemm_ms'][d][0]:9.2f} {o:9.3f} {'<= ' + str(e['target']):>9} "
                  f"{st(o <= e['target']):>8} {dict(SIDES)[peer]:>17} {q:9.2f}x {'>= ' + str(want) + 'x':>9} "
                  f"{st(q >= want):>8}")
    for e in summary.values():
        if e["peer_impl"]:
            print(f"  {e['case']}: PyTorch bf16 ran {e['peer_impl']['torch_bf16']}")


if __name__ == "__main__":
    main()
