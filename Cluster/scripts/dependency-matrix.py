#!/usr/bin/env python3
"""The module dependency matrix of docs/ARCHITECTURE.md, measured from the code.

For every pair of modules (Package.swift's Swift targets under Sources/), a
cell counts the distinct names declared `public`, `open` or `package` in the
column module that the row module's sources use:

- types (struct, class, enum, protocol, actor, typealias), free functions and
  global constants, wherever the name appears as a word;
- members (functions and properties, nested types) when they are used as
  `.name`, or bare inside an extension of one of the column module's types,
  and only where the row module can see the column module (it depends on it,
  directly or not): a member name alone cannot say whose it is.

Comments, string literals (but not their interpolations) and import lines are
ignored. A name declared in more than one module counts for none of them (it
is ambiguous), and a member name that the standard library also uses
(`count`, `description`, ...) is not counted. The counts are therefore a
lower bound read from the text, not the compiler's view; they are meant to
show which module leans on which, and how much.

An edge goes up when a module uses a module above it in LAYERS: through a
dependency in Package.swift, an `import`, or a name. SwiftPM refuses the
first two, so there should be none; the third would mean a name coincidence.

Usage:
  dependency-matrix.py                      print the block
  dependency-matrix.py --write FILE         replace the block in FILE
  dependency-matrix.py --check FILE         exit 1 if FILE's block is stale
                                            or an edge goes up
  dependency-matrix.py --explain ROW COL    the names behind one cell
"""

import os
import re
import sys

# Bottom to top. A module may use only modules before it in this list.
LAYERS = [
    "CoreEngine",
    "OscarBase",
    "OscarCBOR",
    "OscarMembership",
    "OscarRuntime",
    "OscarRemote",
    "OscarCluster",
    "OscarDistributed",
    "Oscar",
    "OscarTestKit",
    "OscarDemo",
    "oscar",
]

BEGIN = "<!-- dependency-matrix:begin -->"
END = "<!-- dependency-matrix:end -->"

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Member names the standard library, Foundation, Synchronization or
# Distributed also declare: `x.count` says nothing about whose `count` it is.
STDLIB_MEMBERS = set(
    """
    count isEmpty first last description debugDescription append insert remove removeAll removeFirst
    removeLast contains index indices startIndex endIndex capacity reserveCapacity map flatMap
    compactMap filter reduce sorted sort min max lowerBound upperBound hash hashValue encode decode
    init deinit value values keys key next makeIterator elements load store withLock rawValue
    id ID ActorSystem actorSystem resolve assignID resignID actorReady remoteCall remoteCallVoid
    makeInvocationEncoder invoke recordArgument recordReturnType recordErrorType recordGenericSubstitution
    doneRecording decodeNextArgument decodeGenericSubstitutions decodeReturnType decodeErrorType
    onReturn onReturnVoid onThrow SerializationRequirement InvocationEncoder InvocationDecoder
    ResultHandler ActorID Element Iterator Index SubSequence Key Value Failure Success Output
    seconds milliseconds microseconds nanoseconds components zero now duration
    enqueue asUnownedSerialExecutor asUnownedTaskExecutor checkIsolated isSameExclusiveExecutionContext
    unownedExecutor executor run start stop cancel finish yield resume get set update
    write read close open send reset clear apply error result code message name path node port host
    data bytes buffer size offset state status kind type shared default none all empty some
    lowercased uppercased split joined hasPrefix hasSuffix utf8 unicodeScalars isNumber
    isLetter isWhitespace prefix suffix dropFirst dropLast enumerated zip reversed firstIndex lastIndex
    allSatisfy forEach union intersection subtracting isSubset formUnion subtract distance advanced
    addingReportingOverflow multipliedReportingOverflow bitPattern littleEndian bigEndian
    byteSwapped leadingZeroBitCount trailingZeroBitCount nonzeroBitCount
    withUnsafeBytes withUnsafeMutableBytes withUnsafeBufferPointer withUnsafeMutableBufferPointer
    baseAddress copyMemory storeBytes loadUnaligned bindMemory assumingMemoryBound
    finished terminated cancelled success failure some none Continuation
    """.split()
)

DECL_TYPES = {"struct", "class", "enum", "protocol", "actor", "typealias"}
ACCESS = {"public", "open", "package", "internal", "fileprivate", "private"}
MODIFIERS = {
    "static", "final", "override", "mutating", "nonmutating", "distributed", "nonisolated", "lazy",
    "weak", "unowned", "convenience", "required", "indirect", "dynamic", "optional", "prefix",
    "postfix", "infix", "consuming", "borrowing", "isolated", "async", "rethrows",
}
EXPORTED = {"public", "open", "package"}


# MARK: - Package.swift


def read_package():
    """The Swift targets under Sources/ and their dependencies, from Package.swift."""
    text = strip_swift(open(os.path.join(ROOT, "Package.swift"), encoding="utf-8").read(), keep_strings=True)
    targets = {}
    for m in re.finditer(r"\.(target|executableTarget|testTarget|systemLibrary)\s*\(", text):
        body = balanced(text, m.end() - 1)
        name = re.search(r'name:\s*"([^"]+)"', body).group(1)
        deps_match = re.search(r"dependencies:\s*\[", body)
        deps = []
        if deps_match:
            deps = re.findall(r'"([^"]+)"', balanced(body, deps_match.end() - 1, "[", "]"))
        path = re.search(r'path:\s*"([^"]+)"', body)
        path = path.group(1) if path else os.path.join("Sources", name)
        if m.group(1) in ("testTarget", "systemLibrary") or not path.startswith("Sources/"):
            continue
        targets[name] = (path, deps)
    return targets


def balanced(text, start, open_ch="(", close_ch=")"):
    """The text from `start` (an opening bracket) to its closing bracket."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]


# MARK: - Lexing


def strip_swift(src, keep_strings=False):
    """`src` without comments; string literals become `""` (their
    interpolations stay, as code) unless `keep_strings`."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if src[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == '"' or (c == "#" and re.match(r'#+"', src[i:])):
            i = string_literal(src, i, out, keep_strings)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def string_literal(src, i, out, keep):
    """Consumes the string literal at `i`; appends `""` and its
    interpolations (or the literal itself) to `out`; returns the end."""
    start = i
    hashes = 0
    while src[i] == "#":
        hashes, i = hashes + 1, i + 1
    multi = src.startswith('"""', i)
    quote = '"""' if multi else '"'
    i += len(quote)
    closing = quote + "#" * hashes
    escape = "\\" + "#" * hashes
    pieces = []
    n = len(src)
    while i < n:
        if src.startswith(escape, i):
            j = i + len(escape)
            if j < n and src[j] == "(":
                body = balanced(src, j)
                pieces.append(" " + strip_swift(body[1:-1]) + " ")
                i = j + len(body)
            else:
                i = j + 1
        elif src.startswith(closing, i):
            i += len(closing)
            break
        else:
            if src[i] == "\n":
                pieces.append("\n")
            i += 1
    if keep:
        out.append(src[start:i])
    else:
        out.append('""')
        out.extend(pieces)
    return i


TOKEN = re.compile(r"`?[A-Za-z_][A-Za-z0-9_]*`?|\n|[{}();,.:<=@#\[\]]|\S")


def tokens(code):
    return [t.strip("`") if t[0] == "`" else t for t in TOKEN.findall(code)]


# MARK: - Declarations and uses


class ModuleScan:
    def __init__(self, name):
        self.name = name
        self.exported_top = set()  # public/package types, free functions, globals
        self.exported_members = {}  # member name -> the top-level type it belongs to
        self.declared = set()  # every name declared here outside a code block, any access
        self.words = set()  # every identifier used
        self.dotted = set()  # identifiers used as `.name`
        self.extension_words = {}  # extended type -> identifiers inside its extensions
        self.imports = set()


def scan_module(name, path):
    scan = ModuleScan(name)
    folder = os.path.join(ROOT, path)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".swift"))
    for f in files:
        with open(os.path.join(folder, f), encoding="utf-8") as handle:
            scan_file(strip_swift(handle.read()), scan)
    return scan


def scan_file(code, scan):
    lines = []
    for line in code.split("\n"):
        m = re.match(r"\s*(@_exported\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let)\s+)?([A-Za-z_]\w*)", line)
        if m:
            scan.imports.add(m.group(2))
            lines.append("")
        else:
            lines.append(line)
    toks = tokens("\n".join(lines))
    # A frame per `{`: (kind, name, access) for a type, an extension or a
    # protocol body; ("code", None, None) for any other block.
    stack = []
    pending = ("code", None, None)  # what the next `{` opens
    at_start = True
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if t == "\n" or t == ";":
            at_start = True
            i += 1
            continue
        if t == "{":
            stack.append(pending)
            pending = ("code", None, None)
            at_start = True
            i += 1
            continue
        if t == "}":
            if stack:
                stack.pop()
            at_start = True
            i += 1
            continue
        # Uses.
        if re.match(r"[A-Za-z_]", t):
            scan.words.add(t)
            if i > 0 and toks[i - 1] == ".":
                scan.dotted.add(t)
            for kind, owner, _ in stack:
                if kind == "extension":
                    scan.extension_words.setdefault(owner, set()).add(t)
        if not at_start:
            i += 1
            continue
        # A statement start: attributes, modifiers, then perhaps a declaration.
        at_start = False
        access = None
        j = i
        while j < n:
            if toks[j] == "@" and j + 1 < n:
                j += 2
                if j < n and toks[j] == "(":
                    j = skip_parens(toks, j)
            elif toks[j] in ACCESS:
                if j + 1 < n and toks[j + 1] == "(":  # private(set)
                    j = skip_parens(toks, j + 1)
                else:
                    access = toks[j]
                    j += 1
            elif toks[j] in MODIFIERS or (toks[j] == "class" and j + 1 < n and toks[j + 1] in ("func", "var", "let", "subscript")):
                j += 1
                if toks[j - 1] == "nonisolated" and j < n and toks[j] == "(":
                    j = skip_parens(toks, j)
            elif toks[j] == "\n":
                j += 1
            else:
                break
        if j >= n:
            break
        keyword = toks[j]
        name = toks[j + 1] if j + 1 < n else ""
        if keyword not in DECL_TYPES | {"extension", "func", "var", "let", "case"} or not re.match(r"[A-Za-z_]\w*$", name):
            i = max(j, i + 1) if j > i else i + 1
            continue
        if keyword == "actor" and (j + 2 >= n or toks[j + 2] not in ("{", ":", "<", "where", "\n")):
            i += 1
            continue
        in_code = any(kind == "code" for kind, _, _ in stack)
        if not in_code:
            scan.declared.add(name)
        enclosing = [f for f in stack if f[0] != "code"]
        if keyword == "extension":
            extended = name
            k = j + 2
            while k + 1 < n and toks[k] == "." and re.match(r"[A-Za-z_]", toks[k + 1]):
                k += 2
            pending = ("extension", extended, access)
        elif keyword in DECL_TYPES:
            if keyword != "typealias":
                pending = ("protocol" if keyword == "protocol" else "type", name, access)
        elif keyword in ("func", "var", "let"):
            pending = ("code", None, None)
        if not in_code and keyword != "extension" and keyword != "case":
            effective = access
            if effective is None and enclosing:
                kind, _, outer_access = enclosing[-1]
                if kind in ("protocol", "extension") and outer_access in EXPORTED:
                    effective = outer_access
            if effective in EXPORTED:
                if not enclosing:
                    scan.exported_top.add(name)
                else:
                    top = enclosing[0][1]
                    scan.exported_members.setdefault(name, set()).add(top)
        i = j + 2
    return scan


def skip_parens(toks, j):
    depth = 0
    while j < len(toks):
        if toks[j] == "(":
            depth += 1
        elif toks[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


# MARK: - The matrix


def closure(targets, name, seen=None):
    seen = set() if seen is None else seen
    for dep in targets.get(name, ("", []))[1]:
        if dep not in seen:
            seen.add(dep)
            closure(targets, dep, seen)
    return seen


def measure():
    targets = read_package()
    problems = []
    unknown = sorted(set(targets) - set(LAYERS))
    if unknown:
        problems.append("targets missing from LAYERS in Cluster/scripts/dependency-matrix.py: " + ", ".join(unknown))
    modules = [m for m in LAYERS if m in targets]
    rank = {m: i for i, m in enumerate(modules)}
    scans = {m: scan_module(m, targets[m][0]) for m in modules}

    top_owners, member_owners = {}, {}
    for m in modules:
        for name in scans[m].exported_top:
            top_owners.setdefault(name, []).append(m)
        for name in scans[m].exported_members:
            member_owners.setdefault(name, []).append(m)
    declared_in = {}
    for m in modules:
        for name in scans[m].declared:
            declared_in.setdefault(name, set()).add(m)

    uses = {(r, c): set() for r in modules for c in modules if r != c}
    for r in modules:
        row = scans[r]
        visible = closure(targets, r)
        for name in sorted(row.words):
            owners = top_owners.get(name, [])
            if len(owners) != 1 or owners[0] == r or r in declared_in.get(name, ()):
                continue
            uses[(r, owners[0])].add(name)
        for name, owners in member_owners.items():
            if len(owners) != 1 or owners[0] == r or name in STDLIB_MEMBERS:
                continue
            c = owners[0]
            if c not in visible or declared_in.get(name, set()) - {c}:
                continue
            types = scans[c].exported_members[name]
            if name in row.dotted or any(name in row.extension_words.get(t, ()) for t in types):
                uses[(r, c)].add(name)

    upward = []
    for r in modules:
        for dep in targets[r][1]:
            if dep in rank and rank[dep] > rank[r]:
                upward.append(f"{r} depends on {dep} in Package.swift")
        for imported in sorted(scans[r].imports):
            if imported in rank and rank[imported] > rank[r]:
                upward.append(f"{r} imports {imported}")
        for c in modules:
            if rank[c] > rank[r] and uses[(r, c)]:
                upward.append(f"{r} uses {len(uses[(r, c)])} names of {c}: " + ", ".join(sorted(uses[(r, c)])))
    return modules, uses, upward, problems


def render(modules, uses, upward):
    rank = {m: i for i, m in enumerate(modules)}
    out = [
        BEGIN,
        "<!-- Generated by Cluster/scripts/dependency-matrix.py --write docs/ARCHITECTURE.md; do not edit. -->",
        "",
        "| uses → | " + " | ".join(modules) + " |",
        "|---|" + "---|" * len(modules),
    ]
    for r in modules:
        cells = []
        for c in modules:
            if r == c:
                cells.append("·")
                continue
            count = len(uses[(r, c)])
            cells.append("" if count == 0 else (f"**{count}↑**" if rank[c] > rank[r] else str(count)))
        out.append(f"| {r} | " + " | ".join(cells) + " |")
    out.append("")
    if upward:
        out.append("Upward edges (a module using one above it):")
        out.extend(f"- {line}" for line in upward)
    else:
        out.append("No upward edges: every module uses only modules below it.")
    out.append(END)
    return "\n".join(out) + "\n"


def replace_block(text, block):
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    end = text.find("\n", end)
    end = len(text) if end < 0 else end + 1
    return text[:start] + block + text[end:]


def main(argv):
    modules, uses, upward, problems = measure()
    for p in problems:
        print(f"dependency-matrix: {p}", file=sys.stderr)
    block = render(modules, uses, upward)
    if len(argv) == 3 and argv[0] == "--explain":
        names = uses.get((argv[1], argv[2]))
        if names is None:
            print(f"no such pair of modules: {argv[1]} {argv[2]}", file=sys.stderr)
            return 2
        print("\n".join(sorted(names)))
        return 0
    if not argv:
        sys.stdout.write(block)
        print("no upward edges" if not upward else f"{len(upward)} upward edges", file=sys.stderr)
        return 1 if problems else 0
    if len(argv) != 2 or argv[0] not in ("--write", "--check"):
        print(__doc__.strip().split("Usage:")[1], file=sys.stderr)
        return 2
    path = argv[1]
    text = open(path, encoding="utf-8").read()
    updated = replace_block(text, block)
    if updated is None:
        print(f"dependency-matrix: {path} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    if argv[0] == "--write":
        if updated != text:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(updated)
        print(f"dependency-matrix: {path} updated" if updated != text else f"dependency-matrix: {path} already current")
    else:
        stale = updated != text
        if stale:
            print(
                f"dependency-matrix: the matrix in {path} is stale; the code's dependencies changed. "
                f"Run: python3 Cluster/scripts/dependency-matrix.py --write {path}",
                file=sys.stderr,
            )
        else:
            print(f"dependency-matrix: {path} is current")
        if stale and not upward:
            return 1
    if upward:
        print("dependency-matrix: edges go up:\n  " + "\n  ".join(upward), file=sys.stderr)
        return 1
    print("dependency-matrix: no upward edges")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
