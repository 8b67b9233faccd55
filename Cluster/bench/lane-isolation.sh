#!/usr/bin/env bash
# What a large lane of its own would buy W2S (docs/BENCHMARKS.md, "Large
# messages"): W2 between two fresh processes, RUNS times each,
#   quiet        - nothing else running;
#   beside       - while `oscar bench w5` streams 1 and 16 MiB messages
#                  between two other processes, at normal priority;
#   beside_idle  - the same stream at SCHED_IDLE (`chrt -i 0`), which
#                  yields a core to any normal thread that wakes;
#   beside_nice  - the same stream at nice 19 (`nice -n 19`): a weight of
#                  15 against 1,024, so it yields less but is never starved;
#   w2s          - W2 under the stream between the same two nodes (today's
#                  W2S: one loop per node carries both).
# Prints the median of each figure as `oscar <figure> <value> <unit>`:
#   w2_<setting>_p50, _p99   W2's latency;
#   others_<setting>         the cores that processes other than W2's two
#                            used while W2 ran (all cores' busy time less
#                            W2's own CPU, over W2's wall time): what the
#                            stream got beside it, whatever its rate
#                            between W2 runs;
#   stream_<setting>         what the stream moved (W5's 16 MiB figure of
#                            the rounds run meanwhile, or W2S's own).
# No measurement here is a pass or fail; it shows where W2S's p99 goes.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
command -v chrt >/dev/null || { echo "lane-isolation.sh needs chrt (util-linux)" >&2; exit 1; }
chrt -i 0 true || { echo "lane-isolation.sh: this machine refuses SCHED_IDLE (chrt -i 0)" >&2; exit 1; }
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
trap 'stop_stream; rm -f "$raw" "$raw.w5" "$raw.w2"' EXIT

# Streams W5 rounds, in fresh process pairs, until told to stop (or this
# script is gone). A failed round is reported and waited out a second.
start_stream() {
  local setting=$1
  shift
  rm -f "$stop"
  (while [ ! -e "$stop" ] && kill -0 $$ 2>/dev/null; do
    if ! "$@" timeout -k 5 120 "$oscar" bench w5 > "$raw.w5"; then
      echo "[lane-isolation] a W5 round failed ($setting)" >&2
      sleep 1
    fi
    awk -v s="$setting" '$2 == "w5_16mib_throughput" { print "oscar stream_" s, $3, $4 }' "$raw.w5" >> "$raw"
  done) &
  stream_pid=$!
  sleep 2  # the first W5 round has connected and is streaming
}

# Busy and total jiffies of all cores, from /proc/stat's first line.
cpu_sample() { awk '/^cpu /{ print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9 }' /proc/stat; }

measure() {
  local setting=$1 workload=$2 before after t0 t1 own hz
  before=$(cpu_sample)
  t0=$(date +%s.%N)
  if ! timeout -k 5 240 "$oscar" bench "$workload" > "$raw.w2"; then
    echo "[lane-isolation] $workload failed ($setting); not counted" >&2
    return 0
  fi
  t1=$(date +%s.%N)
  after=$(cpu_sample)
  own=$(awk '$2 ~ /_[AB]_cpu$/ { s += $3 } END { print s + 0 }' "$raw.w2")
  hz=$(getconf CLK_TCK)
  echo "$before $after $t0 $t1 $own $hz" |
    awk -v s="$setting" '{ wall = $6 - $5; if (wall > 0) printf "oscar others_%s %.2f cores\n", s, (($3 - $1) / $8 - $7) / wall }' >> "$raw"
  awk -v s="$setting" '$2 ~ /_remote_ask_p(50|99)$/ { sub(/.*_p/, "p", $2); print "oscar w2_" s "_" $2, $3, $4 }
    $2 == "w2s_stream_throughput" { print "oscar stream_" s, $3, $4 }' "$raw.w2" >> "$raw"
}

for run in $(seq 1 "$RUNS"); do
  echo "[lane-isolation] run $run" >&2
  measure quiet w2
  start_stream beside
  measure beside w2
  stop_stream
  start_stream beside_idle chrt -i 0
  measure beside_idle w2
  stop_stream
  start_stream beside_nice nice -n 19
  measure beside_nice w2
  stop_stream
  measure w2s w2s
done
rm -f "$raw.w5" "$raw.w2"

# The median of each figure, in the order first seen.
awk '{ key = $1 " " $2; if (!(key in n)) order[++k] = key; v[key, ++n[key]] = $3 + 0; unit[key] = $4 }
  END {
    for (i = 1; i <= k; i++) {
      key = order[i]; m = n[key]
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[key, b] < v[key, a]) { t = v[key, a]; v[key, a] = v[key, b]; v[key, b] = t }
      printf "%s %s %s\n", key, (m % 2) ? v[key, (m + 1) / 2] : (v[key, m / 2] + v[key, m / 2 + 1]) / 2, unit[key]
    }
  }' "$raw"
