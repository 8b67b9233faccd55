#!/usr/bin/env bash
# Set-up command 1: install what is missing, build, and run the main job: a
# local three-node cluster with visible round trips between the terminal and
# the nodes, then a graceful stop.
set -euo pipefail
cd "$(dirname "$0")/.."
source Cluster/scripts/bootstrap.sh
oscar_bootstrap
swift build -c release
oscar=.build/release/oscar
export OSCAR_SECRET=${OSCAR_SECRET:-$($oscar secret)}
dir=$(mktemp -d)/cluster
trap '$oscar cluster down --dir "$dir" >/dev/null 2>&1 || true' EXIT

# The first base port with three ports nobody listens on.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base=7000
while listening $base || listening $((base + 1)) || listening $((base + 2)); do base=$((base + 100)); done

# Shows each command as you would type it, then runs it.
run() {
  local shown=""
  for a in "$@"; do case $a in *[\ \{\"]*) shown+=" '$a'" ;; *) shown+=" $a" ;; esac; done
  echo "\$ oscar$shown"
  $oscar "$@"
  echo
}
run cluster up --nodes 3 --base-port "$base" --dir "$dir"
run ask "oscar://127.0.0.1:$((base + 1))/user/echo" Echo '{"text":"hello, Oscar"}'
run tell "oscar://127.0.0.1:$((base + 2))/user/counter" Increment '{"by":2}'
run ask "oscar://127.0.0.1:$((base + 2))/user/counter" GetCount '{}'
run ask "oscar://127.0.0.1:$base/user/greeter" .greet '["Oscar"]'
run members --node "127.0.0.1:$((base + 2))"
run cluster down --dir "$dir"
