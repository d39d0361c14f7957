# Shell helpers of the benchmarks that run attn and its peers side by side (bench/int8_infer.sh,
# bench/gemm_limit.sh), sourced. The caller sets `script` (its name, for messages) and, before it calls
# json_ok or both_policies, `log` (where the sides' stderr goes).

# count OPTION VALUE: VALUE, a positive integer, or the script stops.
count() {
  [[ ${2-} =~ ^[1-9][0-9]*$ ]] || { echo "$script: $1 expects a positive integer, got '${2-}'" >&2; exit 2; }
  echo "$2"
}

# json_ok NAME TEXT: TEXT is one JSON object with a latency median, or the script stops naming NAME.
json_ok() {
  /usr/bin/python3 -c 'import json, sys
try:
    j = json.loads(sys.argv[2]); j["latency_ms"]["median"]
except Exception:
    sys.exit(f"{sys.argv[4]}: {sys.argv[1]} printed no result line (got {sys.argv[2][:200]!r}); see {sys.argv[3]}")' \
    "$1" "$2" "$log" "$script"
}

# both_policies NAME CMD...: CMD's last output line under OMP_WAIT_POLICY=PASSIVE and under the default (an
# attn command run as it is: ATTN_NO_REEXEC=1), the faster, with the policy that won as "policy".
both_policies() {
  local name=$1 best="" j p
  shift
  for p in PASSIVE default; do
    if [[ $p = PASSIVE ]]; then j=$(env OMP_WAIT_POLICY=PASSIVE ATTN_NO_REEXEC=1 "$@" 2>>"$log" | tail -1) || true
    else j=$(env -u OMP_WAIT_POLICY ATTN_NO_REEXEC=1 "$@" 2>>"$log" | tail -1) || true; fi
    json_ok "$name" "$j"
    best=$(/usr/bin/python3 -c 'import json, sys
a, b = json.loads(sys.argv[1]) if sys.argv[1] else None, json.loads(sys.argv[2])
b["policy"] = sys.argv[3]
print(json.dumps(b if a is None or b["latency_ms"]["median"] < a["latency_ms"]["median"] else a))' "$best" "$j" "$p")
  done
  echo "$best"
}
