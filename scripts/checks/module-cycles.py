#!/usr/bin/env python3
"""Report import cycles between the source files of a Rust crate (default: rust/engine/src).

Usage: scripts/checks/module-cycles.py [SRC_DIR ...]   (exit status 1 when a cycle exists)

Each file is a node. A path in the code (`use super::x::Y`, `crate::a::b::f(...)`, inline
`super::f(...)`) is an edge to the file that defines what it names: a child module's file, or,
for an item re-exported by a `mod.rs` (`pub use child::Item`), the child that defines it;
otherwise the module file itself. `pub use` lines are the facade, not a dependency, and
`#[cfg(test)] mod tests` blocks are left out. Cycles are the strongly connected components
with more than one file.
"""
import re
import sys
from pathlib import Path

PATH_RE = re.compile(r"\b(crate|super)((?:::\w+)+)")
USE_RE = re.compile(r"\buse\s+(crate|super|self)((?:::\w+)*)::(?:\{([^;]*)\}|(\w+))\s*;", re.S)
PUB_USE_RE = re.compile(r"\bpub(?:\([\w:]+\))?\s+use\s+(\w+)::(?:\{([^}]*)\}|(\w+))\s*;")


def module_files(src):
    """Module path (tuple) -> file, for every .rs file under src."""
    mods = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        mods[tuple(parts)] = f
    return mods


def strip(text):
    """Source without comments, string literals and test modules."""
    cut = re.search(r"#\[cfg\(test\)\]\s*mod tests", text)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def reexports(mods, texts):
    """(module, item) -> child module that defines an item a mod.rs re-exports."""
    out = {}
    for mod, f in mods.items():
        for m in PUB_USE_RE.finditer(texts[f]):
            child = mod + (m.group(1),)
            if child not in mods:
                continue
            names = m.group(2).split(",") if m.group(2) else [m.group(3)]
            for n in names:
                n = n.strip().split(" as ")[0].strip()
                if n:
                    out[(mod, n)] = child
    return out


def resolve(mods, rex, here, root, segs):
    """The module a path names: `root` is crate/super/self, `segs` the names after it."""
    base = () if root == "crate" else here[:-1] if root == "super" else here
    segs = list(segs)
    while segs and segs[0] == "super":
        base, segs = base[:-1], segs[1:]
    mod = base
    for s in segs:
        if mod + (s,) in mods:
            mod = mod + (s,)
        else:
            return rex.get((mod, s), mod)
    return mod


def edges(mods, texts, rex):
    graph = {m: set() for m in mods}
    for mod, f in mods.items():
        text = re.sub(PUB_USE_RE, "", texts[f])
        targets = []
        for m in USE_RE.finditer(text):
            prefix = [s for s in m.group(2).split("::") if s]
            names = m.group(3).split(",") if m.group(3) else [m.group(4)]
            for n in names:
                n = re.sub(r"\{.*", "", n).strip().split(" as ")[0].split("::")
                targets.append(resolve(mods, rex, mod, m.group(1), prefix + [x for x in n if x]))
        text = USE_RE.sub("", text)
        for m in PATH_RE.finditer(text):
            targets.append(resolve(mods, rex, mod, m.group(1), m.group(2).split("::")[1:]))
        graph[mod] |= {t for t in targets if t != mod and t in mods}
    return graph


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    root = Path(__file__).resolve().parent.parent.parent
    dirs = [Path(a) for a in sys.argv[1:]] or [root / "rust/engine/src"]
    found = False
    for src in dirs:
        mods = module_files(src)
        texts = {f: strip(f.read_text()) for f in mods.values()}
        graph = edges(mods, texts, reexports(mods, texts))
        n_edges = sum(len(e) for e in graph.values())
        comps = cycles(graph)
        print(f"{src}: {len(mods)} files, {n_edges} file-to-file dependencies, {len(comps)} cycles")
        for comp in comps:
            found = True
            print("  cycle: " + " <-> ".join(str(mods[m].relative_to(src)) for m in sorted(comp)))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
