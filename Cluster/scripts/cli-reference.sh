#!/usr/bin/env bash
# Regenerates docs/CLI.md's CLI reference from `oscar help`: the text between
# the cli-reference markers. Tests/EndToEndTests/ReadmeCLIReferenceTests.swift
# fails when the two differ.
set -euo pipefail
cd "$(dirname "$0")/../.."
# OSCAR_BUILD_PATH: a build directory other than .build.
build=${OSCAR_BUILD_PATH:-.build}
swift build --build-path "$build" >/dev/null
help=$("$build/debug/oscar" help)
python3 - "$help" <<'PY'
import sys, re
help_text = sys.argv[1]
path = "docs/CLI.md"
text = open(path).read()
start, end = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"
block = start + "\n```\n" + help_text + "\n```\n" + end
text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
open(path, "w").write(text)
PY
echo "docs/CLI.md: CLI reference regenerated from oscar help"
