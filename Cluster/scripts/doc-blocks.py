#!/usr/bin/env python3
"""Compiles every ```swift block of the docs; run by doc-blocks.sh, which
documents the convention the blocks follow and passes the swiftc flags.

    doc-blocks.py [--self-test] [FILE.md ...] -- SWIFTC-FLAGS...

Without files it checks the docs (README.md, docs/*.md, Examples/*/README.md
and the DocC catalog's articles). One line per block, `FILE:LINE ok` or
`FILE:LINE FAILED` with the compiler's errors at their lines in the Markdown;
exit status 1 if any block fails. Run from the repository root.
"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

# The docs whose Swift blocks are checked, as globs from the repository root.
DOCS = ["README.md", "docs/*.md", "Examples/*/README.md", "Sources/Oscar/Oscar.docc/**/*.md"]

# The products an application may import; the package's other modules are
# visible to swiftc in .build, but not to an application that depends on Oscar.
PRODUCTS = {"Oscar", "OscarTestKit"}

CONTINUES = "<!-- continues -->"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)")
IMPORT = re.compile(
    r"^\s*(?:@\w+\s+)*import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?(\w+)", re.M)
MAIN_ATTRIBUTE = re.compile(r"^\s*@main\b", re.M)
TIMEOUT = 180


class Block:
    def __init__(self, path, line, lang, text, continues):
        self.path, self.line, self.lang, self.text, self.continues = path, line, lang, text, continues
        self.errors = []
        self.failed = False  # set by check(): it or a block of its chain failed
        self.note = ""  # how far a manifest was checked

    @property
    def where(self):
        return f"{self.path}:{self.line}"

    @property
    def is_manifest(self):
        return self.text.startswith("// swift-tools-version")


def blocks_of(path):
    """The fenced blocks of a Markdown file, any language, in order. A fence
    may be indented (in a list item): its indentation is taken off its lines."""
    lines = open(path, encoding="utf-8").read().split("\n")
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = len(opening.group(1)), opening.group(2), opening.group(3).lower()
        closing = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
        body, j = [], i + 1
        while j < len(lines) and not closing.match(lines[j]):
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            j += 1
        continues = i > 0 and lines[i - 1].strip() == CONTINUES
        found.append(Block(path, i + 1, lang, "\n".join(body) + "\n", continues))
        i = j + 1
    return found


def chains_of(blocks):
    """Groups a document's Swift blocks: a block marked `<!-- continues -->`
    joins the chain of the Swift block before it."""
    chains = []
    for block in (b for b in blocks if b.lang == "swift"):
        if block.continues:
            if not chains:
                block.errors.append(f"{CONTINUES} but no Swift block before it in {block.path}")
            elif chains[-1][0].is_manifest or block.is_manifest:
                block.errors.append(f"{CONTINUES} joins a Package.swift manifest and Swift code")
            else:
                chains[-1].append(block)
                continue
        chains.append([block])
    return chains


def package_modules():
    """This package's modules that an application cannot import."""
    modules = {os.path.basename(d) for d in glob.glob("Sources/*") if os.path.isdir(d)}
    return (modules | {"OscarTestSupport"}) - PRODUCTS


def check_swift(chain, swiftc_flags, tmp):
    """Type-checks a chain as one file of its own module: a main file, so top-level
    code is allowed, unless it has `@main` (then as a library file)."""
    source, origin = [], []  # origin[n]: the block and Markdown line of line n + 1
    for block in chain:
        for k, line in enumerate(block.text.rstrip("\n").split("\n")):
            source.append(line)
            origin.append((block, block.line + 1 + k))
    forbidden = package_modules()
    for n, line in enumerate(source):
        imported = IMPORT.match(line)
        if imported and imported.group(1) in forbidden:
            block, md_line = origin[n]
            block.errors.append(
                f"{block.path}:{md_line}: imports {imported.group(1)}: an application imports only "
                + " and ".join(sorted(PRODUCTS)) + " of this package")
    if any(b.errors for b in chain):
        return
    file = os.path.join(tmp, "block.swift")
    with open(file, "w", encoding="utf-8") as out:
        out.write("\n".join(source) + "\n")
    text = "\n".join(source)
    command = ["swiftc", *swiftc_flags, "-warnings-as-errors", "-diagnostic-style=llvm", "-module-name", "DocBlock"]
    if MAIN_ATTRIBUTE.search(text):
        command.append("-parse-as-library")
    result = run(command + [file])
    if result.returncode == 0:
        return
    # Each diagnostic and the lines under it go to the block its line is in.
    target = chain[0]
    located = re.compile(re.escape(file) + r":(\d+):(\d+): ")
    for line in result.output.splitlines():
        at = located.match(line)
        if at and 0 < int(at.group(1)) <= len(origin):
            target, md_line = origin[int(at.group(1)) - 1]
            line = f"{target.path}:{md_line}:{at.group(2)}: " + line[at.end():]
        target.errors.append(line)
    if not any(b.errors for b in chain):
        chain[0].errors.append(f"swiftc exited with status {result.returncode}")


def check_manifest(block, tmp):
    """Parses a Package.swift manifest with `swift package dump-package`. When
    every dependency is a path (`.package(path: "../oscar")`), the path is made a
    link to this repository and `swift package show-dependencies` loads the
    package graph, which fails on a product the dependency does not have."""
    app = os.path.join(tmp, "app")
    os.makedirs(app)
    with open(os.path.join(app, "Package.swift"), "w", encoding="utf-8") as out:
        out.write(block.text)
    dumped = run(["swift", "package", "--package-path", app, "dump-package"])
    if dumped.returncode != 0:
        block.errors += manifest_errors(dumped.output, app, block)
        return
    manifest = json.loads(dumped.stdout)
    paths = []
    for dependency in manifest.get("dependencies", []):
        local = dependency.get("fileSystem")
        if not local:
            block.note = ", parsed only: a dependency from a URL or a registry is not fetched"
            return
        paths.append(local[0]["path"])
    for path in paths:
        if not os.path.realpath(path).startswith(os.path.realpath(tmp) + os.sep):
            block.note = f", parsed only: {path} is not beside the package"
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.lexists(path):
            os.symlink(os.getcwd(), path)
    for target in manifest.get("targets", []):
        directory = target.get("path") or os.path.join("Tests" if target["type"] == "test" else "Sources", target["name"])
        os.makedirs(os.path.join(app, directory), exist_ok=True)
        open(os.path.join(app, directory, "main.swift"), "w").close()
    graph = run(["swift", "package", "--package-path", app, "show-dependencies"])
    if graph.returncode != 0:
        block.errors += manifest_errors(graph.output, app, block)
    block.note = ", resolved against this repository"


def manifest_errors(output, app, block):
    manifest = os.path.join(app, "Package.swift")
    errors = []
    for line in output.splitlines():
        at = re.match(re.escape(manifest) + r":(\d+):(\d+): ", line)
        if at:
            line = f"{block.path}:{block.line + int(at.group(1))}:{at.group(2)}: " + line[at.end():]
        errors.append(line.replace(manifest, block.path))
    return [e for e in errors if e.strip()] or ["swift package failed"]


class Result:
    def __init__(self, returncode, stdout, output):
        self.returncode, self.stdout, self.output = returncode, stdout, output


def run(command):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return Result(124, "", f"{command[0]}: no answer within {TIMEOUT} s")
    return Result(done.returncode, done.stdout, done.stderr + done.stdout)


def check(paths, swiftc_flags, out=sys.stdout):
    """Checks the files' Swift blocks, printing one line per block; the blocks."""
    checked = []
    for path in paths:
        for chain in chains_of(blocks_of(path)):
            if not any(b.errors for b in chain):
                with tempfile.TemporaryDirectory(prefix="doc-blocks.") as tmp:
                    if chain[0].is_manifest:
                        check_manifest(chain[0], tmp)
                    else:
                        check_swift(chain, swiftc_flags, tmp)
            failed = next((b for b in chain if b.errors), None)
            for block in chain:
                if block.errors:
                    print(f"{block.where} FAILED", file=out)
                    for error in block.errors:
                        print(f"    {error}", file=out)
                elif failed:
                    print(f"{block.where} FAILED (checked with {failed.where}, which fails)", file=out)
                else:
                    kind = f" (Package.swift{block.note})" if block.is_manifest else ""
                    joined = f" (with {chain[0].where})" if block is not chain[0] else ""
                    print(f"{block.where} ok{kind}{joined}", file=out)
                block.failed = failed is not None
            checked += chain
            out.flush()
    return checked


SELF_TEST = """# Self-test

```swift
import Oscar

struct Ping: Message {}
```

<!-- continues -->
```swift
let ping = Ping()  // uses the block above
```

```sh
this is not Swift, and not compiled
```

- In a list:

  ```swift
  import Oscar

  let count: Int = "three"
  ```

```swift
import OscarRuntime
```

```swift
// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "App",
    dependencies: [.package(path: "../oscar")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "NoSuchProduct", package: "oscar")])]
)
```
"""


def self_test(swiftc_flags):
    """The checker passes good blocks and fails a type error (at its line in the
    Markdown), an import of a module that is not a product, and a manifest that
    names a product Oscar does not have."""
    with tempfile.TemporaryDirectory(prefix="doc-blocks-self-test.") as tmp:
        path = os.path.join(tmp, "self-test.md")
        with open(path, "w", encoding="utf-8") as out:
            out.write(SELF_TEST)
        with open(os.path.join(tmp, "output"), "w+", encoding="utf-8") as output:
            blocks = check([path], swiftc_flags, out=output)
            output.seek(0)
            printed = output.read()
    got = [(b.line, b.failed) for b in blocks]
    want = [(3, False), (10, False), (20, True), (26, True), (30, True)]
    if got != want or f"{path}:23:18: error: cannot convert" not in printed or "NoSuchProduct" not in printed:
        sys.stdout.write(printed)
        print(f"doc-blocks: self-test: expected (line, failed) {want}, got {got}, with the errors above")
        return False
    print("doc-blocks: self-test: a type error, an import of an inner module and a wrong product fail; good blocks pass")
    return True


def main(argv):
    separator = argv.index("--") if "--" in argv else len(argv)
    arguments, swiftc_flags = argv[:separator], argv[separator + 1:]
    if "--self-test" in arguments:
        return 0 if self_test(swiftc_flags) else 1
    paths = arguments or [p for pattern in DOCS for p in sorted(glob.glob(pattern, recursive=True))]
    blocks = check(paths, swiftc_flags)
    failed = [b for b in blocks if b.failed]
    print(f"doc-blocks: {len(blocks)} Swift blocks in {len(paths)} files, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
