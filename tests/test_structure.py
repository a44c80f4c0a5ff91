"""The package's shape: every error class in one module, imports only downward, and the entry
points (command line, Airflow, Spark jobs) go through the steps rather than around them."""

from __future__ import annotations

import ast
from pathlib import Path

import pymysql
import pytest

from loader.core import errors

PACKAGE = Path(errors.__file__).resolve().parents[1]
ENTRY_POINTS = ("loader.app.cli", "loader.app.airflow", "loader.oncall.plugin", "loader.app.spark_jobs")


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _imports(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The loader modules ``name`` imports, anywhere in it (also inside functions)."""
    found = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != "loader":
                found.add(target)
    return found


def test_every_error_class_lives_in_errors_py() -> None:
    elsewhere = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and name != "loader.core.errors":
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if node.name.endswith(("Error", "Exception")) or bases & {
                    "Exception",
                    "ValueError",
                    "LoaderError",
                }:
                    elsewhere.append(f"{name}.{node.name}")
    assert elsewhere == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    modules = _modules()
    graph = {name: _imports(name, tree, set(modules)) for name, tree in modules.items()}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in path:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif len(path) < 12:
                visit(nxt, [*path, nxt])

    for name in graph:
        visit(name, [name])
    assert cycles == []
    # Nothing below the entry points imports them.
    for name, imported in graph.items():
        assert not (imported & set(ENTRY_POINTS)) or name in ENTRY_POINTS, f"{name} imports an entry point"


# The stages as packages, and which of them each may import: a stage takes what the ones it
# names give (the source's connections, the decoded binlog, staging files, the state, the
# warehouse's type map), never the other way round. ``core`` (settings, errors, positions, names,
# results) is beneath them all and imports none; ``app`` runs the stages; on-call's page reads
# them all and the application's state.
CORE = "loader.core"
BELOW_EXTRACT = {"loader.source", "loader.binlog", "loader.staging", "loader.state", "loader.warehouse"}
MAY_IMPORT = {
    CORE: set(),
    "loader.source": {CORE},
    "loader.staging": {CORE},
    "loader.binlog": {CORE, "loader.source"},
    "loader.state": {CORE, "loader.staging", "loader.binlog"},
    "loader.warehouse": {CORE, "loader.source", "loader.binlog", "loader.staging", "loader.state"},
    "loader.extract": {CORE} | BELOW_EXTRACT,
    "loader.app": {CORE, "loader.extract"} | BELOW_EXTRACT,
    "loader.oncall": {CORE, "loader.extract", "loader.app"} | BELOW_EXTRACT,
}


def _stage(module: str) -> str | None:
    return next((s for s in MAY_IMPORT if module == s or module.startswith(s + ".")), None)


def test_each_stage_imports_only_the_stages_it_takes_from() -> None:
    modules = _modules()
    found = []
    for name, tree in modules.items():
        own = _stage(name)
        if own is None:
            continue
        for target in sorted(_imports(name, tree, set(modules))):
            other = _stage(target)
            if other is not None and other != own and other not in MAY_IMPORT[own]:
                found.append(f"{name} imports {target}")
    assert found == []


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_entry_points_run_steps_through_the_application_layer(entry: str) -> None:
    """The ledger, extraction and materialisation are reached through ``loader.app.steps`` only, so
    that failures are noted the same way whoever runs a step."""
    modules = _modules()
    imported = _imports(entry, modules[entry], set(modules))
    stages = (
        "loader.state.ledger",
        "loader.extract",
        "loader.warehouse.materialize",
        "loader.warehouse.initial_load",
    )
    around = {m for m in imported if m.startswith(stages)}
    if entry == "loader.app.spark_jobs":  # the Spark side runs the warehouse steps themselves
        around -= {"loader.warehouse.materialize", "loader.warehouse.initial_load"}
    assert around == set()
    assert "loader.app.steps" in imported


def test_retry_decisions_come_from_the_error_class() -> None:
    assert not errors.is_transient(errors.ExtractError("column c changed type"))
    assert errors.is_transient(errors.TransientError("S3 SlowDown"))
    assert errors.is_transient(
        errors.SparkJobError("lost the metastore", "materialize", "TransientError", True)
    )
    assert errors.exit_code(errors.ConfigError("bad")) == errors.EXIT_ERROR
    assert errors.exit_code(pymysql.err.OperationalError(2013, "Lost connection")) == errors.EXIT_TRANSIENT
    assert (
        errors.exit_code(pymysql.err.ProgrammingError(1146, "Table 'a.b' doesn't exist")) == errors.EXIT_ERROR
    )
    assert (
        errors.describe(pymysql.err.OperationalError(2013, "Lost connection"))
        == "source error: Lost connection"
    )
    assert errors.exit_code(ValueError("not ours")) == errors.EXIT_ERROR


def test_the_top_holds_the_stage_packages_and_core_only() -> None:
    """A new module goes into the room of the stage it serves, not beside them."""
    top = {
        p.stem.split(".")[0]
        for p in PACKAGE.iterdir()
        if p.suffix in (".py", ".so") or (p / "__init__.py").exists()
    }
    loose = {name for name in top if not (PACKAGE / name).is_dir()}
    assert loose == {"__init__", "_native"}
    assert len(top - loose) <= 9, sorted(top - loose)
