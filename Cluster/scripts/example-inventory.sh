#!/usr/bin/env bash
# Builds Examples/Inventory, a separate package that depends on Oscar by
# path, runs its tests (its chaos checker finds stock lost or created), and
# runs the commands of its README: a cluster of three of its nodes under
# `oscar cluster up --exec`, tells and asks from the CLI to its actor (a
# 3 MiB photo among them, from a file and from standard input), pool,
# cluster singleton and distributed actor, a node killed and one added,
# `cluster down`; the same binary as a TLS cluster asked from the CLI and
# probed over HTTPS; then a short `oscar chaos --exec` run with its own workload
# and checker. Exits non-zero at the first answer that is not the README's,
# or when the chaos run fails a check.
#
#   Cluster/scripts/example-inventory.sh     # after `swift build` at the root
set -euo pipefail
cd "$(dirname "$0")/../.."
oscar=${OSCAR:-$PWD/.build/debug/oscar}
[[ -x $oscar ]] || { echo "example-inventory: build the oscar tool first (swift build)" >&2; exit 1; }

echo "== building Examples/Inventory (warnings are errors)"
(cd Examples/Inventory && swift build --build-tests -Xswiftc -warnings-as-errors 2>&1 | tail -3)
echo "== its tests"
(cd Examples/Inventory && swift test --skip-build 2>&1 | tail -3)
chaos_binary=$PWD/Examples/Inventory/.build/debug/inventory-chaos-node

dir=$(mktemp -d /tmp/oscar-inventory.XXXXXX)
base=${OSCAR_EXAMPLE_BASE_PORT:-7600}
cleanup() {
  "$oscar" cluster down --dir "$dir/tls-cluster" >/dev/null 2>&1 || true
  "$oscar" cluster down --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

# expect LABEL WANTED COMMAND...: runs COMMAND and fails unless its standard
# output is exactly WANTED.
expect() {
  local label=$1 wanted=$2 got
  shift 2
  got=$("$@" 2>&1) || { echo "FAIL $label: exit $? with: $got" >&2; exit 1; }
  if [[ $got != "$wanted" ]]; then
    echo "FAIL $label: wanted '$wanted', got '$got'" >&2
    exit 1
  fi
  echo "ok   $label: $got"
}

# The example's cluster file says 3 nodes of inventory-node (the README's
# command); the flags beside it move the cluster to its own ports and dir.
echo "== oscar cluster up --file Examples/Inventory/oscar-cluster.json (3 nodes of --exec's binary)"
"$oscar" cluster up --file Examples/Inventory/oscar-cluster.json --dir "$dir" --base-port "$base"
n0=oscar://127.0.0.1:$base
n1=oscar://127.0.0.1:$((base + 1))

echo "== asking the application's actors from the terminal"
expect "tell AddStock" "sent AddStock to $n0/user/inventory" \
  "$oscar" tell --dir "$dir" "$n0/user/inventory" AddStock '{"sku":"apple","count":5}'
expect "ask GetStock" "5" "$oscar" ask --dir "$dir" "$n0/user/inventory" GetStock '{"sku":"apple"}'
expect "RemoveStock, too many" '{"outOfStock":{"available":5}}' \
  "$oscar" ask --dir "$dir" "$n0/user/inventory" RemoveStock '{"sku":"apple","count":9}'
expect "RemoveStock" '{"removed":{"remaining":3}}' \
  "$oscar" ask --dir "$dir" "$n0/user/inventory" RemoveStock '{"sku":"apple","count":2}'
expect "a pool across the cluster" "375" \
  sh -c "'$oscar' ask --dir '$dir' '$n1/user/pricing' Quote '{\"sku\":\"apple\",\"count\":3}' | sed 's/.*\"total\":\\([0-9]*\\).*/\\1/'"
"$oscar" tell --dir "$dir" "$n1/user/ledger" Record '{"sku":"apple","delta":-2}' >/dev/null
expect "the cluster singleton" '{"movements":1,"net":{"apple":-2}}' \
  "$oscar" ask --dir "$dir" "$n0/user/ledger" GetLedger '{}'
expect "the distributed actor" "\"warehouse main on 127.0.0.1:$((base + 1))\"" \
  "$oscar" ask --dir "$dir" "$n1/user/warehouse" .describe '[]'
if "$oscar" ask --dir "$dir" "$n0/user/inventory" GetStock '{"sku":1}' >/dev/null 2>&1; then
  echo "FAIL a malformed message was answered" >&2
  exit 1
fi
echo "ok   a malformed message is refused (exit non-zero), and the node lives on:"
expect "still answering" "3" "$oscar" ask --dir "$dir" "$n0/user/inventory" GetStock '{"sku":"apple"}'

echo "== a large message from the terminal: a 3 MiB photo goes in chunks from a file, and comes back"
python3 -c 'import os, sys; sys.stdout.write("{\"sku\":\"apple\",\"photo\":{\"$bytes\":\"%s\"}}" % os.urandom(3 << 20).hex())' \
  > "$dir/photo.json"
expect "tell PutPhoto @FILE" "sent PutPhoto to $n0/user/inventory" \
  "$oscar" tell --dir "$dir" "$n0/user/inventory" PutPhoto "@$dir/photo.json"
"$oscar" ask --dir "$dir" "$n0/user/inventory" GetPhoto '{"sku":"apple"}' > "$dir/photo-back.json"
expect "GetPhoto returns the same 3 MiB" "same 3145728 bytes" python3 -c '
import json, sys
sent = json.load(open(sys.argv[1]))["photo"]["$bytes"]
back = json.load(open(sys.argv[2]))["$bytes"]
print(("same %d bytes" if back == sent else "different: %d bytes back") % (len(back) // 2))' \
  "$dir/photo.json" "$dir/photo-back.json"
expect "GetPhoto on another node" "null" "$oscar" ask --dir "$dir" "$n1/user/inventory" GetPhoto '{"sku":"apple"}'
expect "tell PutPhoto from standard input" "sent PutPhoto to $n1/user/inventory" \
  sh -c "'$oscar' tell --dir '$dir' '$n1/user/inventory' PutPhoto - < '$dir/photo.json'"

echo "== cluster kill, add, status"
"$oscar" cluster kill --dir "$dir" "127.0.0.1:$((base + 2))"
# A node added while the killed one is still unreachable joins a cluster in
# the middle of downing it; one run saw a live node downed then (noted for
# the downing work). Add once the killed node is removed, bounded.
for _ in $(seq 1 60); do
  "$oscar" members --dir "$dir" --node "127.0.0.1:$base" | grep -q ":$((base + 2)) " || break
  sleep 1 # the next look: membership removes a killed node in about 16 s
done
"$oscar" cluster add --dir "$dir" --timeout 60s
"$oscar" cluster status --dir "$dir"
"$oscar" cluster down --dir "$dir"

echo "== the same binary over TLS: cluster up --tls, the CLI's certificate, the management endpoint over HTTPS"
tls_dir=$dir/tls-cluster
"$oscar" cluster up --file Examples/Inventory/oscar-cluster.json --tls --nodes 2 --dir "$tls_dir" \
  --base-port "$((base + 10))" --http-base-port "$((base + 20))"
t0=oscar://127.0.0.1:$((base + 10))
expect "tell over TLS" "sent AddStock to $t0/user/inventory" \
  "$oscar" tell --dir "$tls_dir" "$t0/user/inventory" AddStock '{"sku":"pear","count":2}'
expect "ask over TLS" "2" "$oscar" ask --dir "$tls_dir" "$t0/user/inventory" GetStock '{"sku":"pear"}'
expect "health over HTTPS" "{\"node\":\"127.0.0.1:$((base + 10))\",\"status\":\"up\"}" \
  "$oscar" health --dir "$tls_dir" --http "127.0.0.1:$((base + 20))"
"$oscar" cluster down --dir "$tls_dir"

echo "== oscar chaos --exec: the nemesis, the generic checks and the application's own"
"$oscar" chaos --nodes 3 --duration 20s --seed 2 --report "$dir/chaos" --exec "$chaos_binary" | tail -16
echo "example-inventory: every answer was the README's, and the chaos run passed"
