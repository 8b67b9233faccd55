#!/usr/bin/env bash
# Every ```swift block of the docs is compiled: README.md, docs/*.md,
# Examples/*/README.md and the DocC articles (Sources/Oscar/Oscar.docc).
# Readers copy these blocks, so each must build as it stands. Needs
# `swift build` first (it type-checks against .build/debug/Modules).
#
#   Cluster/scripts/doc-blocks.sh               self-test, then every doc
#   Cluster/scripts/doc-blocks.sh FILE.md...    those files only
#   Cluster/scripts/doc-blocks.sh --self-test   the checker's own test only
#
# The convention the docs follow:
# - A ```swift block is a complete Swift file, imports included, that
#   type-checks against the library: `import Oscar` (and `import
#   OscarTestKit`), never an inner module (OscarRuntime, ...), which an
#   application cannot import. It declares what it uses; placeholder types
#   can go at its end, as Swift does not mind the order of declarations.
# - It is checked as a main file (swiftc -typecheck, warnings are errors), so
#   top-level code may run (`try await` too). With `@main`, as a library file.
# - `<!-- continues -->` on the line just before the opening fence appends
#   the block to the Swift block(s) before it in the same document; they are
#   checked together, as one file.
# - A block whose first line starts with `// swift-tools-version` is a
#   Package.swift: `swift package dump-package` parses it, and when its
#   dependencies are paths (`.package(path: "../oscar")`) they are linked to
#   this repository and `swift package show-dependencies` loads the package
#   graph, which fails on a product Oscar does not have. Offline: nothing is
#   fetched (a manifest with a URL dependency is only parsed).
# - Other fences (```sh, ```json, plain ```) are not compiled.
#
# Prints one line per block, `FILE:LINE ok` or `FILE:LINE FAILED` followed by
# the compiler's errors at their lines in the Markdown; exits 1 if any fails.
# With no arguments, a self-test runs first and must catch a broken block, so
# a checker that passes everything cannot pass CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
source Cluster/scripts/typecheck-env.sh
oscar_require_build doc-blocks
check() { python3 Cluster/scripts/doc-blocks.py "$@" -- "${oscar_typecheck_flags[@]}"; }
if (($# == 0)); then
  check --self-test
fi
check "$@"
