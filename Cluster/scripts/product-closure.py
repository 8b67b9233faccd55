#!/usr/bin/env python3
"""Prints the targets an application compiles when it depends on the `Oscar`
product, from `swift package describe`, and exits 1 if the test kit, the
demo actors and benchmarks, or the CLI are among them: those must never be
in a user's binary (docs/API.md)."""
import importlib.util
import json
import subprocess
import sys

FORBIDDEN = {"OscarTestKit", "OscarDemo", "oscar"}

# The dependency closure is the one the dependency matrix computes.
spec = importlib.util.spec_from_file_location("matrix", "Cluster/scripts/dependency-matrix.py")
matrix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matrix)

described = json.loads(subprocess.run(
    ["swift", "package", "describe", "--type", "json"], check=True, capture_output=True, text=True).stdout)
targets = {t["name"]: (None, t.get("target_dependencies", [])) for t in described["targets"]}
product = next(p for p in described["products"] if p["name"] == "Oscar")
closure = set(product["targets"])
for target in product["targets"]:
    closure |= matrix.closure(targets, target)
print("product Oscar compiles:", ", ".join(sorted(closure)))
leaked = sorted(closure & FORBIDDEN)
if leaked:
    print("product-closure: the Oscar product must not compile " + ", ".join(leaked), file=sys.stderr)
    sys.exit(1)
print("product-closure: no test kit, demo, benchmark or CLI code in the Oscar product")
