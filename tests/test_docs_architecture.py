"""docs/architecture.md's module map matches the tree, and the code keeps its layers: no import
cycle, and no module imports from a layer listed above its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gitaudit"
DOC = ROOT / "docs" / "architecture.md"

# bottom first, as the module map lists them top first
LAYERS = [
    "errors",
    "frozen",
    "named",
    "held",
    "shutdown",
    "places",
    "executables",
    "pathsearch",
    "secret",
    "checkpoint",
    "raw_trees",
    "plan",
    "verdict",
    "checks",
    "crypto",
    "git",
    "ledger",
    "mission",
    "run",
    "gate",
    "agent",
    "hooks",
    "demo",
    "cli",
    "__main__",
]


def module_map() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("## Module map", 1)[1].split("```", 2)[1]
    listed: set[str] = set()
    folders: list[str] = []
    for line in block.splitlines():
        match = re.match(r"^( *)(\S+)", line)
        if not match or line.strip() == "gitaudit/":
            continue
        depth = (len(match.group(1)) - 2) // 2
        name = match.group(2)
        if depth < 0:
            continue
        folders = folders[:depth]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        elif name.endswith((".py", ".json")):
            listed.add("/".join([*folders, name]))
    return listed


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        # the sample repository is data; _version.py is written by the build (hatch-vcs)
        if rel.parts[0] == "sample" or rel.as_posix() == "_version.py":
            continue
        found[rel.as_posix()] = path
    return found


def test_every_module_is_in_the_map_and_every_entry_exists() -> None:
    listed = module_map()
    present = set(modules()) | {"plan/schema.json"}
    faces = {p for p in present if p.endswith("__init__.py")}
    missing = sorted(present - faces - listed)
    assert not missing, f"modules missing from the module map in docs/architecture.md: {missing}"
    stale = sorted(listed - present)
    assert not stale, f"the module map lists files that do not exist: {stale}"


def _dotted(rel: str) -> str:
    name = "gitaudit." + rel.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    mods = {_dotted(rel): path for rel, path in modules().items()}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # the package face
    return LAYERS.index(parts[1])


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = [
        f"{m} -> {d}"
        for m, deps in import_graph().items()
        for d in deps
        if _layer(d) > _layer(m) >= 0
    ]
    assert not upward, upward


def test_there_is_no_import_cycle() -> None:
    graph = import_graph()
    visiting: set[str] = set()
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        visiting.add(node)
        for dep in sorted(graph[node]):
            if dep in visiting:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in done:
                visit(dep, [*path, dep])
        visiting.discard(node)
        done.add(node)

    for start in sorted(graph):
        if start not in done:
            visit(start, [start])
    assert not cycles, cycles


def test_only_the_cli_imports_typer() -> None:
    offenders = [
        rel
        for rel, path in modules().items()
        if not rel.startswith("cli/")
        and re.search(r"^\s*(import|from) typer", path.read_text(), re.M)
    ]
    assert not offenders, offenders
