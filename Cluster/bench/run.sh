#!/usr/bin/env bash
# Runs Oscar's W1-W4 (docs/BENCHMARKS.md) RUNS times each, fresh
# processes every time, and prints the median of every figure as
# `oscar metric value unit`, like the peers' run.sh. Extra arguments go to
# `oscar bench` (for example --spin 0). AWAKE=1 keeps the vCPUs from halting
# with one nice-19 busy loop during each run, as the peers' AWAKE=1 does.
#
# Like the peers' driver, it waits for a quiet machine before each
# measurement: when other processes keep at least QUIET_PCT % of all cores
# busy (default 15), it samples again every 2 s for up to QUIET_WAIT seconds
# (default 180), then measures anyway. The load it saw last is recorded as
# `oscar <workload>_background_busy <percent> %`, and the worst of them as
# `oscar background_busy_max`.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
WORKLOADS=${WORKLOADS:-"w1 w2 w3 w4"}
AWAKE=${AWAKE:-0}
QUIET_PCT=${QUIET_PCT:-15}
QUIET_WAIT=${QUIET_WAIT:-180}

# The share of all cores that was busy over half a second, in percent, from
# two samples of /proc/stat's first line (busy = user, nice, system, irq,
# softirq, steal; the total adds idle and iowait).
busy_percent() {
  local first second
  first=$(awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat)
  sleep 0.5
  second=$(awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat)
  echo "$first $second" | awk '{ total = $4 - $2; print (total > 0) ? int(100 * ($3 - $1) / total + 0.5) : 0 }'
}

# Waits (bounded) until the machine is quiet and records the load it saw.
wait_for_quiet() {
  local workload=$1 waited=0 busy
  busy=$(busy_percent)
  while [ "$busy" -ge "$QUIET_PCT" ] && [ "$waited" -lt "$QUIET_WAIT" ]; do
    [ "$waited" -eq 0 ] && echo "[run.sh] busy: ${busy}% of all cores in use; waiting up to ${QUIET_WAIT} s" >&2
    sleep 2
    waited=$((waited + 2))
    busy=$(busy_percent)
  done
  [ "$busy" -ge "$QUIET_PCT" ] && echo "[run.sh] still ${busy}% busy after ${QUIET_WAIT} s; measuring anyway" >&2
  echo "oscar ${workload}_background_busy $busy %" >> "$raw"
}
swift build -c release >&2
raw=$(mktemp)
trap 'rm -f "$raw"; [ -n "${SPIN_PID:-}" ] && kill "$SPIN_PID" 2>/dev/null || true' EXIT
for run in $(seq 1 "$RUNS"); do
  for w in $WORKLOADS; do
    echo "[run.sh] run $run $w" >&2
    wait_for_quiet "$w"
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
awk '$2 ~ /_background_busy$/ && $3 + 0 > worst { worst = $3 + 0 }
  END { printf "oscar background_busy_max %d %%\n", worst }' "$raw"
