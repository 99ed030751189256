#!/usr/bin/env python3
"""Fail when the crate's file modules import each other in a cycle (`./dev test` runs it).

Every `src/**/*.rs` file is a module; an edge is a `crate::a::b` or `super::x` path (including
`use crate::{a::{b, c}}` groups) resolved to the longest existing file module. Test code
(`#[cfg(test)]` and after) and comments are ignored; a `mod.rs` declaring its children is not
an edge. Prints each cycle (strongly connected component) and exits 1 if there is one.
"""

import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
IDENT = r"[a-z_][a-z0-9_]*"


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


def main():
    files = modules()

    def resolve(parts):
        for i in range(len(parts), 0, -1):
            if tuple(parts[:i]) in files:
                return tuple(parts[:i])
        return None

    edges = collections.defaultdict(set)
    for mod, path in files.items():
        text = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
        text = re.sub(r"//[^\n]*", "", text)
        parent = list(mod[:-1])

        def add(parts):
            t = resolve(parts)
            if t and t != mod:
                edges[mod].add(t)

        for m in re.finditer(rf"crate::((?:{IDENT}::)*{IDENT})(?![a-z0-9_]|::\{{)", text):
            add(m.group(1).split("::"))
        for m in re.finditer(rf"super::((?:{IDENT}::)*{IDENT})(?![a-z0-9_]|::\{{)", text):
            add(parent + m.group(1).split("::"))
        for m in re.finditer(rf"(crate|super)::((?:{IDENT}::)*)\{{(.*?)\}};", text, re.S):
            prefix = ([] if m.group(1) == "crate" else parent) + [x for x in m.group(2).split("::") if x]
            depth, cur, items = 0, "", []
            for ch in m.group(3):
                depth += ch == "{"
                depth -= ch == "}"
                if ch == "," and depth == 0:
                    items.append(cur)
                    cur = ""
                else:
                    cur += ch
            items.append(cur)
            for it in items:
                head = re.match(rf"({IDENT}(?:::{IDENT})*)", it.strip())
                if not head:
                    continue
                h = prefix + head.group(1).split("::")
                sub = re.search(r"::\{(.*)\}", it, re.S)
                if sub:
                    for x in re.findall(IDENT, sub.group(1)):
                        add(h + [x])
                else:
                    add(h)

    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]
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
                cycles.append(sorted("/".join(x) or "lib" for x in comp))

    for v in list(files):
        if v not in index:
            visit(v)
    for c in cycles:
        print("import cycle between modules:", " ".join(c))
        for a in c:
            ka = tuple(a.split("/")) if a != "lib" else ()
            print("   ", a, "->", ", ".join(sorted("/".join(x) for x in edges[ka] if "/".join(x) in c)))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
