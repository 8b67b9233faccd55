#!/usr/bin/env bash
# Runs Oscar's W1-W4 (docs/BENCHMARKS.md) RUNS times each, fresh
# processes every time, and prints the median of every figure as
# `oscar metric value unit`, like the peers' run.sh. Extra arguments go to
# `oscar bench` (for example --spin 0). AWAKE=1 keeps the vCPUs from halting
# with one nice-19 busy loop during each run, as the peers' AWAKE=1 does.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
WORKLOADS=${WORKLOADS:-"w1 w2 w3 w4"}
AWAKE=${AWAKE:-0}
swift build -c release >&2
raw=$(mktemp)
trap 'rm -f "$raw"; [ -n "${SPIN_PID:-}" ] && kill "$SPIN_PID" 2>/dev/null || true' EXIT
for run in $(seq 1 "$RUNS"); do
  for w in $WORKLOADS; do
    echo "[run.sh] run $run $w" >&2
    SPIN_PID=""
    if [ "$AWAKE" = 1 ]; then
      nice -n 19 bash -c 'while (( SECONDS < 240 )); do :; done' &
      SPIN_PID=$!
    fi
    timeout -k 5 240 .build/release/oscar bench "$w" "$@" >> "$raw"
    if [ -n "$SPIN_PID" ]; then kill "$SPIN_PID" 2>/dev/null || true; wait "$SPIN_PID" 2>/dev/null || true; fi
  done
done
awk '{ k=$2; if (!(k in n)) { order[++K]=k; unit[k]=$4 } n[k]++; v[k, n[k]]=$3 }
  END {
    for (i=1; i<=K; i++) {
      k=order[i]; m=n[k]
      for (a=2; a<=m; a++) { x=v[k,a]; b=a-1; while (b>=1 && v[k,b]+0 > x+0) { v[k,b+1]=v[k,b]; b-- } v[k,b+1]=x }
      med = (m % 2) ? v[k,(m+1)/2] : (v[k,m/2]+v[k,m/2+1])/2
      all=""; for (a=1; a<=m; a++) all=all " " v[k,a]
      printf "oscar %s %s %s   (runs:%s)\n", k, med, unit[k], all
    }
  }' "$raw"
