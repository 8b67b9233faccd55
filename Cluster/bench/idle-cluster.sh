#!/usr/bin/env bash
# An idle local cluster's cost: starts N demo nodes with `oscar cluster up`,
# prints how long they took to converge, lets them settle 10 s, then prints
# the CPU all N node processes used over 20 s (in cores). Then it SIGKILLs
# the middle member (not the leader) and prints how long after the kill the
# first node saw it unreachable, the leader downed it, and the last node
# removed it from its view (from the nodes' logs), and stops them.
#
#   Cluster/bench/idle-cluster.sh [N=32] [BASE_PORT=7300] [OSCAR=.build/release/oscar]
#
# KEEP=1 keeps the nodes' logs (the directory is printed).
#
# Prints `name metric value unit` lines, as the workloads' scripts do.
set -euo pipefail
nodes=${1:-32}
base=${2:-7300}
oscar=${3:-.build/release/oscar}
dir=$(mktemp -d /tmp/oscar-idle.XXXXXX)
trap '"$oscar" cluster down --dir "$dir" --grace 5s >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] && echo "logs kept in $dir" >&2 || rm -rf "$dir"' EXIT

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

victim=$((base + nodes / 2))
victim_pid=$(pgrep -f -- "node --port $victim( |\$)" | head -1)
killed_at=$(date +%H:%M:%S.%3N)
kill -9 "$victim_pid"
removed="cluster: removed: 127\.0\.0\.1:$victim "
deadline=$((SECONDS + 60))
until [ "$(grep -l -E "$removed" "$dir"/node-*.log | wc -l)" -ge $((nodes - 1)) ]; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "the killed member was not removed from every view in 60 s" >&2; exit 1; }
  sleep 0.2
done
# Milliseconds from the kill to the first (or last) log line of this kind,
# over the nodes' logs, whose lines start with HH:MM:SS.mmm.
since_kill() { # pattern first|last
  grep -h -E "$1" "$dir"/node-*.log | awk -v k="$killed_at" -v which="$2" '
    function ms(t,  p) { split(t, p, /[:.]/); return ((p[1] * 60 + p[2]) * 60 + p[3]) * 1000 + p[4] }
    { d = (ms($1) - ms(k) + 86400000) % 86400000
      if (n == 0 || (which == "first" ? d < best : d > best)) best = d; n++ }
    END { print best }'
}
echo "oscar idle_${nodes}_kill_unreachable $(since_kill "cluster: unreachable: 127\.0\.0\.1:$victim " first) ms"
echo "oscar idle_${nodes}_kill_down $(since_kill "cluster: down: 127\.0\.0\.1:$victim " first) ms"
echo "oscar idle_${nodes}_kill_removed $(since_kill "$removed" last) ms"
