#!/usr/bin/env bash
# Set-up command 1: install what is missing, build, and run the main job: a
# local two-node cluster with a visible round trip between the nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
source Cluster/scripts/bootstrap.sh
oscar_bootstrap
swift build -c release
oscar=.build/release/oscar
export OSCAR_SECRET=${OSCAR_SECRET:-quickstart-secret}
logs=$(mktemp -d)
pids=()
stop() {
  # SIGTERM is a graceful leave; the nodes stop on their own.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT

# port NAME: the port a node printed ("listening on oscar://host:PORT"), bounded wait.
port() {
  for _ in $(seq 1 100); do
    p=$(grep -o 'listening on oscar://[^ ]*' "$logs/$1.log" 2>/dev/null | head -1 | sed 's/.*://')
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  echo "node $1 did not start; its log:" >&2; cat "$logs/$1.log" >&2; return 1
}

echo "== starting two nodes (logs in $logs)"
$oscar node --port 0 --loops 1 > "$logs/a.log" 2>&1 & pids+=($!)
a=$(port a)
$oscar node --port 0 --loops 1 --seed "127.0.0.1:$a" > "$logs/b.log" 2>&1 & pids+=($!)
b=$(port b)
echo "node A: oscar://127.0.0.1:$a   node B: oscar://127.0.0.1:$b (joins through A)"

for _ in $(seq 1 100); do
  up=$($oscar members --node "127.0.0.1:$b" --json 2>/dev/null | grep -o '"status":"up"' | wc -l || true)
  [ "$up" = 2 ] && break
  sleep 0.1
done
echo
$oscar members --node "127.0.0.1:$b"
echo
echo "== a round trip from the terminal to node B, and one to node A"
echo "\$ oscar ask oscar://127.0.0.1:$b/user/echo Echo '{\"text\":\"hello, Oscar\"}'"
$oscar ask "oscar://127.0.0.1:$b/user/echo" Echo '{"text":"hello, Oscar"}'
echo "\$ oscar tell oscar://127.0.0.1:$a/user/counter Increment '{\"by\":2}'  (then GetCount)"
$oscar tell "oscar://127.0.0.1:$a/user/counter" Increment '{"by":2}' > /dev/null
$oscar ask "oscar://127.0.0.1:$a/user/counter" GetCount '{}'
echo
echo "== stopping: both nodes leave the cluster gracefully"
