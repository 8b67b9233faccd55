#!/usr/bin/env bash
# Set-up command 1: install what is missing, build, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
source Cluster/scripts/bootstrap.sh
oscar_bootstrap
swift build -c release
exec .build/release/oscar demo
