#!/usr/bin/env bash
# The peer Oscar's TLS between nodes is measured against (issue 18): W1-W3
# between two distributed Erlang nodes over TLS 1.3 (inet_tls_dist), each
# node presenting a certificate from a CA that `oscar certs` made and
# verifying the other's, then the same over plain TCP (inet_tcp_dist) in the
# same sitting, so the cost of TLS on Erlang's side reads as a ratio too.
# Prints the median of RUNS runs as `erlang_tls metric value unit` and
# `erlang_tcp metric value unit`, the lines Cluster/bench/run.sh prints for
# Oscar. Loopback only.
#
#   Cluster/bench/erlang-tls.sh                 # 3 runs of W1, W2, W3 each way
#   RUNS=5 WORKLOADS="w2 w3" Cluster/bench/erlang-tls.sh
#   DISTS=tcp WORKLOADS="w5 w2 w2s" Cluster/bench/erlang-tls.sh  # large messages
#
# Installs erlang-nox (Debian) when erlc is missing. The workloads are
# Cluster/bench/erlang/oscar_peer.erl's.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
WORKLOADS=${WORKLOADS:-"w1 w2 w3"}
DISTS=${DISTS:-"tls tcp"}
export ERL_EPMD_PORT=${EPMD_PORT:-43691}

if ! command -v erlc >/dev/null; then
  echo "[erlang-tls] installing erlang-nox (Debian)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends erlang-nox >&2
fi
# The oscar binary, for `oscar certs` (OSCAR_BIN, else a debug build).
oscar=${OSCAR_BIN:-}
if [ -z "$oscar" ]; then
  swift build >&2
  oscar=$(swift build --show-bin-path)/oscar
fi

work=$(mktemp -d /tmp/oscar-erlang-tls.XXXXXX)
epmd_pid=""
cleanup() {
  pkill -f -- "-setcookie oscar-bench-$$" 2>/dev/null || true
  [ -n "$epmd_pid" ] && kill "$epmd_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

erlc -o "$work" Cluster/bench/erlang/oscar_peer.erl
"$oscar" certs init --dir "$work/certs" >&2
# Erlang's TLS distribution checks the certificate against the host part of
# the node name as a DNS name (an IP SAN does not match "127.0.0.1"), so the
# nodes are a@localhost and b@localhost (short names) and their certificates
# name localhost; the listen and connect addresses stay on 127.0.0.1.
for node in a b; do "$oscar" certs issue --dir "$work/certs" --name "$node" --host localhost >&2; done
# Each node's TLS options, both roles: its certificate, the CA, the peer's
# certificate verified and required, TLS 1.3 only (as Oscar's).
for node in a b; do
  options="{certfile, \"$work/certs/$node.pem\"}, {keyfile, \"$work/certs/$node.key\"},
    {cacertfile, \"$work/certs/ca.pem\"}, {verify, verify_peer}, {versions, ['tlsv1.3']}"
  echo "[{server, [$options, {fail_if_no_peer_cert, true}]}, {client, [$options]}]." > "$work/$node.conf"
done

epmd -address 127.0.0.1 -port "$ERL_EPMD_PORT" >/dev/null 2>&1 &
epmd_pid=$!

# node_flags NODE DIST: the flags of one node (a, the client; b, the server).
node_flags() {
  local flags=(-sname "$1@localhost" -noshell -setcookie "oscar-bench-$$" -pa "$work"
    -kernel inet_dist_use_interface "{127,0,0,1}" inet_dist_listen_min 43800 inet_dist_listen_max 43899)
  if [ "$2" = tls ]; then flags+=(-proto_dist inet_tls -ssl_dist_optfile "$work/$1.conf"); fi
  printf '%s\n' "${flags[@]}"
}

raw=$work/raw.txt
for run in $(seq 1 "$RUNS"); do
  for dist in $DISTS; do
    for w in $WORKLOADS; do
      echo "[erlang-tls] run $run $dist $w" >&2
      mapfile -t server < <(node_flags b "$dist")
      mapfile -t client < <(node_flags a "$dist")
      timeout -k 5 300 erl "${server[@]}" -eval 'oscar_peer:serve()' > "$work/server.out" 2>&1 &
      server_pid=$!
      for _ in $(seq 1 100); do grep -q READY "$work/server.out" && break; sleep 0.1; done
      timeout -k 5 300 erl "${client[@]}" -eval "oscar_peer:measure($w, 'b@localhost')" > "$work/client.out" 2>&1 ||
        { echo "[erlang-tls] $dist $w failed: $(tail -3 "$work/client.out")" >&2; kill "$server_pid" 2>/dev/null || true; }
      awk -v name="erlang_$dist" '$1 == "RESULT" { print name, $2, $3, $4 }' "$work/client.out" >> "$raw"
      wait "$server_pid" 2>/dev/null || true
    done
  done
done

# The median of each figure, in the order first seen.
awk '{ k = $1 " " $2; if (!(k in n)) { order[++K] = k; unit[k] = $4 } n[k]++; v[k, n[k]] = $3 }
  END {
    for (i = 1; i <= K; i++) {
      k = order[i]; m = n[k]
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (v[k, b] < v[k, a]) { t = v[k, a]; v[k, a] = v[k, b]; v[k, b] = t }
      median = (m % 2) ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2
      print k, median, unit[k]
    }
  }' "$raw"
