#!/usr/bin/env bash
# Two `oscar` binaries, W1-W4 alternating run by run in one sitting (the
# order swapped every run), medians and the change from BEFORE to AFTER.
#
#   Cluster/bench/bench-ab.sh BEFORE_BIN AFTER_BIN     # RUNS=15 (default)
#   WORKLOADS="w1 w2 w3 w4" (default)
#
# The remote workloads run node B as its own `oscar bench serve`, pinned to
# CPU 1, and node A pinned to CPU 0. Unpinned, W1 on this 2-vCPU VM is
# bimodal for every build (1.0-1.2 M or 1.4-1.8 M msg/s, the same work at a
# third more CPU time in the slow mode, spread over every function), and how
# many runs land in the slow mode moved from sitting to sitting by more than
# any change being measured. Pinned, the slow mode is rare. W4 runs in one
# process and is not pinned.
set -euo pipefail
before=${1:?usage: bench-ab.sh BEFORE_BIN AFTER_BIN}
after=${2:?usage: bench-ab.sh BEFORE_BIN AFTER_BIN}
runs=${RUNS:-15}
workloads=${WORKLOADS:-"w1 w2 w3 w4"}
work=$(mktemp -d /tmp/oscar-bench-ab.XXXXXX)

# One run of workload $2 with binary $1: "metric value" lines, CPU seconds
# of each node included.
one() {
  local bin=$1 w=$2
  if [ "$w" = w4 ]; then
    "$bin" bench w4 | awk '{print $2, $3}'
    return
  fi
  : > "$work/port"
  /usr/bin/time -f "%U %S" -o "$work/b.time" taskset -c 1 "$bin" bench serve > "$work/port" &
  local b=$!
  for _ in $(seq 200); do grep -q PORT "$work/port" && break; sleep 0.05; done
  local port
  port=$(sed -n 's/^PORT //p' "$work/port")
  # B serves until A sends it `Stop`. If A fails, or B is still there 10 s
  # after A ended, B is stopped here (the child of `time`), so that a build
  # that crashes ends the sitting instead of hanging it.
  if ! /usr/bin/time -f "%U %S" -o "$work/a.time" taskset -c 0 "$bin" bench "$w" --connect "$port" >"$work/a.out"; then
    pkill -P "$b" 2>/dev/null || true
    wait "$b" 2>/dev/null || true
    echo "bench-ab: node A of $w failed ($bin); node B stopped" >&2
    return 1
  fi
  awk '{print $2, $3}' "$work/a.out"
  for _ in $(seq 100); do kill -0 "$b" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$b" 2>/dev/null; then
    pkill -P "$b" 2>/dev/null || true
    wait "$b" 2>/dev/null || true
    echo "bench-ab: node B of $w did not stop within 10 s of A ($bin)" >&2
    return 1
  fi
  wait "$b"
  echo "${w}_A_cpu $(awk '{print $1 + $2}' "$work/a.time")"
  echo "${w}_B_cpu $(awk '{print $1 + $2}' "$work/b.time")"
}

# The host's share of this VM's CPU time taken by other guests (steal),
# over the sitting: above a few percent, the figures move by more than the
# changes they compare.
cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
read -r total0 steal0 < <(cpu_ticks)
trap 'read -r total1 steal1 < <(cpu_ticks); awk -v t=$((total1 - total0)) -v s=$((steal1 - steal0)) "BEGIN { printf \"steal during the sitting: %.1f %% of CPU time\n\", t ? 100 * s / t : 0 }"; rm -rf "$work"' EXIT

for w in $workloads; do
  for run in $(seq 1 "$runs"); do
    if [ $((run % 2)) = 0 ]; then order="before after"; else order="after before"; fi
    for side in $order; do
      bin=$before
      [ "$side" = after ] && bin=$after
      one "$bin" "$w" | sed "s/^/$side /"
    done
    echo "[bench-ab] $w run $run done" >&2
  done
done | python3 -c '
import collections, statistics, sys
values = collections.defaultdict(list)
order = []
for line in sys.stdin:
    side, metric, value = line.split()
    if metric not in order:
        order.append(metric)
    values[(metric, side)].append(float(value))
print("%-34s %12s %12s  change   (medians; ranges before, after)" % ("figure", "before", "after"))
for m in order:
    b, a = values[(m, "before")], values[(m, "after")]
    if not b or not a:
        print(f"{m:34} (a side has no runs: the sitting ended early)")
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    change = (ma / mb - 1) * 100 if mb else 0
    print(f"{m:34} {mb:12.4g} {ma:12.4g}  {change:+5.1f} %  [{min(b):.4g}-{max(b):.4g}] [{min(a):.4g}-{max(a):.4g}]")
'
