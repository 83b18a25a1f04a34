"""The layers of ``src/sparkcdc`` import one way: a module imports (at any level: module top,
function bodies, ``TYPE_CHECKING`` blocks) only modules of its own layer or a lower one.

Read from the sources with ``ast``; no module is imported. The order, lowest first, is
``LAYERS``; inside ``mysql/`` the rooms have an order of their own (``MYSQL_ROOMS``). A
lazy registry that names a module by string (``model/dialect.py``'s source types, the sink
registry) is no import here and not checked.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

# lowest first; a module may import its own layer and the ones before it
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors"}),  # the error hierarchy: imports nothing of sparkcdc
    frozenset({"background"}),  # work begun on a thread, waited for: imports nothing of ours
    frozenset({"files"}),  # local/remote file access (errors only)
    frozenset({"model"}),  # the vocabulary every layer speaks
    frozenset({"locations"}),  # where checkpoints and tables live (model, files)
    frozenset({"mysql", "postgres"}),  # the sources
    frozenset({"snapshot"}),  # the chunked snapshot, written against a source
    frozenset({"spark"}),  # the Spark data source, session and changelog
    frozenset({"sinks"}),
    frozenset({"pipeline"}),
    # the entry points: the command line and the package's own functions (sparkcdc/__init__)
    frozenset({"cli", "sparkcdc"}),
)

# inside mysql/, lowest first (sparkcdc.mysql's docstring draws the same map); the modules
# directly in mysql/ (the source's implementation of the source interface) sit on top
MYSQL_ROOMS: tuple[str, ...] = ("protocol", "binlog", "admin", "ddl", "stream", "chunks", "")

# (importing module, imported module): the imports that go up today, each a function-local
# import of Spark-side code deferred until it runs, with the reason
ALLOWED_UP: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _imported(module: str, tree: ast.Module) -> set[str]:
    """The sparkcdc modules ``module`` imports anywhere in its body."""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name``
                # imports mod
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {name for name in found if name.split(".")[0] == "sparkcdc" and name != module}


def _layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "sparkcdc"
    (index,) = (i for i, layer in enumerate(LAYERS) if key in layer)
    return index


def _room(module: str) -> int:
    parts = module.split(".")  # sparkcdc.mysql.<room>[.<module>] or sparkcdc.mysql.<module>
    return MYSQL_ROOMS.index(parts[2] if parts[2] in MYSQL_ROOMS else "")


@functools.cache
def _imports() -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        pairs.extend((module, target) for target in sorted(_imported(module, tree)))
    return pairs


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _layer(module)
        if module.startswith("sparkcdc.mysql."):
            _room(module)


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{module} imports {target} ({_place(module)} -> {_place(target)})"
        for module, target in _imports()
        if _layer(target) > _layer(module) and (module, target) not in ALLOWED_UP
    ]
    assert not upward, (
        "imports that go up the layers (errors < files < model < locations < mysql, postgres "
        "< snapshot < spark < sinks < pipeline < cli): move the code to the layer that uses "
        "it, or pass what it needs down:\n  " + "\n  ".join(upward)
    )


def test_inside_mysql_a_room_imports_only_the_rooms_below_it() -> None:
    upward = [
        f"{module} imports {target}"
        for module, target in _imports()
        if module.startswith("sparkcdc.mysql.")
        and target.startswith("sparkcdc.mysql.")
        and _room(target) > _room(module)
    ]
    assert not upward, (
        f"imports that go up mysql's rooms ({' < '.join(r or 'mysql/*.py' for r in MYSQL_ROOMS)})"
        ":\n  " + "\n  ".join(upward)
    )


def test_the_layers_below_spark_import_at_module_level() -> None:
    """Below ``spark`` nothing defers an import into a function: there is no heavy optional
    import there to defer, and a circle is broken by moving code, not by hiding an import."""
    below_spark = _layer("sparkcdc.spark")
    local = []
    for module, path in MODULES.items():
        if _layer(module) >= below_spark:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.Import | ast.ImportFrom) and any(
                        name.split(".")[0] == "sparkcdc" for name in _names(node)
                    ):
                        local.append(f"{module}:{node.lineno} in {function.name}()")
    assert not local, "function-local imports of sparkcdc modules:\n  " + "\n  ".join(local)


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [node.module or ""] if not node.level else ["sparkcdc"]


def test_the_allowed_exceptions_still_exist() -> None:
    """An exception that went away leaves the list too (the list says what is true)."""
    gone = set(ALLOWED_UP) - set(_imports())
    assert not gone, f"no longer imported, remove from ALLOWED_UP: {sorted(gone)}"


def _place(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "sparkcdc"
