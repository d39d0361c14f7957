#!/usr/bin/env bash
# Data-parallel training speed on one machine: 2 ranks x 1 thread (mpirun, --bind-to none) against
# 1 process x 2 threads, same combined batch, for the Fashion-MNIST ViT (vit_fmnist, batch 2 x 64) and
# the translation Transformer (bible-en-es, 2 x 2,048 target tokens), plus the all-reduce itself
# (bench/allreduce_bench: attn's bucketed all-reduce of ViT-B/16's gradients against a bare
# MPI_Allreduce of the same bytes; target >= 90%), over shared memory and over TCP on the loopback.
#
#   bash bench/mpi_train.sh BUILD_DIR [--steps N]
#
# For each model: items per second of each run (metrics.json); the share of the step rank 0 waited
# after its backward (comm_wait_fraction: the communication left plus waiting for the slower rank);
# the communication not hidden behind the backward (comm_exposed_fraction: per step, the wait of the
# rank whose backward ended last); and how much of the all-reduce was hidden: 1 - exposed / (a
# blocking all-reduce of the model's gradient bytes, measured here with allreduce_bench --model). Writes JSON lines to
# $WORK/mpi_train.jsonl (WORK defaults to a temp dir) and prints a table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bash bench/mpi_train.sh BUILD_DIR [--steps N]}
shift
steps=60
while [[ $# -gt 0 ]]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    *) echo "mpi_train.sh: unknown argument '$1' (expected --steps N)" >&2; exit 2 ;;
  esac
done
[[ "$build" = /* ]] || build="$root/$build"
attn=$build/attn
bench=$build/bench/allreduce_bench
[[ -x $attn && -x $bench ]] || { echo "mpi_train.sh: expected $attn and $bench (an MPI build)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "mpi_train.sh: mpirun not found (Debian: openmpi-bin)" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
out=$work/mpi_train.jsonl
: >"$out"
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none)
tcp=(--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
export OMP_WAIT_POLICY=PASSIVE

echo "== all-reduce of ViT-B/16's gradients (86.6 M floats)"
"${mpi[@]}" "$bench" --json "$work/allreduce.jsonl"
"${mpi[@]}" "${tcp[@]}" "$bench" --json "$work/allreduce.jsonl"

run_pair() {   # name, items key, one-process args, per-rank args, common args...
  local name=$1 key=$2 one=$3 per=$4
  shift 4
  rm -rf "$work/$name-1p" "$work/$name-2r" "$work/$name-2r-tcp"
  echo "== $name: 1 process x 2 threads"
  "$attn" train "$@" $one --threads 2 --out "$work/$name-1p" 2>"$work/$name-1p.log"
  echo "== $name: 2 ranks x 1 thread (shared memory)"
  "${mpi[@]}" "$attn" train "$@" $per --threads 1 --out "$work/$name-2r" 2>"$work/$name-2r.log"
  echo "== $name: 2 ranks x 1 thread (TCP, loopback)"
  "${mpi[@]}" "${tcp[@]}" "$attn" train "$@" $per --threads 1 --out "$work/$name-2r-tcp" 2>"$work/$name-2r-tcp.log"
  python3 - "$work" "$name" "$key" "$out" <<'PY'
import json, sys
work, name, key, out = sys.argv[1:]
def m(d): return json.load(open(f"{work}/{d}/metrics.json"))
one, shm, tcp = m(f"{name}-1p"), m(f"{name}-2r"), m(f"{name}-2r-tcp")
rec = {"bench": "mpi_train", "model": name, "unit": key, "steps": one["steps"],
       "one_process": one[key], "two_ranks_shm": shm[key], "two_ranks_tcp": tcp[key],
       "exposed_fraction_shm": shm["comm_exposed_fraction"], "exposed_fraction_tcp": tcp["comm_exposed_fraction"],
       "exposed_seconds_per_step_shm": shm["comm_exposed_seconds"] / shm["steps"],
       "exposed_seconds_per_step_tcp": tcp["comm_exposed_seconds"] / tcp["steps"],
       "wait_fraction_shm": shm["comm_wait_fraction"], "wait_fraction_tcp": tcp["comm_wait_fraction"],
       "gradient_floats": None, "transport_shm": shm["transport"], "transport_tcp": tcp["transport"]}
open(out, "a").write(json.dumps(rec) + "\n")
PY
}

run_pair vit_fmnist images_per_second "--batch 128" "--batch 64" \
  --model vit_fmnist --max-steps "$steps" --eval-every 100000 --limit-eval 256 --seed 0
run_pair transformer tokens_per_second "--max-tokens 4096" "--max-tokens 2048" \
  --model transformer --data bible-en-es --max-steps "$steps" --eval-every 100000 --eval-sentences 0 \
  --beam 1 --limit-test 8 --seed 0

# The blocking all-reduce of each model's gradients, for the hidden fraction.
for model in vit_fmnist transformer; do
  "${mpi[@]}" "$bench" --model "$model" --reps 9 --json "$work/allreduce_$model.jsonl" >/dev/null 2>&1 || true
  "${mpi[@]}" "${tcp[@]}" "$bench" --model "$model" --reps 9 --json "$work/allreduce_$model.jsonl" >/dev/null 2>&1 || true
done

python3 - "$work" "$out" <<'PY'
import json, os, sys
work, out = sys.argv[1:]
def lines(p): return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
recs = lines(out)
ar = lines(f"{work}/allreduce.jsonl")
print("\nall-reduce of ViT-B/16's gradients, 2 ranks")
for a in ar:
    print(f"  {a['transport']}: bare {a['bare_ms']:.1f} ms, attn {a['attn_ms']:.1f} ms ({a['buckets']} buckets) "
          f"= {100 * a['speed_ratio']:.0f}% of the bare call (target >= 90%: {'met' if a['speed_ratio'] >= 0.9 else 'not met'})")
print("\nmodel        unit                 1p x 2t   2r x 1t shm (x)   2r x 1t tcp (x)   wait shm / tcp   exposed shm / tcp   hidden shm / tcp")
final = []
for r in recs:
    blk = {a["transport"]: a["bare_ms"] / 1e3 for a in lines(f"{work}/allreduce_{r['model']}.jsonl")}
    full_shm = next((v for k, v in blk.items() if "tcp" not in k), None)
    full_tcp = next((v for k, v in blk.items() if "tcp" in k), None)
    def hidden(exp, full): return None if not full else max(0.0, 1 - exp / full)
    r["blocking_allreduce_s_shm"], r["blocking_allreduce_s_tcp"] = full_shm, full_tcp
    r["hidden_shm"] = hidden(r["exposed_seconds_per_step_shm"], full_shm)
    r["hidden_tcp"] = hidden(r["exposed_seconds_per_step_tcp"], full_tcp)
    f = lambda x: "-" if x is None else f"{100 * x:.0f}%"
    print(f"{r['model']:<12} {r['unit']:<20} {r['one_process']:8.1f}   {r['two_ranks_shm']:8.1f} ({r['two_ranks_shm'] / r['one_process']:.2f})"
          f"   {r['two_ranks_tcp']:8.1f} ({r['two_ranks_tcp'] / r['one_process']:.2f})"
          f"   {f(r['wait_fraction_shm'])} / {f(r['wait_fraction_tcp'])}      {f(r['exposed_fraction_shm'])} / {f(r['exposed_fraction_tcp'])}"
          f"        {f(r['hidden_shm'])} / {f(r['hidden_tcp'])}")
    final.append(r)
with open(out, "w") as fh:
    for r in final: fh.write(json.dumps(r) + "\n")
    for a in ar: fh.write(json.dumps(a) + "\n")
print(f"\nJSON lines: {out}")
PY
