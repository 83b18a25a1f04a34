"""snapshot/, spark/ and pipeline/ reach the MySQL source only through the source interface
(``sparkcdc.model.dialect``, DESIGN.md §10), except for the modules listed here, each with
what keeps it there. A new import of ``sparkcdc.mysql`` in those layers fails this test;
so does a listed module that no longer needs its entry (take it off the list)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "sparkcdc"
LAYERS = ("snapshot", "spark", "pipeline")

# module or package (relative to src/sparkcdc, no suffix) -> why it still imports sparkcdc.mysql
NOT_YET_ON_THE_INTERFACE: dict[str, str] = {}


def _imports_mysql(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "sparkcdc" and any(a.name == "mysql" for a in node.names):
                return True
            if node.module == "sparkcdc.mysql" or node.module.startswith("sparkcdc.mysql."):
                return True
        if isinstance(node, ast.Import) and any(
            a.name == "sparkcdc.mysql" or a.name.startswith("sparkcdc.mysql.") for a in node.names
        ):
            return True
    return False


def _importers() -> set[str]:
    return {
        str(path.relative_to(SRC).with_suffix(""))
        for layer in LAYERS
        for path in sorted((SRC / layer).rglob("*.py"))
        if _imports_mysql(path)
    }


def _listed(module: str) -> bool:
    return any(module == key or module.startswith(f"{key}/") for key in NOT_YET_ON_THE_INTERFACE)


def test_the_layers_above_the_source_reach_mysql_only_through_the_interface() -> None:
    new = sorted(m for m in _importers() if not _listed(m))
    assert not new, (
        f"{new} import sparkcdc.mysql: call the source's dialect (sparkcdc.model.dialect) "
        "instead, adding the method a second source would implement too (code moved from a "
        "listed module: list its new module here, with the reason)"
    )


def test_the_list_of_modules_not_yet_on_the_interface_is_current() -> None:
    importers = _importers()
    done = sorted(
        key
        for key in NOT_YET_ON_THE_INTERFACE
        if not any(m == key or m.startswith(f"{key}/") for m in importers)
    )
    assert not done, (
        f"{done} no longer import sparkcdc.mysql (or were moved: list the new modules): take "
        "them off the list"
    )


def test_the_check_sees_an_import_of_mysql(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from sparkcdc.mysql import server\n")
    assert _imports_mysql(module)
    module.write_text("from sparkcdc.model.dialect import dialect_for\n")
    assert not _imports_mysql(module)
