#!/usr/bin/env bash
# Typed refs are checked by the compiler: a compile-failure test. Type-checks
# the files in Cluster/scripts/typed-refs/ against the built Oscar module:
# compiles.swift must compile; every other file must fail, with the error
# that says a message's receiver is not the ref's actor. Needs `swift build`
# first (it reads .build/debug/Modules).
#
#   Cluster/scripts/typed-refs.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source Cluster/scripts/typecheck-env.sh
oscar_require_build typed-refs
typecheck() {
  swiftc "${oscar_typecheck_flags[@]}" "$1" 2>&1
}
status=0
if ! out=$(typecheck Cluster/scripts/typed-refs/compiles.swift); then
  echo "typed-refs: compiles.swift does not compile:" >&2
  echo "$out" >&2
  status=1
fi
for file in Cluster/scripts/typed-refs/*.swift; do
  [[ $file == */compiles.swift ]] && continue
  if out=$(typecheck "$file"); then
    echo "typed-refs: $file compiled, but must not" >&2
    status=1
  elif ! grep -q "requires the types" <<<"$out"; then
    echo "typed-refs: $file failed for another reason than the receiver:" >&2
    echo "$out" >&2
    status=1
  else
    echo "typed-refs: $file is refused: $(grep -m1 'error:' <<<"$out" | sed 's/.*error: //')"
  fi
done
exit $status
