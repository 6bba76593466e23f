#!/usr/bin/env python3
"""fnlen.py -- list C functions longer than a limit (issue 13: none over 120).

A brace-matching scan, not a parser: comments, strings and character
literals are blanked first, preprocessor lines are skipped, and a '{' at
file scope whose previous significant character is ')' opens a function
(struct, enum and initialiser braces follow a name or '='). C, C++ and
CUDA sources (.c, .h, .cu, .cuh): namespace and extern "C" blocks are
file scope. A function's
length runs from the line holding its name to the line of its closing
brace, inclusive, so the signature counts.

Usage: fnlen.py [--max N] [--list] [--allow PATH:NAME]... DIR_OR_FILE...
Exit status 1 when any function is longer than N (default 120), listing
each as path:line name length; --list prints every function's length.
--allow names a known offender (path as given, then the function) that is
listed as "allowed" instead of failing: a tracked exception, each with
its reason where it is passed.
"""
import argparse
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def blank(src):
    """src with comments, strings, char literals and preprocessor lines
    replaced by spaces (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # a directive, with its backslash continuations
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        line_start = False
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", src[i + 1:j - 1]) + c)
            i = j
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def functions(src):
    """(name, first_line, last_line) of every file-scope function body; the
    bodies of namespace and extern "C" blocks count as file scope (C++ and
    CUDA sources)."""
    text = blank(src)
    found = []
    stack = []  # per open brace: "ns" (a transparent scope), "fn", "other", "in"
    start = None  # (name, line) of the function being scanned
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            if all(k == "ns" for k in stack):
                if opens_scope(text, i):
                    stack.append("ns")
                else:
                    start = header(text, i)
                    stack.append("fn" if start is not None else "other")
            else:
                stack.append("in")
        elif c == "}" and stack:
            if stack.pop() == "fn" and start is not None:
                found.append((start[0], start[1], line))
                start = None
    return found


def word_before(text, j):
    """(identifier ending at or before index j after spaces, its start)."""
    while j >= 0 and text[j].isspace():
        j -= 1
    end = j + 1
    while j >= 0 and (text[j].isalnum() or text[j] == "_"):
        j -= 1
    return text[j + 1:end], j


def opens_scope(text, brace):
    """1 when the '{' at index brace opens `namespace [name] {` or
    `extern "C" {` (its string blanked to spaces by blank())."""
    j = brace - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    if j >= 0 and text[j] == '"':
        k = text.rfind('"', 0, j)
        return k > 0 and word_before(text, k - 1)[0] == "extern"
    w1, k = word_before(text, j)
    return w1 == "namespace" or (w1 != "" and word_before(text, k)[0] == "namespace")


def header(text, brace):
    """(name, line) when the '{' at index brace opens a function, else None:
    the previous significant character must be ')' (K&R-style and
    attribute-suffixed definitions are not used in this tree)."""
    j = brace - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    if j < 0 or text[j] != ")":
        return None
    # walk back to the '(' matching the parameter list's ')'
    level = 0
    while j >= 0:
        if text[j] == ")":
            level += 1
        elif text[j] == "(":
            level -= 1
            if level == 0:
                break
        j -= 1
    k = j - 1
    while k >= 0 and text[k].isspace():
        k -= 1
    end = k + 1
    while k >= 0 and (text[k].isalnum() or text[k] == "_"):
        k -= 1
    name = text[k + 1:end]
    if not IDENT.fullmatch(name or "-"):
        return None
    return name, text.count("\n", 0, k + 1) + 1


def sources(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".c", ".h", ".cu", ".cuh")):
                    yield os.path.join(root, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--allow", action="append", default=[])
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    over = 0
    allowed_over = 0
    count = 0
    for path in sources(a.paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            src = f.read()
        for name, first, last in functions(src):
            length = last - first + 1
            count += 1
            allowed = f"{path}:{name}" in a.allow
            if a.list or length > a.max:
                note = " (allowed)" if allowed and length > a.max else ""
                print(f"{path}:{first} {name} {length}{note}")
            over += length > a.max and not allowed
            allowed_over += length > a.max and allowed
    print(f"fnlen: {count} functions, {over} over {a.max} lines"
          f" ({allowed_over} more allowed by --allow)", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
