#!/usr/bin/env python3
"""The tenant filter check (`./dev test` runs it after the structure check; issue 29).

Row-level security is the fail-closed net for tenant isolation; on top of it every statement on
a tenant table names its tenant explicitly, so the planner can prune by tenant and use the
tenant-prefixed indexes (and so a statement keeps its meaning on an engine that shards by
tenant). This script finds every SQL string in `src/` and fails when a statement reads, changes
or deletes rows of a tenant table without an explicit tenant filter and without the marker that
says it spans tenants on purpose. An anchor is `tenant_id = $n` (or `= any($n)`, or a `{}`
placeholder that `Binds::push` fills with `$n`).

Tenant tables: every `create table` in `migrations/` with a `tenant_id` column, and every view over one.

SQL strings: every Rust string literal in `src/` (plain, raw, inside `format!`, `const … SQL`,
`sqlx::query*` calls) that reads like a statement (`select … from`, `update … set`,
`delete from`, `insert into`). Strings that do not name a tenant table are ignored.

A statement passes when each tenant table it names in `from`, `join`, `update`, `delete from`
or `using` (a plain `insert … values` needs nothing: it writes its own `tenant_id`) is
filtered on its tenant:

- with an alias (`evidence_block b`): `b.tenant_id` appears in a comparison
  (`b.tenant_id = $2`, `b.tenant_id = s.tenant_id`, `= b.tenant_id`);
- without one: `<table>.tenant_id` in a comparison, or an unqualified `tenant_id =` /
  `tenant_id = any(` — at least as many of them as unaliased tenant tables in the string.

A statement whose conditions are spliced in from a function (the search's `Filters::block_sql`)
says so with `// tenant filter: <function>` on one of the three lines above it; the check then
requires that function to build a `tenant_id = {…}` condition.

A statement that must span tenants (the tenants of a user, an invitation looked up by its link,
the owner's workers and purge) carries `-- all tenants: <reason>` in its SQL, or the Rust
comment `// all tenants: <reason>` on one of the three lines above the string or on its first
line. A reason is required.

`--list` prints every checked statement (file:line, tables, how it passes) and the counts.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, ".."))
SRC = os.path.join(REPO, "src")
MIGRATIONS = os.path.join(REPO, "migrations")
MARKER = re.compile(r"all tenants:\s*\S")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# Words that can follow a table name and are not its alias.
NOT_ALIAS = {
    "where", "on", "using", "join", "left", "right", "inner", "outer", "full", "cross", "natural",
    "set", "group", "order", "limit", "offset", "for", "returning", "as", "union", "except",
    "intersect", "having", "window", "values", "select", "lateral", "tablesample", "only", "and",
    "or", "not", "into", "from", "with", "default", "fetch", "do", "conflict",
}


def tenant_tables():
    tables = set()
    for name in sorted(os.listdir(MIGRATIONS)):
        if not name.endswith(".sql"):
            continue
        text = open(os.path.join(MIGRATIONS, name), encoding="utf-8").read()
        text = re.sub(r"--[^\n]*", "", text)
        for m in re.finditer(r"create table\s+(?:if not exists\s+)?([A-Za-z_][\w.]*)\s*\((.*?)\n\);", text, re.S | re.I):
            if re.search(r"^\s*tenant_id\s", m.group(2), re.M):
                tables.add(m.group(1).split(".")[-1])
        for m in re.finditer(r"drop table\s+(?:if exists\s+)?([A-Za-z_][\w.]*)", text, re.I):
            tables.discard(m.group(1).split(".")[-1])
    # Views over a tenant table (`readable_source`) are read like it: the same explicit filter.
    for name in sorted(os.listdir(MIGRATIONS)):
        if name.endswith(".sql"):
            text = re.sub(r"--[^\n]*", "", open(os.path.join(MIGRATIONS, name), encoding="utf-8").read())
            for m in re.finditer(r"create (?:or replace )?view\s+([A-Za-z_][\w.]*).*?\bfrom\s+([A-Za-z_][\w.]*)", text, re.S | re.I):
                if m.group(2).split(".")[-1] in tables:
                    tables.add(m.group(1).split(".")[-1])
    return tables


def rust_strings(text):
    """Yield (start offset, value) of each string literal, skipping comments and char literals."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 40]) and not re.match(r"[A-Za-z0-9_]", text[i - 1] if i else " "):
            m = re.match(r'r(#*)"', text[i:])
            hashes = m.group(1)
            start = i + m.end()
            end = text.find('"' + hashes, start)
            yield i, text[start:end]
            i = end + 1 + len(hashes)
        elif c == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    nxt = text[j + 1]
                    if nxt == "\n":
                        j += 2
                        while j < n and text[j] in " \t\n":
                            j += 1
                        continue
                    buf.append({"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(nxt, " "))
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            yield i, "".join(buf)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a): skip either.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            i += m.end() if m else 1
        else:
            i += 1


STATEMENT = re.compile(r"\b(select\b[\s\S]*\bfrom|update\s+\w+[\s\S]*\bset\b|delete\s+from|insert\s+into)\b", re.I)


def check(sql, tables):
    """(names of tenant tables referenced, list of problems) for one SQL string."""
    body = re.sub(r"--[^\n]*", " ", sql)
    body = re.sub(r"'(?:[^']|'')*'", "''", body)  # string constants can hold any word
    low = body.lower()
    refs = []  # (table, alias or None)
    seen = set()  # where each table name starts (`delete from t` also reads as `from t`)
    # A lookahead, so that `, col from table` does not swallow the `from` as an alias.
    for m in re.finditer(r"(?=(\b(?:from|join|update|delete\s+from|using)|,)\s+(" + IDENT + r")(?:\s+(?:as\s+)?(" + IDENT + r"))?)", low):
        table = m.group(2)
        if table not in tables or m.start(2) in seen:
            continue
        seen.add(m.start(2))
        if m.group(1) == ",":
            # `, table` counts only inside a from list: the previous keyword must be from/join.
            before = low[: m.start()]
            kw = re.findall(r"\b(from|join|select|where|on|set|values|returning|group|order)\b", before)
            if not kw or kw[-1] not in ("from", "join"):
                continue
        alias = m.group(3)
        if alias in NOT_ALIAS:
            alias = None
        refs.append((table, alias))
    if not refs:
        return [], []
    problems = []
    cmp = r"(?:=|<>|\bin\b|\bis\b)"
    unaliased = 0
    for table, alias in refs:
        if alias:
            q = re.escape(alias)
            if not re.search(r"\b" + q + r"\.tenant_id\s*" + cmp + r"|" + cmp + r"\s*(?:any\s*\(\s*)?" + q + r"\.tenant_id\b", low):
                problems.append(f"{table} {alias}: no {alias}.tenant_id filter")
        else:
            q = re.escape(table)
            if re.search(r"\b" + q + r"\.tenant_id\s*" + cmp, low):
                continue
            unaliased += 1
    if unaliased:
        plain = len(re.findall(r"(?<![.\w])tenant_id\s*(?:=|\bin\b)", low)) + len(re.findall(r"=\s*(?:any\s*\(\s*)?tenant_id\b", low))
        if plain < unaliased:
            names = ", ".join(t for t, a in refs if not a)
            problems.append(f"{names}: {unaliased} unaliased tenant table(s), {plain} tenant_id filter(s)")
    anchor = r"tenant_id\s*=\s*(?:any\s*\(\s*)?(?:\$\d+|\{\w*\})|(?:\$\d+|\{\w*\})\s*=\s*(?:\w+\.)?tenant_id\b"
    if not re.search(anchor, low):
        problems.append("no bound `tenant_id = $n` (a join condition on tenant_id needs one)")
    return sorted({t for t, _ in refs}), problems


_SOURCES = None


def spliced_filter_binds_tenant(name):
    """True when a function `name` in `src/` builds a `tenant_id = {…}` / `$n` condition (the
    marker `// tenant filter: name` says the statement's tenant filter is spliced in from it)."""
    global _SOURCES
    if _SOURCES is None:
        _SOURCES = []
        for dirpath, _, files in os.walk(SRC):
            _SOURCES += [open(os.path.join(dirpath, f), encoding="utf-8").read() for f in files if f.endswith(".rs")]
    for text in _SOURCES:
        for m in re.finditer(r"\bfn\s+" + re.escape(name) + r"\b", text):
            end = re.search(r"\n(\s*)\}\n", text[m.end():])
            body = text[m.start(): m.end() + (end.end() if end else len(text))]
            if re.search(r"tenant_id\s*=\s*(\{\w*\}|\$\d+)", body):
                return True
    return False


def main():
    listing = "--list" in sys.argv[1:]
    tables = tenant_tables()
    checked, marked, via, failures = 0, 0, 0, []
    for dirpath, _, files in os.walk(SRC):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, REPO)
            text = open(path, encoding="utf-8").read()
            lines = text.split("\n")
            literals = list(rust_strings(text))
            consts = {}
            for start, value in literals:
                m = re.search(r"const\s+(" + IDENT + r")\s*:\s*&(?:'static\s+)?str\s*=\s*$", text[max(0, start - 200): start])
                if m:
                    consts[m.group(1)] = (start, value)
            # A const used only as `{NAME}` inside other strings is a fragment: checked where it is
            # spliced in, not alone.
            fragments = set()
            for name in consts:
                spliced = sum(v.count("{" + name + "}") for _, v in literals)
                bare = len(re.findall(r"(?<![{\w])" + name + r"(?![}\w])", text)) - 1
                if spliced and bare <= 0:
                    fragments.add(consts[name][0])

            def expand(value, depth=0):
                if depth > 5:
                    return value
                return re.sub(r"\{(" + IDENT + r")\}", lambda m: expand(consts[m.group(1)][1], depth + 1) if m.group(1) in consts else m.group(0), value)

            for start, value in literals:
                if start in fragments:
                    continue
                value = expand(value)
                if not STATEMENT.search(value):
                    continue
                names, problems = check(value, tables)
                if not names:
                    continue
                line = text.count("\n", 0, start) + 1
                context = "\n".join(lines[max(0, line - 4): line])
                is_marked = bool(MARKER.search(value) or re.search(r"//[^\n]*" + MARKER.pattern, context))
                spliced = re.search(r"//[^\n]*tenant filter:\s*(" + IDENT + r")", context)
                if problems and not is_marked and spliced:
                    if spliced_filter_binds_tenant(spliced.group(1)):
                        problems = []
                        via += 1
                    else:
                        problems.append(f"`tenant filter: {spliced.group(1)}` names no function that binds `tenant_id = {{…}}`")
                checked += 1
                if is_marked:
                    marked += 1
                how = "all tenants (marked)" if is_marked else ("FAILS: " + "; ".join(problems) if problems else "filtered")
                if listing:
                    print(f"{rel}:{line}: {', '.join(names)}: {how}")
                if problems and not is_marked:
                    failures.append(f"{rel}:{line}: {'; '.join(problems)}")
    if listing or failures:
        print(f"{checked} statements on {len(tables)} tenant tables; {checked - marked} filtered by tenant ({via} of them through a spliced filter), {marked} marked 'all tenants'; {len(failures)} failing")
    if failures:
        print("\nStatements on a tenant table without an explicit tenant filter (add `tenant_id = $n`, "
              "or the marker `-- all tenants: <reason>` when it must span tenants):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
