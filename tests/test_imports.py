"""The import graph of ``src/rapidrl``, read from the source (every ``import``, module level or
inside a function): no cycles, and no private name (``_x``) imported from another module. Imports
run one way, down the layers (e.g. a trainer's local loop dispatches to its Ray loop, which
imports the learner, never the local loop)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "rapidrl"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / ROOT).rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]):
    """``(target module, imported names)`` of every rapidrl import in one module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != ROOT:
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if sub in modules:  # `from package import module`
                    yield sub, []
                else:
                    yield mod, [alias.name]


def _graph():
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    private = []
    for name, path in modules.items():
        for target, names in _imports(name, path, modules):
            if target == name:
                continue
            edges[name].add(target)
            private += [
                f"{name} imports {target}.{n}"
                for n in names
                if n.startswith("_") and not n.startswith("__")
            ]
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    edges, _ = _graph()
    assert "rapidrl.algos.dqn.learner" in edges["rapidrl.algos.dqn.ray_loop"]
    assert "rapidrl.algos.dqn.ray_loop" in edges["rapidrl.algos.dqn.train"]  # the dispatch


def test_no_import_cycles():
    edges, _ = _graph()
    assert _cycles(edges) == []


def test_no_private_names_across_modules():
    _, private = _graph()
    assert private == []
