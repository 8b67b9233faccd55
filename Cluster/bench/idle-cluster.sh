#!/usr/bin/env bash
# An idle local cluster's cost: starts N demo nodes with `oscar cluster up`,
# prints how long they took to converge, lets them settle 10 s, then prints
# the CPU all N node processes used over 20 s (in cores), and stops them.
#
#   Cluster/bench/idle-cluster.sh [N=32] [BASE_PORT=7300] [OSCAR=.build/release/oscar]
#
# Prints `name metric value unit` lines, as the workloads' scripts do.
set -euo pipefail
nodes=${1:-32}
base=${2:-7300}
oscar=${3:-.build/release/oscar}
dir=$(mktemp -d /tmp/oscar-idle.XXXXXX)
trap '"$oscar" cluster down --dir "$dir" --grace 5s >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

start=$(date +%s%N)
"$oscar" cluster up --nodes "$nodes" --base-port "$base" --dir "$dir" --no-supervise --timeout 60s >"$dir/up.log" 2>&1 || {
  echo "the cluster did not converge:" >&2
  tail -5 "$dir/up.log" >&2
  exit 1
}
echo "oscar idle_${nodes}_converge $(((($(date +%s%N) - start) / 1000000))) ms"

pids=()
for ((port = base; port < base + nodes; port++)); do
  pid=$(pgrep -f -- "node --port $port( |\$)" | head -1) && pids+=("$pid")
done
[ "${#pids[@]}" -eq "$nodes" ] || { echo "found ${#pids[@]} of $nodes node processes" >&2; exit 1; }
ticks() { # user + system clock ticks of every node process
  local sum=0 fields
  for pid in "${pids[@]}"; do
    read -ra fields <"/proc/$pid/stat"
    sum=$((sum + fields[13] + fields[14]))
  done
  echo "$sum"
}
sleep 10
before=$(ticks)
sleep 20
after=$(ticks)
hz=$(getconf CLK_TCK)
awk -v d=$((after - before)) -v hz="$hz" -v n="$nodes" 'BEGIN { printf "oscar idle_%d_cpu %.3f cores\n", n, d / hz / 20 }'
