#!/usr/bin/env bash
# The public surface of the default product, read from the sources (no build;
# docs/API.md is the policy it checks).
#
# Prints every public or open top-level type (struct, class, enum, protocol,
# actor, distributed actor, typealias) of the modules `import Oscar` gives:
# Sources/Oscar and the modules it re-exports with `@_exported import`.
# Then the count, against a limit of 40, and every extension of a type Oscar
# does not declare (String, Duration, Int, Array, CodingUserInfoKey, ...) that
# adds public members. A conformance of such a type to one of Oscar's own
# protocols is not counted: it adds only that protocol's requirements.
# Last, the public types named like swift-nio's, swift-log's or
# swift-metrics' (printed only).
#
#   Cluster/scripts/public-api.sh           print
#   Cluster/scripts/public-api.sh --check   also exit 1 above the limit or on
#                                           a public extension of a foreign type
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
  "" | --check) ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac

exec python3 - "${1:-}" <<'PY'
import importlib.util
import os
import re
import sys

LIMIT = 40
check = sys.argv[1] == "--check"

# Comments and string literals are read the way the dependency matrix reads them.
spec = importlib.util.spec_from_file_location("matrix", "Cluster/scripts/dependency-matrix.py")
matrix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(matrix)

def swift_files(module):
    folder = os.path.join("Sources", module)
    return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".swift")]

# The product's modules: Oscar and what it re-exports.
modules = ["Oscar"]
for path in swift_files("Oscar"):
    for line in matrix.strip_swift(open(path, encoding="utf-8").read()).splitlines():
        m = re.match(r"\s*@_exported\s+import\s+(\w+)\s*$", line)
        if m and os.path.isdir(os.path.join("Sources", m.group(1))):
            modules.append(m.group(1))

ATTRIBUTE = r"(?:@[\w.]+(?:\([^)]*\))?\s+)*"
DECL = re.compile(
    r"\s*" + ATTRIBUTE + r"((?:[\w]+(?:\([\w]+\))?\s+)*?)"
    r"(struct|class|enum|protocol|actor|typealias|extension)\s+([A-Za-z_][\w.]*)(.*)$"
)
MEMBER = re.compile(r"\s*" + ATTRIBUTE + r"(?:\w+\s+)*?(public|open)\s")

def declarations(path):
    """(line number, depth before the line, stripped line) for each line."""
    depth = 0
    code = matrix.strip_swift(open(path, encoding="utf-8").read())
    for number, line in enumerate(code.split("\n"), start=1):
        yield number, depth, line
        depth += line.count("{") - line.count("}")

types = []  # (module, kind, name)
extensions = []  # (module, path, line, extended type, conformances, public members?)
declared = set()  # every top-level type any module of the package declares
for module in sorted(os.listdir("Sources")):
    if not os.path.isdir(os.path.join("Sources", module)):
        continue
    for path in swift_files(module):
        current = None
        for number, depth, line in declarations(path):
            if depth == 0:
                m = DECL.match(line)
                if not m:
                    if re.match(r"\s*(?:[\w@()]+\s+)*(?:func|let|var|init)\b", line):
                        current = None
                    continue
                current = None
                modifiers, kind, name, rest = m.group(1).split(), m.group(2), m.group(3), m.group(4)
                if kind == "class" and name in ("func", "var", "let"):
                    continue
                if kind != "extension":
                    declared.add(name)
                    if module in modules and ("public" in modifiers or "open" in modifiers):
                        shown = "distributed actor" if kind == "actor" and "distributed" in modifiers else kind
                        types.append((module, shown, name))
                elif module in modules:
                    header = rest.split("{")[0].split(" where ")[0]
                    conformances = [c.strip() for c in header.lstrip(":").split(",")] if header.strip().startswith(":") else []
                    current = [module, path, number, name, conformances, "extension" if ("public" in modifiers or "open" in modifiers) else False]
                    extensions.append(current)
            elif depth == 1 and current is not None and MEMBER.match(line):
                current[5] = True

types.sort(key=lambda t: (t[0], t[2].lower()))
width = max((len(m) for m, _, _ in types), default=0)
print("Public top-level types of the Oscar product (`import Oscar`):")
for module, kind, name in types:
    print(f"  {module.ljust(width)}  {kind.ljust(17)}  {name}")
print(f"{len(types)} public top-level types (limit {LIMIT})")

product_protocols = declared
foreign = []
for module, path, number, name, conformances, public in extensions:
    if not public or name.split(".")[0] in declared:
        continue
    if conformances and all(c.split("<")[0].strip() in product_protocols for c in conformances):
        continue
    what = "is public" if public == "extension" else "adds public members"
    foreign.append(f"{path}:{number}: extension {name} {what}")
if foreign:
    print("Public extensions of types Oscar does not declare:")
    for line in foreign:
        print(f"  {line}")
else:
    print("No public extensions of types Oscar does not declare.")

# Names an application may also import from swift-nio, swift-log or
# swift-metrics (docs/API.md): listed, not yet a failure of --check.
ECOSYSTEM = {
    "EventLoop": "swift-nio", "EventLoopGroup": "swift-nio", "Channel": "swift-nio",
    "Logger": "swift-log", "LogHandler": "swift-log",
    "Counter": "swift-metrics", "Gauge": "swift-metrics", "Timer": "swift-metrics",
}
clashes = [(m, n) for m, _, n in types if n in ECOSYSTEM]
if clashes:
    print("Names that clash with the Swift server ecosystem:")
    for module, name in clashes:
        print(f"  {module}.{name} (also {ECOSYSTEM[name]}'s)")

if check:
    failed = False
    if len(types) > LIMIT:
        print(f"public-api: {len(types)} public top-level types, over the limit of {LIMIT} (docs/API.md)", file=sys.stderr)
        failed = True
    if foreign:
        print(f"public-api: {len(foreign)} public extensions of types Oscar does not own (docs/API.md)", file=sys.stderr)
        failed = True
    sys.exit(1 if failed else 0)
PY
