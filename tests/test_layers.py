"""The package's layers: ``core <- envs <- agent <- run <- app``, no upward import, no cycle.

Every import in the package counts, module-level or inside a function, since a lazy
import is a dependency all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "atari_speed"
LAYERS = ("core", "envs", "agent", "run", "app")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The atari_speed modules ``path`` imports (names of modules, not of objects)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("atari_speed")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("atari_speed"):
            found.add(node.module)
            # `from atari_speed.envs import wrappers`: a module imported by name
            found |= {
                f"{node.module}.{a.name}"
                for a in node.names
                if (PACKAGE.parent / f"{node.module}.{a.name}".replace(".", "/"))
                .with_suffix(".py")
                .exists()
            }
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> int | None:
    """A module's layer index; None for the package's own __init__ (the public API)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else None


def test_every_module_belongs_to_a_layer():
    stray = [m for m in graph() if m != "atari_speed" and layer(m) is None]
    assert not stray


def upward(deps: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} imports {target}"
        for module, targets in deps.items()
        for target in targets
        if layer(module) is not None and (layer(target) is None or layer(target) > layer(module))
    ]


def cycle(deps: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``deps``, as a path that ends where it starts, or None."""
    state: dict[str, str] = {}  # "visiting" while on the path, then "done"

    def visit(module: str, path: list[str]) -> list[str] | None:
        if state.get(module) == "visiting":
            return [*path[path.index(module) :], module]
        if state.get(module) == "done":
            return None
        state[module] = "visiting"
        for target in sorted(deps.get(module, ())):
            if target in deps and (found := visit(target, [*path, module])):
                return found
        state[module] = "done"
        return None

    return next((c for m in sorted(deps) if (c := visit(m, []))), None)


def test_no_module_imports_a_layer_above_its_own():
    assert not upward(graph()), "\n".join(upward(graph()))


def test_no_import_cycles():
    found = cycle(graph())
    assert found is None, "import cycle: " + " -> ".join(found or [])


def test_the_checks_catch_what_they_are_for():
    deps = graph()
    assert len(deps) > 20 and "atari_speed.run.session" in deps["atari_speed.run.nenv"]
    assert upward({"atari_speed.envs.a": {"atari_speed.run.b"}}) == [
        "atari_speed.envs.a imports atari_speed.run.b"
    ]
    loop = {"atari_speed.run.a": {"atari_speed.run.b"}, "atari_speed.run.b": {"atari_speed.run.a"}}
    assert cycle(loop) == ["atari_speed.run.a", "atari_speed.run.b", "atari_speed.run.a"]
    assert cycle({"atari_speed.run.a": {"atari_speed.core.b"}, "atari_speed.core.b": set()}) is None
