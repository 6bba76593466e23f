#!/usr/bin/env python3
"""it_include_graph.py -- the layers hold: no #include from a lower layer to
a higher one, no circle across directories, and docs/design.md's picture of
the layers is this file's table (issue 26, "Done when").

Every `#include "..."` of the tree's C, C++ and CUDA files is resolved as the
compiler would (beside the including file, then the include directories of
CMakeLists.txt) and mapped to a layer by LAYERS below. It fails, naming the
file, line and include, on:
  - an include into a higher layer;
  - a circle of directories (a -> b -> ... -> a, DIRS below: the include
    graph's edges between directories, whatever the layers say);
  - a file in no layer, or a quoted include that resolves nowhere (a new
    directory needs its row here and in the picture);
  - a picture in docs/design.md ("Layers") that differs from LAYERS.
First it shows that it can fail: a synthetic tree with an upward include and
a circle must be reported, and a clean one must not.

Usage: it_include_graph.py [--graph] (--graph prints the directory edges).
Standard library only; reads ATTUNE_SOURCE_DIR (default: this file's
repository)."""
import os
import re
import sys
import tempfile

# Layers, lowest first: a file may include its own layer and those below.
# A directory is the longest prefix that matches a path; kernels/cpu/ and
# kernels/cuda/ are kernels. docs/design.md draws the same table.
LAYERS = [
    ("base", ["common/", "lazy/", "client/"]),
    ("kernels", ["kernels/"]),
    ("db", ["db/"]),
    ("tuner", ["tuner/"]),
    ("lookup", ["lookup/"]),
    ("daemon", ["daemon/"]),
    ("cli", ["client/cli/"]),
    ("tools", ["tests/", "bench/", "fuzz/", "docs/examples/"]),
]

# Include directories of the build (CMakeLists.txt: the source root for
# everything; kernels/ for libattune's users, client/ for the client
# library's, daemon/ for attuned_lib's), searched after the file's own.
INCLUDE_DIRS = ["", "kernels/", "client/", "daemon/"]

# Headers made by the build, not in the tree.
GENERATED = {"build_commit.h"}

SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp")
SKIP_DIRS = {".git", ".gpu-deps", "__pycache__", "node_modules"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def directory_of(rel):
    """The directory (a prefix of LAYERS) holding rel, or None."""
    best = None
    for _, dirs in LAYERS:
        for d in dirs:
            if rel.startswith(d) and (best is None or len(d) > len(best)):
                best = d
    return best


def layer_of(directory):
    for i, (_, dirs) in enumerate(LAYERS):
        if directory in dirs:
            return i
    return None


def sources(root):
    """Paths (relative, '/') of the tree's sources; build trees skipped."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        # a build tree is any directory CMake configured (CMakeCache.txt),
        # whatever its name, as well as build*/ at the top
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS and not (rel_dir == "." and d.startswith("build"))
            and not os.path.isfile(os.path.join(dirpath, d, "CMakeCache.txt")))
        for f in sorted(filenames):
            if f.endswith(SOURCE_EXT):
                out.append(os.path.normpath(os.path.join(rel_dir, f)).replace(os.sep, "/"))
    return out


def resolve(root, rel, inc):
    """The tree path that `#include "inc"` in rel names, or None."""
    here = os.path.dirname(rel)
    for base in [here] + INCLUDE_DIRS:
        cand = os.path.normpath(os.path.join(base, inc)).replace(os.sep, "/")
        if not cand.startswith("../") and os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def check(root, files=None):
    """(problems, edges): problems as lines to print, edges as
    {(from_dir, to_dir): first 'file:line: #include "x"' seen}."""
    problems, edges = [], {}
    for rel in files if files is not None else sources(root):
        src_dir = directory_of(rel)
        if src_dir is None:
            problems.append(f"{rel}: in no layer (add its directory to LAYERS and the picture)")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                where = f'{rel}:{lineno}: #include "{inc}"'
                target = resolve(root, rel, inc)
                if target is None:
                    if os.path.basename(inc) not in GENERATED:
                        problems.append(f"{where}: resolves to no file of the tree")
                    continue
                dst_dir = directory_of(target)
                if dst_dir is None:
                    problems.append(f"{where}: {target} is in no layer")
                    continue
                if dst_dir == src_dir:
                    continue
                edges.setdefault((src_dir, dst_dir), where)
                lo, hi = layer_of(dst_dir), layer_of(src_dir)
                if lo > hi:
                    problems.append(f"{where}: upward, layer {LAYERS[hi][0]} ({src_dir}) "
                                    f"includes layer {LAYERS[lo][0]} ({dst_dir})")
    problems += cycles(edges)
    return problems, edges


def cycles(edges):
    """One line per circle of directories in edges, with an include of each step."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    out, seen_cycles = [], set()
    state = {}  # 1 on the path, 2 done

    def visit(node, path):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cyc = path[path.index(nxt):] + [nxt]
                key = frozenset(zip(cyc, cyc[1:]))
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    steps = "; ".join(edges[(x, y)] for x, y in zip(cyc, cyc[1:]))
                    out.append(f"circle {' -> '.join(cyc)}: {steps}")
            elif state.get(nxt) is None:
                visit(nxt, path)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node, [])
    return out


def picture(design_md):
    """The layers docs/design.md draws, lowest first, as LAYERS is: the
    lines between '<!-- layers -->' and '<!-- /layers -->' in a fenced
    block, highest first, each `name  dir/ dir/ ...  what it holds` from
    the first column (indented lines, arrows and the rest of a
    description, are not rows)."""
    text = open(design_md, encoding="utf-8").read()
    m = re.search(r"<!-- layers -->\s*```[a-z]*\n(.*?)```\s*<!-- /layers -->", text, re.S)
    if m is None:
        return None
    rows = []
    for line in m.group(1).splitlines():
        if not re.match(r"[a-z]+\s", line):
            continue  # arrows, continued descriptions, blank lines
        toks = line.split()
        dirs = []
        for t in toks[1:]:
            if not t.endswith("/"):
                break
            dirs.append(t)
        rows.append((toks[0], dirs))
    return rows[::-1]


def picture_problems(design_md):
    """[] when design_md draws LAYERS, else one line saying how not."""
    drawn = picture(design_md)
    table = [(name, list(dirs)) for name, dirs in LAYERS]
    if drawn is None:
        return [f'{design_md}: no layer picture ("<!-- layers -->" block)']
    if drawn != table:
        return [f"{design_md}: the picture's layers (lowest first) {drawn} "
                f"are not this test's {table}"]
    return []


def draw(rows):
    """A layer picture of rows (lowest first), as docs/design.md holds it."""
    lines = [f"{name:8} {' '.join(dirs)}   what it holds\n            |\n"
             for name, dirs in reversed(rows)]
    return "text\n<!-- layers -->\n```\n" + "".join(lines) + "```\n<!-- /layers -->\n"


def self_check():
    """The checker must report an upward include and a circle, and pass a
    clean tree. Returns a list of failures (empty: it can fail)."""
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        def write(rel, text):
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        write("common/words.h", "#pragma once\n")
        write("kernels/k.h", '#include "../common/words.h"\n')
        write("db/store.h", '#include "../kernels/k.h"\n#include <stdio.h>\n')
        write("tuner/t.h", '#include "../db/store.h"\n')
        clean, _ = check(tmp)
        if clean:
            fails.append(f"a clean tree was reported: {clean}")
        # upward: the words include the store
        write("common/words.h", '#pragma once\n#include "../db/store.h"\n')
        up, _ = check(tmp)
        if not any('common/words.h:2: #include "../db/store.h": upward' in p for p in up):
            fails.append(f"an upward include was not reported: {up}")
        if not any(p.startswith("circle ") for p in up):
            fails.append(f"the circle common -> db -> kernels -> common was not reported: {up}")
        # a circle within one layer's reach: db <-> tuner (db includes up)
        write("common/words.h", "#pragma once\n")
        write("db/pins.h", '#include "../tuner/t.h"\n')
        circ, _ = check(tmp)
        if not any(p.startswith("circle db/ -> tuner/ -> db/") for p in circ):
            fails.append(f"the circle db/ -> tuner/ -> db/ was not reported: {circ}")
        # a file in no layer, an include that resolves nowhere
        write("db/pins.h", '#include "nowhere.h"\n')
        write("newdir/x.c", '#include "../common/words.h"\n')
        lost, _ = check(tmp)
        if not any("db/pins.h:1" in p and "resolves to no file" in p for p in lost):
            fails.append(f"an unresolved include was not reported: {lost}")
        if not any(p.startswith("newdir/x.c: in no layer") for p in lost):
            fails.append(f"a file in no layer was not reported: {lost}")
        # the picture: the table drawn passes; two layers swapped, or a
        # directory left out, fail
        md = os.path.join(tmp, "design.md")
        rows = [(name, list(dirs)) for name, dirs in LAYERS]
        for label, bad, want_fail in (
                ("the table", rows, False),
                ("db and tuner swapped", rows[:2] + [rows[3], rows[2]] + rows[4:], True),
                ("lazy/ left out", [("base", ["common/", "client/"])] + rows[1:], True)):
            with open(md, "w", encoding="utf-8") as fh:
                fh.write(draw(bad))
            got = picture_problems(md)
            if bool(got) != want_fail:
                fails.append(f"picture with {label}: {got or 'no problem'} reported")
    return fails


def main():
    root = os.environ.get("ATTUNE_SOURCE_DIR") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    fails = self_check()
    if fails:
        for f in fails:
            print("FAIL (self-check):", f)
        return 1
    problems, edges = check(root)
    if "--graph" in sys.argv[1:]:
        for (a, b), where in sorted(edges.items()):
            print(f"{a:16} -> {b:16} {where}")
    problems += picture_problems(os.path.join(root, "docs", "design.md"))
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    nfiles = len(sources(root))
    print(f"include graph: {nfiles} files, {len(edges)} directory edges, "
          f"{len(LAYERS)} layers, no upward include, no circle; picture matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
