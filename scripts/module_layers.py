#!/usr/bin/env python3
"""The import graph of runtime/'s top-level modules, checked against its layers.

Lists, for each module of runtime/src, the modules it imports from (any `crate::NAME`
path, in `use` or in code), and fails when a module imports from a layer above its
own or when modules import each other in a circle. The layers, lowest first, are
those of docs/architecture.md. Run from the repository root:

    python3 scripts/module_layers.py [--quiet]
"""

import re
import sys
from pathlib import Path

SRC = Path("runtime/src")

# Lowest first; a module may import only from its own layer's files and from lower
# layers. Two modules of one layer must not import each other.
LAYERS = [
    ["tensor", "request", "stats", "error", "answered", "classify", "trace"],
    ["metrics", "backend", "signature"],
    ["preprocess", "warmup"],
    ["batching", "admission"],
    ["model", "profile"],
    ["registry"],
    ["policy", "ocr"],
    ["kserve"],
    ["fuzzing"],
]


def module_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".rs")


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def test_free(text: str) -> str:
    """The text without `#[cfg(test)]` items: tests may reach anywhere."""
    out, skip_depth, depth, pending = [], None, 0, False
    for line in text.splitlines():
        if skip_depth is None and re.match(r"\s*#\[cfg\(test\)\]", line):
            pending = True
            continue
        opens, closes = line.count("{"), line.count("}")
        if pending and skip_depth is None:
            if opens or line.rstrip().endswith(";"):
                pending = False
                if opens > closes:
                    skip_depth = depth
                depth += opens - closes
                continue
        if skip_depth is None:
            out.append(line)
        depth += opens - closes
        if skip_depth is not None and depth <= skip_depth:
            skip_depth = None
    return "\n".join(out)


def test_only_files() -> set[Path]:
    """Files declared under `#[cfg(test)]` (`#[cfg(test)] mod x_tests;`)."""
    found = set()
    for path in SRC.rglob("*.rs"):
        folder = path.parent if path.name in ("mod.rs", "lib.rs") else path.with_suffix("")
        for name in re.findall(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", path.read_text()):
            found.update({folder / f"{name}.rs", folder / name / "mod.rs"})
    return found


def imports() -> dict[str, set[str]]:
    names = {module_of(p) for p in SRC.glob("*") if p.suffix == ".rs" or p.is_dir()}
    names.discard("lib")
    graph: dict[str, set[str]] = {n: set() for n in names}
    tests = test_only_files()
    for path in SRC.rglob("*.rs"):
        this = module_of(path)
        if this == "lib" or path in tests:
            continue
        text = test_free(strip_comments(path.read_text()))
        used = set(re.findall(r"\bcrate::(\w+)", text))
        # `use crate::{a::X, b::Y}` groups.
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text, flags=re.S):
            used.update(re.findall(r"(?:^|,)\s*(\w+)", group))
        graph[this].update(u for u in used if u in names and u != this)
    return graph


def layer_of(module: str) -> int | None:
    for i, layer in enumerate(LAYERS):
        if module in layer:
            return i
    return None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    quiet = "--quiet" in sys.argv
    graph = imports()
    problems = []
    for module in sorted(graph):
        layer = layer_of(module)
        if layer is None:
            problems.append(f"{module}: in no layer (add it to LAYERS and docs/architecture.md)")
            continue
        for used in sorted(graph[module]):
            used_layer = layer_of(used)
            if used_layer is not None and used_layer > layer:
                problems.append(f"{module} (layer {layer}) imports {used} (layer {used_layer}): upward")
    for circle in circles(graph):
        problems.append("import circle: " + " <-> ".join(circle))
    if not quiet:
        for i, layer in enumerate(LAYERS):
            for module in layer:
                if module in graph:
                    print(f"{i} {module:<11} <- {', '.join(sorted(graph[module])) or '(nothing)'}")
    for problem in problems:
        print("layers: " + problem, file=sys.stderr)
    print(f"layers: {len(graph)} modules, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
