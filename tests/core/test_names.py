"""Warehouse table names (``loader.core.naming``): one per source table, never shared, always valid.

The unit tests need no server; the last test carries awkwardly named tables through the whole
pipeline on the private MariaDB and a local Spark.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loader.core import naming
from loader.core.config import Config
from loader.core.errors import ConfigError, MaterializeError
from loader.core.naming import legacy_warehouse_table, warehouse_table, warehouse_tables
from loader.extract.interval import run_extract
from loader.state.ledger import Ledger
from loader.warehouse.compare import compare_tables
from loader.warehouse.initial_load import run_initial_load
from loader.warehouse.materialize import run_materialize
from loader.warehouse.tables import database_name, legacy_tables, quote_identifier
from tests.conftest import TABLE_FORMATS, MariaDB

VALID = re.compile(r"[a-z0-9_]{1,128}")

NAMES = [
    "t",
    "T",
    "orders",
    "Orders",
    "ORDERS",
    "u",
    "x",
    "u__v",
    "v__x",
    "u_v",
    "v_x",
    "_x",
    "x_",
    "__",
    "_",
    "a.b",
    "a b",
    "a  b",
    "a_b",
    "a-b",
    "a`b",
    "`",
    "'",
    '"',
    "it's",
    'say "hi"',
    "a\nb",
    "注文",
    "注文テーブル",
    "заказы",
    "Crème Brûlée",
    "creme_brulee",
    "ß",
    "ss",
    "İ",
    "i",
    "a" * 64,
    "b" * 63,
    "A" * 64,
    "注" * 64,
    "t___0123456789ab",
    "u__v_x___07e911bbe78e",  # what the hashed form of u.v__x looks like
    "x___0",
    "1",
    "0_0",
]


def test_ordinary_names_keep_the_form_they_always_had() -> None:
    assert warehouse_table("shop", "orders") == "shop__orders"
    assert warehouse_table("shop_eu", "order_items_2024") == "shop_eu__order_items_2024"
    assert warehouse_table("2024", "x1") == "2024__x1"
    assert warehouse_table("a" * 63, "b" * 63) == "a" * 63 + "__" + "b" * 63  # 128 characters


@pytest.mark.parametrize(
    ("schema", "table", "readable"),
    [
        ("Shop", "Orders", "shop__orders"),  # upper case: MySQL tells Orders from orders
        ("u__v", "x", "u_v__x"),  # a double underscore
        ("u", "v__x", "u__v_x"),
        ("shop", "_tmp", "shop__tmp"),  # an underscore at an end
        ("shop", "my orders", "shop__my_orders"),
        ("shop", "a.b", "shop__a_b"),
        ("shop", "注文", "shop__x"),  # nothing ASCII left
        ("café", "Crème Brûlée", "cafe__creme_brulee"),
        ("a" * 64, "b" * 64, "a" * 55 + "__" + "b" * 55),  # 130 characters as the ordinary form
    ],
)
def test_other_names_are_readable_and_end_with_a_hash_of_the_exact_names(
    schema: str, table: str, readable: str
) -> None:
    name = warehouse_table(schema, table)
    assert name == f"{readable}___{naming.name_hash(schema, table)}"
    assert VALID.fullmatch(name), name


def test_the_mapping_never_changes() -> None:
    # Warehouses made by this version must keep matching: these names are part of the contract.
    assert warehouse_table("Shop", "Orders") == "shop__orders___28151a32117d"
    assert warehouse_table("u__v", "x") == "u_v__x___4138d053bdb0"
    assert warehouse_table("u", "v__x") == "u__v_x___07e911bbe78e"
    assert warehouse_table("shop", "注文") == "shop__x___ec789e6a4637"


def test_the_hash_covers_the_split_between_schema_and_table() -> None:
    assert naming.name_hash("ab", "c") != naming.name_hash("a", "bc")
    assert naming.name_hash("a:1", "b") != naming.name_hash("a", "1:b")


def test_every_pair_of_awkward_names_gets_its_own_valid_name() -> None:
    pairs = list(itertools.product(NAMES, repeat=2))
    names = warehouse_tables(pairs)
    assert len(set(names.values())) == len(pairs)
    for name in names.values():
        assert VALID.fullmatch(name), name
    # The cases that used to share a table.
    assert warehouse_table("s", "T") != warehouse_table("s", "t")
    assert warehouse_table("u__v", "x") != warehouse_table("u", "v__x")
    # A name that looks hashed is not ordinary, so it is hashed in turn.
    assert warehouse_table("u", "v__x") not in {
        warehouse_table("u", "v_x___07e911bbe78e"),
        warehouse_table("u__v_x", "07e911bbe78e"),
    }


def test_random_names_never_share_a_table() -> None:
    rng = random.Random(7)
    alphabet = "aAbB_ _.`'\"-注é0"
    pairs = {
        (
            "".join(rng.choices(alphabet, k=rng.randint(1, 6))),
            "".join(rng.choices(alphabet, k=rng.randint(1, 6))),
        )
        for _ in range(20000)
    }
    names = warehouse_tables(pairs)
    assert len(set(names.values())) == len(pairs)


def test_ordinary_and_hashed_names_cannot_meet() -> None:
    for schema, table in itertools.product(NAMES, repeat=2):
        name = warehouse_table(schema, table)
        assert ("___" in name) != naming.is_ordinary(schema, table)


def test_a_shared_name_is_refused_never_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    assert warehouse_tables([("s", "t"), ("s", "t")]) == {("s", "t"): "s__t"}
    monkeypatch.setattr(naming, "name_hash", lambda schema, table: "0" * 12)
    with pytest.raises(ConfigError) as refused:
        warehouse_tables([("s", "T"), ("s", "t"), ("S", "t")])
    message = str(refused.value)
    assert "`s`.`T` and `S`.`t` would both be the warehouse table s__t___000000000000" in message
    assert "exclude one of them (tables.exclude)" in message


def test_legacy_names_are_those_that_changed() -> None:
    assert legacy_warehouse_table("shop", "orders") is None
    assert legacy_warehouse_table("Shop", "Orders") == "shop__orders"
    assert legacy_warehouse_table("u__v", "x") == "u__v__x"
    assert legacy_warehouse_table("shop", "my orders") is None  # Spark never accepted that name
    assert legacy_warehouse_table("shop", "注文") is None


# --- the whole pipeline ----------------------------------------------------------------------

A, B = "names_u", "names_u__v"
ASCII_TABLES = [(A, "T"), (A, "t"), (A, "v__x"), (B, "x")]  # old names: u__t twice, u__v__x twice
UNICODE_TABLES = [(A, "my 注文"), (A, "MY 注文")]  # same readable part, different hashes


def _sql(schema: str, table: str) -> str:
    return f"{quote_identifier(schema)}.{quote_identifier(table)}"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("table_format", TABLE_FORMATS)
@pytest.mark.parametrize(
    "tables",
    [
        pytest.param(ASCII_TABLES, id="case-and-double-underscores"),
        pytest.param(UNICODE_TABLES, id="space-and-cjk"),
    ],
)
def test_awkwardly_named_tables_each_load_into_their_own_warehouse_table(
    mariadb: MariaDB,
    tmp_path: Path,
    spark_config: Config,
    spark: Any,
    tables: list[tuple[str, str]],
    table_format: str,
) -> None:
    schemas = sorted({s for s, _ in tables})
    mariadb.execute(
        *(f"DROP DATABASE IF EXISTS {quote_identifier(s)}" for s in (A, B)),
        *(f"CREATE DATABASE {quote_identifier(s)}" for s in schemas),
        *(f"CREATE TABLE {_sql(s, t)} (id INT PRIMARY KEY, v VARCHAR(40))" for s, t in tables),
        *(f"INSERT INTO {_sql(s, t)} VALUES (1, '{t} one'), (2, '{s}.{t}')" for s, t in tables),
    )
    include = ", ".join(f'"{s}.*"' for s in schemas)
    base = mariadb.config(tmp_path, tables={"include": f"[{include}]"})
    cfg = dataclasses.replace(
        base, warehouse=dataclasses.replace(spark_config.warehouse, database="names_wh", buckets=4)
    )
    database = database_name(cfg.warehouse)
    if (
        table_format == "iceberg"
        and spark.sql(f"SHOW NAMESPACES IN iceberg LIKE '{cfg.warehouse.database}'").count()
    ):
        for row in spark.sql(
            f"SHOW TABLES IN {database}"
        ).collect():  # Iceberg drops no namespace with tables
            spark.sql(f"DROP TABLE {database}.{quote_identifier(row.tableName)}")
    spark.sql(f"DROP DATABASE IF EXISTS {database} CASCADE")
    run_initial_load(spark, cfg, progress=lambda _: None)

    deleted = tables[1]
    mariadb.execute(
        *(f"UPDATE {_sql(s, t)} SET v = CONCAT(v, ' changed') WHERE id = 1" for s, t in tables),
        *(f"INSERT INTO {_sql(s, t)} VALUES (3, '{t} new')" for s, t in tables),
        f"DELETE FROM {_sql(*deleted)} WHERE id = 2",
    )
    summary = run_extract(cfg, progress=lambda _: None)
    assert summary is not None and len(summary.tables) == len(tables)
    staged = [p.relative_to(tmp_path / "staging") for p in (tmp_path / "staging").rglob("*.csv")]
    assert len(staged) == len(tables)  # one folder per table, whatever its name
    run_materialize(spark, cfg)

    compared = compare_tables(spark, cfg)
    assert sorted(c.table for c in compared) == sorted(f"{s}.{t}" for s, t in tables)
    for c in compared:
        assert c.equal, f"{c.table}: source {c.source_sample}, warehouse {c.warehouse_sample}"
    # Each warehouse table holds its own source table's rows only, under its documented name.
    names = warehouse_tables(tables)
    found = [r.tableName for r in spark.sql(f"SHOW TABLES IN {database}").collect() if not r.isTemporary]
    assert sorted(found) == sorted(names.values())
    for (schema, table), name in names.items():
        values = {r.v for r in spark.sql(f"SELECT v FROM {database}.{name}").collect()}
        kept = set() if (schema, table) == deleted else {f"{schema}.{table}"}
        assert values == {f"{table} one changed", f"{table} new", *kept}, name

    if tables == ASCII_TABLES:
        assert names[(A, "t")] == "names_u__t"
    if tables == ASCII_TABLES and table_format == "hive":  # names from before naming: Hive only
        # A table under the name an earlier version gave it is found, never left behind.
        assert legacy_tables(spark, "names_wh", tables) == {}
        spark.sql(f"ALTER TABLE names_wh.{names[(A, 'v__x')]} RENAME TO names_wh.names_u__v__x")
        assert legacy_tables(spark, "names_wh", tables) == {(A, "v__x"): "names_u__v__x"}
        # Materialise stops, the checkpoint stays, and the rename it names brings the table back.
        mariadb.execute(f"UPDATE {_sql(A, 'v__x')} SET v = 'after rename' WHERE id = 1")
        checkpoint = Ledger.of(cfg).checkpoint()
        run_extract(cfg, progress=lambda _: None)
        with pytest.raises(MaterializeError) as stopped:
            run_materialize(spark, cfg)
        rename = f"ALTER TABLE `names_wh`.`names_u__v__x` RENAME TO `names_wh`.`{names[(A, 'v__x')]}`"
        assert rename in str(stopped.value), stopped.value
        assert Ledger.of(cfg).checkpoint() == checkpoint
        spark.sql(rename)
        run_materialize(spark, cfg)
        assert all(c.equal for c in compare_tables(spark, cfg))


@pytest.mark.integration
def test_loader_tables_shows_each_selected_table_and_its_warehouse_table(
    mariadb: MariaDB, tmp_path: Path
) -> None:
    mariadb.execute(
        "DROP DATABASE IF EXISTS nm_list",
        "CREATE DATABASE nm_list",
        "CREATE TABLE nm_list.t (id INT PRIMARY KEY)",
        "CREATE TABLE nm_list.T (id INT PRIMARY KEY)",
        "CREATE TABLE nm_list.`a b` (id INT PRIMARY KEY)",
    )
    toml = mariadb.config_file(tmp_path, "nm", "nm_list.*")
    loader = str(Path(sys.executable).with_name("loader"))
    env = {
        **os.environ,
        "LOADER_TEST_PASSWORD": mariadb.password,
        "LOADER__TABLES__MODES": '{ "nm_list.t" = "history" }',
    }
    out = subprocess.run(
        [loader, "tables", "--config", str(toml), "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["database"] == "nm_wh"
    mapped = {(t["schema"], t["table"]): t["warehouse_table"] for t in data["tables"]}
    assert mapped == {
        ("nm_list", "T"): warehouse_table("nm_list", "T"),
        ("nm_list", "a b"): warehouse_table("nm_list", "a b"),
        ("nm_list", "t"): "nm_list__t",
    }
    assert len(set(mapped.values())) == 3
    assert all(t["loaded_at"] is None for t in data["tables"])
    assert {t["table"]: t["mode"] for t in data["tables"]} == {"T": "mirror", "a b": "mirror", "t": "history"}
    text = subprocess.run(
        [loader, "tables", "--config", str(toml)], capture_output=True, text=True, env=env, timeout=60
    )
    assert "`nm_list`.`a b` -> nm_list__a_b___" in text.stdout and "(mirror, not loaded yet)" in text.stdout
    assert "`nm_list`.`t` -> nm_list__t (history, not loaded yet)" in text.stdout
    assert text.stdout.startswith("3 selected tables -> warehouse database iceberg.nm_wh\n"), text.stdout
    # Iceberg tables are named in the Spark catalog that holds them.
    iceberg = subprocess.run(
        [loader, "tables", "--config", str(toml)],
        capture_output=True,
        text=True,
        env={**env, "LOADER__WAREHOUSE__FORMAT": "iceberg"},
        timeout=60,
    )
    assert iceberg.stdout.startswith("3 selected tables -> warehouse database iceberg.nm_wh\n"), (
        iceberg.stdout
    )
