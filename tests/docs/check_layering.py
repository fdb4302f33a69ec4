#!/usr/bin/env python3
"""The include graph of lib/ against the layering the CMake files declare (issue 28, acceptance 1).

Declared: for each library folder lib/L, the cf_* targets its CMakeLists.txt links
(target_link_libraries); a target cf_X[_suffix] belongs to the folder lib/X that defines it.
Checked:
  1. the declared graph between library folders is a DAG (no link-level cycle);
  2. every `#include "cf/X/..."` in lib/L (X != L) names a library L declares, directly or
     through the libraries it declares (so no library includes a library above it);
  3. no file outside lib/X includes `cf/X/detail/...` (lib/ and apps/; tests may test internals).
Prints the layers; exit 1 naming each violation. Usage: check_layering.py SOURCE_DIR
"""
import os, re, sys

src = sys.argv[1]
lib = os.path.join(src, "lib")
folders = sorted(d for d in os.listdir(lib) if os.path.isfile(os.path.join(lib, d, "CMakeLists.txt")))

# target -> folder, folder -> declared target deps
owner, links = {}, {}
for f in folders:
    text = open(os.path.join(lib, f, "CMakeLists.txt"), encoding="utf-8").read()
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"add_library\(\s*(cf_\w+)", text):
        owner[m.group(1)] = f
    deps = set()
    for m in re.finditer(r"target_link_libraries\(\s*(\S+)([^)]*)\)", text, re.S):
        deps |= set(re.findall(r"\bcf_\w+", m.group(2)))
    links[f] = deps
graph = {f: {owner[t] for t in links[f] if t in owner and owner[t] != f} for f in folders}

errors = []
# 1. cycles (depth-first search with colours)
state, order = {}, []


def visit(f, path):
    state[f] = 1
    for g in sorted(graph[f]):
        if state.get(g) == 1:
            errors.append("link-level cycle: " + " -> ".join(path[path.index(g):] + [g]))
        elif g not in state:
            visit(g, path + [g])
    state[f] = 2
    order.append(f)


for f in folders:
    if f not in state:
        visit(f, [f])

closure = {}


def reach(f):
    """Every library f declares, directly or through the ones it declares."""
    if f not in closure:
        out, todo = set(), list(graph[f])
        while todo:
            g = todo.pop()
            if g not in out:
                out.add(g)
                todo.extend(graph[g])
        closure[f] = out
    return closure[f]


inc = re.compile(r'#include\s+"cf/(\w+)/([^"]+)"')
for top in ("lib", "apps"):
    for root, _, files in os.walk(os.path.join(src, top)):
        for name in files:
            if not name.endswith((".hpp", ".cpp", ".cu", ".cuh", ".inc", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            parts = rel.split(os.sep)
            here = parts[1] if top == "lib" else None
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = inc.search(line)
                if not m:
                    continue
                x, rest = m.group(1), m.group(2)
                if x != here and rest.startswith("detail/"):
                    errors.append(f"{rel}:{n}: includes another library's internals cf/{x}/{rest}")
                if here and x != here and x in graph and x not in reach(here):
                    errors.append(f"{rel}:{n}: lib/{here} includes cf/{x}/{rest} but does not declare lib/{x} "
                                  f"(declared: {', '.join(sorted(reach(here))) or 'none'})")

# layers: longest path from the bottom
level = {}
for f in order:  # post-order: a library's declared libraries come first (cycles aside)
    level[f] = 1 + max((level.get(g, 0) for g in graph[f]), default=-1)
for l in range(max(level.values()) + 1):
    print(f"layer {l}: " + ", ".join(f for f in folders if level[f] == l))
if errors:
    print("\n".join(sorted(set(errors))))
    sys.exit(1)
print(f"{len(folders)} libraries, declared graph acyclic, includes within the declared layering")
