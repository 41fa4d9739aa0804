"""The layers of `mbb/` as folders, checked: a module imports (at module level) only from its
own layer or the layers below it, so the package has no import cycles between layers and each
layer can be read, tested and replaced from the bottom up. Imports inside functions are how a
lower layer reaches an optional upper one on demand (a backend, a chart) and are not counted."""

import ast
from pathlib import Path

import mbb

PACKAGE = Path(mbb.__file__).parent

# bottom to top; a layer may import any layer at its rank or below
RANK = {
    "core": 0,
    "errors": 0,
    "llm": 1,
    "resource": 1,
    "testing": 2,
    "tasks": 2,
    "protocol": 3,
    "params": 3,
    "agents": 4,
    "analysis": 5,
    "viz": 6,
    "batch": 7,
    "cli": 8,
    "__init__": 8,
    "__main__": 8,
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_level_imports(path: Path) -> list[str]:
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mbb"):
            if node.module == "mbb":  # `from mbb import analysis`: the submodules named
                out += [f"mbb.{a.name}" for a in node.names]
            else:
                out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("mbb")]
    return out


def test_every_folder_is_a_known_layer():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert folders | modules <= set(RANK), (folders | modules) - set(RANK)


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        if "oracle" in rel.parts:  # the reference programs are standalone executables
            continue
        module = ".".join(rel.parts)
        src = _layer(module)
        for target in _module_level_imports(path):
            dst = _layer(target) if target != "mbb" else "__init__"
            if RANK[dst] > RANK[src]:
                upward.append(f"{module} -> {target}")
    assert not upward, "\n".join(upward)
