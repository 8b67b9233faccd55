#!/usr/bin/env python3
"""Prints the targets an application compiles when it depends on the `Oscar`
product, from `swift package describe`, and exits 1 if the test kit, the
demo actors and benchmarks, or the CLI are among them: those must never be
in a user's binary (docs/API.md)."""
import json
import subprocess
import sys

FORBIDDEN = {"OscarTestKit", "OscarDemo", "oscar"}

described = json.loads(subprocess.run(
    ["swift", "package", "describe", "--type", "json"], check=True, capture_output=True, text=True).stdout)
dependencies = {t["name"]: t.get("target_dependencies", []) for t in described["targets"]}
product = next(p for p in described["products"] if p["name"] == "Oscar")
closure, stack = set(), list(product["targets"])
while stack:
    target = stack.pop()
    if target not in closure:
        closure.add(target)
        stack.extend(dependencies.get(target, []))
print("product Oscar compiles:", ", ".join(sorted(closure)))
leaked = sorted(closure & FORBIDDEN)
if leaked:
    print("product-closure: the Oscar product must not compile " + ", ".join(leaked), file=sys.stderr)
    sys.exit(1)
print("product-closure: no test kit, demo, benchmark or CLI code in the Oscar product")
