#!/usr/bin/env bash
# The abuse bench (docs/ABUSE-BENCH.md): builds the release binary, or uses
# $OSCAR_BIN when set, and runs Cluster/bench/abuse.py against it. Figures go
# to stdout as `oscar <metric> <value> <unit>`, goals and verdicts to stderr.
# Extra arguments go to abuse.py (e.g. --phases preauth,idlefd). The whole run
# is bounded by ABUSE_TIMEOUT seconds (default 600); abuse.py stops every node
# it started on the way out.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${OSCAR_BIN:-}" ]; then
  swift build -c release >&2
  OSCAR_BIN=.build/release/oscar
fi
exec timeout -k 15 "${ABUSE_TIMEOUT:-600}" python3 Cluster/bench/abuse.py --bin "$OSCAR_BIN" "$@"
