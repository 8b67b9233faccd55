#!/usr/bin/env bash
# Set-up command 2: install what is missing and run the whole test suite.
# Warnings fail the build. A second, AddressSanitizer + LeakSanitizer run of
# the suite proves no memory is leaked or used after free (skip it with
# OSCAR_SKIP_SANITIZERS=1 for a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."
source Cluster/scripts/bootstrap.sh
oscar_bootstrap

echo "== swift test (warnings are errors)"
swift test -Xswiftc -warnings-as-errors

if [ "${OSCAR_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== swift test under AddressSanitizer + LeakSanitizer"
  OSCAR_SANITIZER_RUN=1 ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/Cluster/scripts/lsan.supp:print_suppressions=0" \
    swift test --sanitize=address --build-path .build-asan --skip MembershipCLITests
fi
