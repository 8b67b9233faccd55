#!/usr/bin/env bash
# What a large lane of its own would buy W2S (docs/BENCHMARKS.md, "Large
# messages"): W2 between two fresh processes, RUNS times each,
#   quiet        - nothing else running;
#   beside       - while `oscar bench w5` streams 1 and 16 MiB messages
#                  between two other processes, at normal priority;
#   beside_idle  - the same stream at SCHED_IDLE (`chrt -i 0`), which
#                  yields a core to any normal thread that wakes;
#   w2s          - W2 under the stream between the same two nodes (today's
#                  W2S: one loop per node carries both).
# Prints the median p50 and p99 of each as `oscar w2_<setting>_p50 … us`,
# and what the stream moved meanwhile (W5's 16 MiB figure, and W2S's own
# stream) as `oscar stream_<setting> … MB/s`. No measurement here is a pass
# or fail; it shows where W2S's p99 goes.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
command -v chrt >/dev/null || { echo "lane-isolation.sh needs chrt (util-linux)" >&2; exit 1; }
swift build -c release >&2
oscar=.build/release/oscar
raw=$(mktemp)
stop=$(mktemp -u)
stream_pid=""
stop_stream() {
  [ -z "$stream_pid" ] && return 0
  touch "$stop"
  wait "$stream_pid" 2>/dev/null || true
  rm -f "$stop"
  stream_pid=""
}
trap 'stop_stream; rm -f "$raw"' EXIT

# Streams W5 rounds, in fresh process pairs, until told to stop.
start_stream() {
  local setting=$1 prefix=$2
  rm -f "$stop"
  (while [ ! -e "$stop" ]; do
    $prefix timeout -k 5 240 "$oscar" bench w5 2>/dev/null |
      awk -v s="$setting" '$2 == "w5_16mib_throughput" { print "oscar stream_" s, $3, $4 }' >> "$raw" || true
  done) &
  stream_pid=$!
  sleep 2  # the first W5 round has connected and is streaming
}

measure() {
  local setting=$1 workload=$2
  timeout -k 5 240 "$oscar" bench "$workload" |
    awk -v s="$setting" '$2 ~ /_remote_ask_p(50|99)$/ { sub(/.*_p/, "p", $2); print "oscar w2_" s "_" $2, $3, $4 }
      $2 == "w2s_stream_throughput" { print "oscar stream_" s, $3, $4 }' >> "$raw"
}

for run in $(seq 1 "$RUNS"); do
  echo "[lane-isolation] run $run" >&2
  measure quiet w2
  start_stream beside ""
  measure beside w2
  stop_stream
  start_stream beside_idle "chrt -i 0"
  measure beside_idle w2
  stop_stream
  measure w2s w2s
done

# The median of each figure, in the order first seen.
awk '{ key = $1 " " $2; if (!(key in n)) order[++k] = key; v[key, ++n[key]] = $3; unit[key] = $4 }
  END {
    for (i = 1; i <= k; i++) {
      key = order[i]; m = n[key]
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[key, b] < v[key, a]) { t = v[key, a]; v[key, a] = v[key, b]; v[key, b] = t }
      printf "%s %s %s\n", key, (m % 2) ? v[key, (m + 1) / 2] : (v[key, m / 2] + v[key, m / 2 + 1]) / 2, unit[key]
    }
  }' "$raw"
