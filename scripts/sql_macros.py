#!/usr/bin/env python3
"""The compile-time SQL check's other half (`./dev test` runs it after the tenant filter check).

Static SQL in `src/` is written with sqlx's query macros (`sqlx::query!`, `query_as!`,
`query_scalar!`): each statement is described by Postgres at compile time and checked against
the Rust types around it (`./dev sqlx prepare`, `.sqlx/`). The runtime-checked functions
(`sqlx::query(…)`, `query_as(…)`, `query_scalar(…)`, `query_with(…)`) are for statements whose
text is only known at run time: a variable number of conditions or binds, identifiers (DDL,
GRANT), benchmark scaffolding built from its options. Each such call says why with the comment
`// dynamic SQL: <reason>` on one of the three lines above it (or on its own line); a call
without one fails this check.

`--list` prints every dynamic call with its reason, and the counts.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "src"))
CALL = re.compile(r"sqlx::(query|query_as|query_scalar|query_with|query_as_with|query_scalar_with)(::<[^>]*>)?\(")
MACRO = re.compile(r"sqlx::(query|query_as|query_scalar)(_unchecked)?!\(")
MARKER = re.compile(r"//\s*dynamic SQL:\s*\S")


def main():
    listing = "--list" in sys.argv[1:]
    bad, dynamic, macros = [], [], 0
    for root, _, files in os.walk(SRC):
        for name in sorted(files):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            lines = open(path, encoding="utf-8").read().split("\n")
            rel = os.path.relpath(path, os.path.dirname(SRC))
            for i, line in enumerate(lines):
                code = line.split("//", 1)[0]
                macros += len(MACRO.findall(code))
                if "_unchecked!(" in code and MACRO.search(code):
                    bad.append(f"{rel}:{i + 1}: an unchecked query macro; use the checked one")
                if not CALL.search(code):
                    continue
                reason = next((MARKER.search(l) for l in lines[max(0, i - 3) : i + 1] if MARKER.search(l)), None)
                if reason is None:
                    bad.append(f"{rel}:{i + 1}: a runtime-checked SQL call without `// dynamic SQL: <reason>`")
                else:
                    dynamic.append(f"{rel}:{i + 1}: {reason.string[reason.end() - 1:].strip()}")
    if listing:
        print("\n".join(dynamic))
    print(f"sql_macros: {macros} checked statements (query macros), {len(dynamic)} dynamic calls with a reason", file=sys.stderr)
    if bad:
        print("\n".join(bad), file=sys.stderr)
        print(
            f"{len(bad)} problem(s): write static SQL with sqlx::query!/query_as!/query_scalar! (then ./dev sqlx prepare), "
            "or say why a statement must be built at run time (`// dynamic SQL: <reason>`)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
