#!/usr/bin/env bash
# Sourced by the scripts that type-check Swift files against the modules
# `swift build` made, as an application that imports Oscar sees them:
# typed-refs.sh (files that must fail) and doc-blocks.sh (the docs' code).
# No -package-name, so `package` declarations stay hidden, as they are from
# another package. Run from the repository root.

oscar_modules=.build/debug/Modules
# The flags after `swiftc`: Swift 6, the built modules, and the module maps of
# the system libraries (Oscar's modules import CLibUV and COpenSSL, so a
# client must find them too).
oscar_typecheck_flags=(-typecheck -swift-version 6 -I "$PWD/$oscar_modules"
  -Xcc "-fmodule-map-file=$PWD/Sources/CLibUV/module.modulemap"
  -Xcc "-fmodule-map-file=$PWD/Sources/COpenSSL/module.modulemap")

# oscar_require_build NAME: fails, saying why, when nothing has been built.
oscar_require_build() {
  [[ -d $oscar_modules ]] || { echo "$1: build first (swift build)" >&2; return 1; }
}
