#!/usr/bin/env python3
"""The crate's structure check (`./dev test` runs it). Fails when:

1. file modules import each other in a cycle;
2. top-level folders (features: `agents`, `journal`, …) import each other in a cycle, or a
   folder imports one that `docs/ARCHITECTURE.md` does not allow it to (the table under
   "## Allowed dependencies", one line per folder: `| folder | may import |`);
3. a source file has more than MAX_LINES lines before its tests (`#[cfg(test)]`).

Every `src/**/*.rs` file is a module. An edge is a path that names another module:
`crate::a::b` and `super::x` (also inside `use crate::{a::{b, c}}` groups and with `as`
renames), a name brought in by `use` and then used as a path (`use crate::journal;` …
`journal::pages::x`, `use crate::journal as j;` … `j::x`), resolved to the longest existing
file module; and the `crate::…` calls of the askama templates a module renders
(`#[template(path = "…")]`, following `extends`, `include` and `import`). Test code
(`#[cfg(test)]` and after) and comments are ignored; a `mod.rs` declaring its children is not
an edge.

`state` is the service container: features import it, and it imports their service files, so
it takes no part in folder cycles (rule 1 still holds for its files).

Known debts (edges that break rule 1 or 2 today, each with what removes it) are listed in the
same document under "## Known dependency debts" as `- folder a -> b: reason` or
`- module a/x -> b: reason`; the check fails when a debt is gone (so the list stays true) or
when a new violation appears. `--graph` prints the folder graph.
"""

import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
ROOT = os.path.join(REPO, "src")
TEMPLATES = os.path.join(REPO, "templates")
ARCH = os.path.join(REPO, "docs", "ARCHITECTURE.md")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MAX_LINES = 800


def modules():
    files = {}
    for dirpath, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if rel[-1] == "mod":
                    rel = rel[:-1]
                if rel in (["lib"], ["main"]):
                    rel = []
                files[tuple(rel)] = path
    return files


def split_top(s, sep=","):
    depth, cur, out = 0, "", []
    for ch in s:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def use_items(prefix, body):
    """(path, bound name) of every item of a `use` tree below `prefix`."""
    out = []
    for it in split_top(body):
        it = it.strip()
        if not it:
            continue
        m = re.match(rf"((?:{IDENT}::)*)\{{(.*)\}}$", it, re.S)
        if m:
            sub = prefix + [x for x in m.group(1).split("::") if x]
            out += use_items(sub, m.group(2))
            continue
        m = re.match(rf"({IDENT}(?:::{IDENT})*)(?:\s+as\s+({IDENT}))?$", it, re.S)
        if not m:
            continue
        parts = prefix + m.group(1).split("::")
        if parts and parts[-1] == "self":
            parts = parts[:-1]
        if not parts:
            continue
        out.append((parts, m.group(2) or parts[-1]))
    return out


def template_paths(name, seen):
    """A template and those it extends, includes or imports (transitively)."""
    path = os.path.join(TEMPLATES, name)
    if name in seen or not os.path.isfile(path):
        return
    seen.add(name)
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r"\{%-?\s*(?:extends|include|import)\s+\"([^\"]+)\"", text):
        template_paths(m.group(1), seen)


def matching_brace(text, at):
    """The index just past the `}` closing the `{` at `at` (strings and chars skipped)."""
    depth, i, n = 0, at, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def without_tests(text):
    """`text` without its test items: every item under `#[cfg(test)]` (a `mod tests { … }`,
    a `use`, a function), however far into the file it stands. Comments go first."""
    text = re.sub(r"//[^\n]*", "", text)
    out, at = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < at:
            continue
        out.append(text[at : m.start()])
        rest = m.end()
        brace, semi = text.find("{", rest), text.find(";", rest)
        if semi != -1 and (brace == -1 or semi < brace):
            at = semi + 1
        elif brace != -1:
            at = matching_brace(text, brace)
        else:
            at = len(text)
    out.append(text[at:])
    return "".join(out)


def test_modules(files):
    """File modules declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`): test code."""
    out = set()
    for mod, path in files.items():
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(rf"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+({IDENT})\s*;", text):
            out.add(mod + (m.group(1),))
    return out


def edges_of(files):
    def resolve(parts):
        for i in range(len(parts), 0, -1):
            if tuple(parts[:i]) in files:
                return tuple(parts[:i])
        return None

    edges = collections.defaultdict(set)
    for mod, path in files.items():
        text = without_tests(open(path, encoding="utf-8").read())
        parent = list(mod[:-1])
        me = list(mod)

        def add(parts):
            t = resolve(parts)
            if t and t != mod:
                edges[mod].add(t)

        def absolute(head, rest):
            if head == "crate":
                return rest
            if head == "super":
                return parent + rest
            if head == "self":
                return me + rest
            return None

        # Names bound by `use` (modules among them): `use crate::journal;`, `… as j;`, groups.
        bound = {}
        for m in re.finditer(r"\buse\s+(crate|super|self)::(.*?);", text, re.S):
            body = m.group(2)
            base = absolute(m.group(1), [])
            for parts, name in use_items(base, body):
                add(parts)
                if name != "_" and name != "*":
                    bound[name] = parts
        # Paths written out in full.
        for m in re.finditer(rf"\b(crate|super)::((?:{IDENT}::)*{IDENT})(?![A-Za-z0-9_]|::\{{)", text):
            add(absolute(m.group(1), m.group(2).split("::")))
        # Paths through a bound name: `journal::pages::x`, `j::x`.
        for name, parts in bound.items():
            for m in re.finditer(rf"(?<![A-Za-z0-9_:]){re.escape(name)}::((?:{IDENT}::)*{IDENT})", text):
                add(parts + m.group(1).split("::"))
        # The templates this module renders: their `crate::…` calls are this module's imports.
        seen = set()
        for m in re.finditer(r"#\[template\([^)]*path\s*=\s*\"([^\"]+)\"", text):
            template_paths(m.group(1), seen)
        for name in seen:
            t = open(os.path.join(TEMPLATES, name), encoding="utf-8").read()
            for m in re.finditer(rf"\bcrate::((?:{IDENT}::)*{IDENT})", t):
                add(m.group(1).split("::"))
    return edges


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(nodes):
        if v not in index:
            visit(v)
    return out


def architecture():
    """The allowed folder dependencies and the known debts, from docs/ARCHITECTURE.md."""
    text = open(ARCH, encoding="utf-8").read()
    allowed, debts = {}, {}
    sec = re.search(r"^## Allowed dependencies\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not sec:
        sys.exit("docs/ARCHITECTURE.md has no '## Allowed dependencies' section")
    for line in sec.group(1).splitlines():
        m = re.match(r"\|\s*`?([a-z_]+)`?\s*\|(.*)\|\s*$", line)
        if not m or m.group(1) in ("folder",):
            continue
        allowed[m.group(1)] = set(re.findall(r"`([a-z_]+)`", m.group(2)))
    mdebts = {}
    sec = re.search(r"^## Known dependency debts\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    for line in (sec.group(1).splitlines() if sec else []):
        m = re.match(r"-\s*(folder|module)\s+`?([a-z_/]+)`?\s*->\s*`?([a-z_/]+)`?\s*:", line)
        if m:
            (debts if m.group(1) == "folder" else mdebts)[(m.group(2), m.group(3))] = line
    return allowed, debts, mdebts


def folder(mod):
    return mod[0] if mod else "lib"


def main():
    files = modules()
    for t in test_modules(files):
        files.pop(t, None)
    edges = edges_of(files)
    failed = False
    allowed, debts, mdebts = ({}, {}, {}) if "--graph" in sys.argv else architecture()

    # 1. File modules (without the known debts, each of which must still exist).
    name = lambda m: "/".join(m) or "lib"  # noqa: E731
    present = {(name(a), name(b)) for a, bs in edges.items() for b in bs}
    for d in sorted(set(mdebts) - present):
        failed = True
        print(f"the known debt module {d[0]} -> {d[1]} is gone: remove it from docs/ARCHITECTURE.md")
    medges = collections.defaultdict(set, {a: {b for b in bs if (name(a), name(b)) not in mdebts} for a, bs in edges.items()})
    for comp in sccs(list(files), medges):
        failed = True
        names = sorted("/".join(x) or "lib" for x in comp)
        print("import cycle between modules:", " ".join(names))
        for a in names:
            ka = tuple(a.split("/")) if a != "lib" else ()
            print("   ", a, "->", ", ".join(sorted("/".join(x) for x in medges[ka] if "/".join(x) in names)))

    # 2. Folders.
    fedges = collections.defaultdict(set)
    why = {}
    for a, targets in edges.items():
        for b in targets:
            fa, fb = folder(a), folder(b)
            if fa != fb and fa != "lib":
                fedges[fa].add(fb)
                why.setdefault((fa, fb), ("/".join(a), "/".join(b)))
    if "--graph" in sys.argv:
        for f in sorted(fedges):
            print(f, "->", ", ".join(sorted(fedges[f])))
        return 0
    violations = set()
    for fa in sorted(fedges):
        if fa not in allowed:
            print(f"folder {fa}/ is not in docs/ARCHITECTURE.md's allowed dependencies")
            failed = True
            continue
        for fb in sorted(fedges[fa]):
            if fb not in allowed[fa]:
                violations.add((fa, fb))
    for v in sorted(violations - set(debts)):
        failed = True
        a, b = why[v]
        print(f"{v[0]}/ imports {v[1]}/, which docs/ARCHITECTURE.md does not allow (first seen: {a} -> {b})")
    for d in sorted(set(debts) - violations):
        failed = True
        print(f"the known debt {d[0]} -> {d[1]} is gone: remove it from docs/ARCHITECTURE.md")
    graph = collections.defaultdict(
        set, {a: {b for b in bs if (a, b) not in debts and b != "state"} for a, bs in fedges.items() if a != "state"}
    )
    for comp in sccs(list(graph), graph):
        failed = True
        print("import cycle between folders:", " ".join(sorted(comp)))
        for a in sorted(comp):
            for b in sorted(graph[a] & set(comp)):
                print(f"    {a} -> {b} (e.g. {why[(a, b)][0]} -> {why[(a, b)][1]})")

    # 3. Long files: every file under src/ and tests/, whole (tests included).
    for top in ("src", "tests"):
        for dirpath, _, names in os.walk(os.path.join(REPO, top)):
            for n in sorted(names):
                if not n.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, n)
                lines = len(open(path, encoding="utf-8").read().splitlines())
                if lines > MAX_LINES:
                    failed = True
                    print(f"{os.path.relpath(path, REPO)} has {lines} lines (more than {MAX_LINES}): split it")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
