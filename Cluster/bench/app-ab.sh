#!/usr/bin/env bash
# W1-W4 as an application writes them (Cluster/bench/app/: its own module,
# public API only), built against two checkouts of Oscar and run alternately
# in one sitting. `oscar bench` cannot compare two layouts of the library
# fairly: before the module split its benchmark code sat inside the library
# module, where the optimizer specialized the whole send path for the
# benchmark's own message type, which no application's message ever got.
#
#   Cluster/bench/app-ab.sh BEFORE_REV [AFTER_REV]    # AFTER_REV: this checkout
#   RUNS=5 (default)
#
# The remote workloads run two nodes (one loop each) in one process, so W2's
# latencies include a thread wake-up and are higher than `oscar bench w2`'s;
# they are for comparing the two checkouts, not the peers.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
before=${1:?usage: app-ab.sh BEFORE_REV [AFTER_REV]}
after=${2:-}
runs=${RUNS:-5}
work=$(mktemp -d /tmp/oscar-app-ab.XXXXXX)
trap 'git -C "$here" worktree remove --force "$work/before-src" >/dev/null 2>&1 || true; [ -n "$after" ] && git -C "$here" worktree remove --force "$work/after-src" >/dev/null 2>&1; rm -rf "$work"' EXIT
git -C "$here" worktree add --detach "$work/before-src" "$before" >/dev/null
if [ -n "$after" ]; then git -C "$here" worktree add --detach "$work/after-src" "$after" >/dev/null; src_after=$work/after-src; else src_after=$here; fi
for side in before after; do
  src=$work/before-src; [ $side = after ] && src=$src_after
  mkdir -p "$work/$side/Sources/LocalTell" "$work/$side/Sources/Remote"
  cp "$here/Cluster/bench/app/LocalTell.swift" "$work/$side/Sources/LocalTell/main.swift"
  cp "$here/Cluster/bench/app/Remote.swift" "$work/$side/Sources/Remote/main.swift"
  cat > "$work/$side/Package.swift" <<PKG
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "app",
    dependencies: [.package(name: "oscar", path: "$src")],
    targets: [
        .executableTarget(name: "LocalTell", dependencies: [.product(name: "Oscar", package: "oscar")]),
        .executableTarget(name: "Remote", dependencies: [.product(name: "Oscar", package: "oscar")]),
    ],
    swiftLanguageModes: [.v6]
)
PKG
  echo "[app-ab] building $side" >&2
  (cd "$work/$side" && swift build -c release >&2)
done
for run in $(seq 1 "$runs"); do
  for side in before after; do
    "$work/$side/.build/release/Remote" | sed "s/^user-module/$side/"
    "$work/$side/.build/release/LocalTell" | sed "s/^user-module/$side/"
  done
  echo "[app-ab] run $run done" >&2
done | awk '{ k=$1" "$2; if (!(k in n)) { order[++K]=k; unit[k]=$4 } n[k]++; v[k, n[k]]=$3 }
  END { for (i=1;i<=K;i++) { k=order[i]; m=n[k]
      for (a=2;a<=m;a++) { x=v[k,a]; b=a-1; while (b>=1 && v[k,b]+0>x+0) { v[k,b+1]=v[k,b]; b-- } v[k,b+1]=x }
      med=(m%2)?v[k,(m+1)/2]:(v[k,m/2]+v[k,m/2+1])/2; all=""; for (a=1;a<=m;a++) all=all" "v[k,a]
      printf "%s %s %s   (runs:%s)\n", k, med, unit[k], all } }' | sort -k2,2 -k1,1r
