#!/usr/bin/env python3
"""Fails when a function in src/ or cli/ is longer than a limit (default 120 lines, the body's braces
included); data tables (a function or initializer that is mostly string literals, e.g. ImageNet's class
names) are exempt. python3 standard library only.

  python3 scripts/check_function_length.py [--max 120] [--list N] [DIR...]

A C++ reader of its own, not a compiler: comments, string and character literals (raw strings too) are
blanked first; then every brace block is classified by the text before it: namespace / class / struct /
union / enum / extern blocks hold functions; a block opened where a function may stand, after a text with
a parameter list, is a function (lambdas and control blocks inside it count as its lines). --list N prints
the N longest functions as well.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b|extern\s*\"")


def blank(text):
    """Comments and literals replaced by spaces (newlines kept), and the count of literal characters per line."""
    out, lit = [], {}
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            seg = text[i:j]
            out.append(re.sub(r"[^\n]", " ", seg))
            line += seg.count("\n")
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            seg = text[i:j]
            out.append('""' + re.sub(r"[^\n]", " ", seg[2:]))
            for k, part in enumerate(seg.split("\n")):
                lit[line + k] = lit.get(line + k, 0) + len(part)
            line += seg.count("\n")
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(c)   # a digit separator (1'000)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            lit[line] = lit.get(line, 0) + (j - i)
            i = j
        else:
            if c == "\n":
                line += 1
            out.append(c)
            i += 1
    return "".join(out), lit


def functions(path):
    """(name, first line, last line, literal share) of every function defined in path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text, lit = blank(f.read())
    # Preprocessor lines (with their continuations) are not code around a brace.
    text = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = []
    stack = []            # (kind, line, header) per open brace
    header_start = 0      # where the text before the next brace starts
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";":
            if not stack or stack[-1][0] == "container":
                header_start = i + 1
        elif c == "{":
            header = text[header_start:i]
            in_function = any(k == "function" for k, _, _ in stack)
            if in_function:
                kind = "inner"
            elif CONTAINER.search(header) and "(" not in header.split("{")[-1].split("=")[0]:
                kind = "container"
            elif "(" in header and ")" in header and not header.rstrip().endswith("="):
                kind = "function"
            else:
                kind = "inner"     # an initializer or an aggregate at namespace scope
            stack.append((kind, line, " ".join(header.split())))
            header_start = i + 1
        elif c == "}":
            if not stack:
                continue
            kind, first, header = stack.pop()
            if kind == "function":
                span = range(first, line + 1)
                chars = sum(lit.get(k, 0) for k in span)
                total = max(1, sum(len(s) for s in text.splitlines()[first - 1:line]))
                name = [x for x in re.findall(r"([~\w:]+(?:<[^()]*>)?)\s*\(", header)
                        if x not in ("if", "for", "while", "switch", "return", "sizeof", "decltype", "alignas")]
                found.append((name[0] if name else header[-60:], first, line, chars / total))
            if not stack or stack[-1][0] == "container":
                header_start = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*", default=["src", "cli"])
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--list", type=int, default=0, metavar="N")
    a = ap.parse_args()
    rows = []
    for d in a.dirs:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for fn in sorted(files):
                if fn.endswith((".cpp", ".h", ".cc", ".hpp")):
                    p = os.path.join(base, fn)
                    for name, first, last, share in functions(p):
                        rows.append((last - first + 1, os.path.relpath(p, ROOT), first, name, share))
    rows.sort(reverse=True)
    for n, p, first, name, share in rows[:a.list]:
        print(f"{n:5d}  {p}:{first}  {name}{'  (data table)' if share > 0.5 else ''}")
    bad = [r for r in rows if r[0] > a.max and r[4] <= 0.5]
    for n, p, first, name, _ in bad:
        print(f"check_function_length: {p}:{first}: {name} is {n} lines, expected at most {a.max}", file=sys.stderr)
    if not bad:
        print(f"check_function_length: {len(rows)} functions in {', '.join(a.dirs)}, none over {a.max} lines "
              f"(data tables excepted)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
