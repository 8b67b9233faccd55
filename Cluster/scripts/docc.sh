#!/usr/bin/env bash
# Builds the library's documentation (Sources/Oscar/Oscar.docc and the public
# API of the `Oscar` product) into a DocC archive, with the toolchain's
# `docc`, offline:
#
#   Cluster/scripts/docc.sh [ARCHIVE]     default .build/docc/Oscar.doccarchive
#
# 1. `swift build` of the Oscar target, with the flags Cluster/test.sh builds
#    with, so after test.sh's build it compiles nothing.
# 2. One symbol graph, module `Oscar`, extracted from the built modules: the
#    umbrella plus every module it re-exports (`@_exported import` in
#    Sources/Oscar/Oscar.swift), public symbols only, so the pages show the
#    API as an application sees it after `import Oscar`.
# 3. `docc convert` of the catalog with that graph. A warning (an unresolved
#    symbol link, in an article or a doc comment) is an error: the script
#    exits non-zero.
#
# OSCAR_BUILD_PATH: a build directory other than .build.
# Preview: python3 -m http.server --directory ARCHIVE, then open
# http://localhost:8000/documentation/oscar
set -euo pipefail
cd "$(dirname "$0")/../.."
archive=${1:-.build/docc/Oscar.doccarchive}
build=${OSCAR_BUILD_PATH:-.build}
case "$archive" in *.doccarchive) ;; *)
  echo "docc.sh: the archive's name must end in .doccarchive: $archive" >&2
  exit 2
  ;;
esac

swift build --build-path "$build" --target Oscar -Xswiftc -warnings-as-errors
bin=$(swift build --build-path "$build" --show-bin-path)
modules=$bin/Modules
[ -d "$modules" ] || modules=$bin # toolchains before 6.0 keep .swiftmodule files beside the products
triple=$(swiftc -print-target-info | sed -n 's/^ *"triple": "\(.*\)",$/\1/p' | head -n 1)
reexported=$(sed -n 's/^@_exported import \([A-Za-z0-9_]*\)$/\1/p' Sources/Oscar/Oscar.swift | paste -sd, -)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/symbol-graphs"
swift symbolgraph-extract -module-name Oscar -target "$triple" -I "$modules" -I Sources/CLibUV -I Sources/COpenSSL \
  -minimum-access-level public -experimental-allowed-reexported-modules="$reexported" \
  -module-cache-path "$work/module-cache" -output-dir "$work/symbol-graphs"

mkdir -p "$(dirname "$archive")"
rm -rf "$archive"
docc convert Sources/Oscar/Oscar.docc --additional-symbol-graph-dir "$work/symbol-graphs" \
  --fallback-display-name Oscar --fallback-bundle-identifier oscar --warnings-as-errors \
  --output-dir "$archive"
echo "documentation archive: $(cd "$archive" && pwd)"
