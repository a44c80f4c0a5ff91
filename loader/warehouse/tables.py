"""Warehouse tables: their names, how rows are partitioned, creating them, and publishing a new
version of some of their partitions (write, swap in atomically, delete what the retention allows).

Materialisation and the initial load both write tables through here, so both lay them out alike.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from loader.core import crashpoints, modes
from loader.core.config import Config, TablesConfig, WarehouseConfig
from loader.core.errors import MaterializeError
from loader.core.naming import (
    INVALID_DATES_COLUMN,
    PARTITION_COLUMN,
    RESERVED_COLUMNS,
    SOURCE_COLUMN,
    legacy_warehouse_table,
    reserved_column_problem,
    warehouse_table,
)
from loader.core.tables import reload_remedy
from loader.staging.manifest import ColumnSpec
from loader.warehouse import types
from loader.warehouse.catalog import PartitionCatalog

# The partition column. Not "_part": the Hive metastore's partition filter parser refuses names
# that start with an underscore.
PART = PARTITION_COLUMN
# The Spark catalog Iceberg tables are in (``session.spark_conf`` configures it).
ICEBERG_CATALOG = "iceberg"
# Merge-on-read: a MERGE writes deletion vectors (format version 3; position delete files in
# version 2) and new rows, never rewrites the data files it touches.
ICEBERG_PROPERTIES = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}
INTEGER_KEY_TYPES = {"tinyint", "smallint", "mediumint", "int", "bigint"}


def quote_identifier(name: str) -> str:
    """A Spark SQL identifier, backquoted, with backquotes doubled."""
    return "`" + name.replace("`", "``") + "`"


def key_comparison(columns: list[str], values: list[str], op: str) -> str:
    """``(c0, c1, …) op (v0, v1, …)`` for ``op`` one of ``>``, ``>=``, ``<=``, spelled out as
    ``c0 > v0 OR (c0 = v0 AND c1 > v1) …`` (valid in MySQL and Spark SQL), so that a server can
    use the key's index."""
    strict = "<" if op.startswith("<") else ">"
    terms = []
    for i in range(len(columns)):
        equal = [f"{columns[j]} = {values[j]}" for j in range(i)]
        last = f"{columns[i]} {op if i == len(columns) - 1 else strict} {values[i]}"
        terms.append("(" + " AND ".join([*equal, last]) + ")")
    return "(" + " OR ".join(terms) + ")"


def has_integer_key(columns: list[ColumnSpec], key: list[str]) -> bool:
    """A single integer key column: the table is split by key ranges (else by hash buckets)."""
    types_by_name = {c.name: c.mysql_type for c in columns}
    return len(key) == 1 and types_by_name[key[0]].split()[0] in INTEGER_KEY_TYPES


def partition_expr(columns: list[ColumnSpec], key: list[str], partition_rows: int, buckets: int) -> str:
    """The SQL expression of a row's partition: its key range, or its key's hash bucket."""
    q = quote_identifier
    if has_integer_key(columns, key):
        return f"CAST(floor({q(key[0])} / {partition_rows}) AS BIGINT)"
    return f"CAST(pmod(xxhash64({', '.join(q(k) for k in key)}), {buckets}) AS BIGINT)"


def iceberg_key_partition(
    columns: list[ColumnSpec], key: list[str], partition_rows: int, buckets: int
) -> tuple[str, str, int]:
    """How an Iceberg table is partitioned by its key, as ``(transform, column, width)``: key
    ranges of ``partition_rows`` keys for a single integer key (``truncate``), else ``buckets``
    hash buckets of the first key column (``bucket``)."""
    if has_integer_key(columns, key):
        return "truncate", key[0], partition_rows
    return "bucket", key[0], buckets


def iceberg_partitioning(
    columns: list[ColumnSpec], key: list[str], partition_rows: int, buckets: int, shared: bool = False
) -> str:
    """An Iceberg table's partition transforms in SQL: its key's (``iceberg_key_partition``); a
    ``shared`` table is split by source first, so that each source's writes (a merge, a copy, a
    compaction) touch only its own files and two sources' commits never conflict."""
    transform, column, width = iceberg_key_partition(columns, key, partition_rows, buckets)
    by_key = f"{transform}({width}, {quote_identifier(column)})"
    return f"{SOURCE_COLUMN}, {by_key}" if shared else by_key


# The table property naming the source whose rows a warehouse table holds (the key Iceberg
# snapshots of the loader carry the source under too).
OWNER_PROPERTY = "loader.source"
# The table property of a table several sources are routed into, which has no owner: the key
# of its sources' tables (a JSON list of column names), which they all must have.
SHARED_PROPERTY = "loader.shared_key"


# The table property naming the table's warehouse mode (``loader.core.modes``); a table without it,
# made before modes, is a mirror.
MODE_PROPERTY = "loader.mode"


def iceberg_properties(
    source: str,
    wh: WarehouseConfig,
    new: bool = True,
    shared_key: list[str] | None = None,
    mode: str = modes.MIRROR,
) -> dict[str, str]:
    """The properties of an Iceberg warehouse table of ``source`` (or of a shared one, whose
    rows name their sources, keyed by ``shared_key``) in ``mode``; a ``new`` one gets the format
    version of ``wh`` (a table's version never goes down: a re-load keeps it)."""
    whose = {OWNER_PROPERTY: source} if shared_key is None else {SHARED_PROPERTY: json.dumps(shared_key)}
    properties = {**ICEBERG_PROPERTIES, **whose, MODE_PROPERTY: mode}
    if new:
        properties["format-version"] = str(wh.iceberg_format_version)
    return properties


def iceberg_properties_sql(
    source: str,
    wh: WarehouseConfig,
    new: bool = True,
    shared_key: list[str] | None = None,
    mode: str = modes.MIRROR,
) -> str:
    """The ``TBLPROPERTIES`` clause of ``iceberg_properties``."""
    properties = iceberg_properties(source, wh, new, shared_key, mode)
    return (
        "TBLPROPERTIES (" + ", ".join(f"'{k}' = {types.spark_string(v)}" for k, v in properties.items()) + ")"
    )


def table_properties(spark: Any, name: str) -> dict[str, str]:
    """The properties of the existing table ``name``."""
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def table_mode(properties: dict[str, str]) -> str:
    """The warehouse mode a table of these properties is in."""
    return properties.get(MODE_PROPERTY, modes.MIRROR)


def claim_table(
    spark: Any, source: str, name: str, shared: bool = False, key: list[str] | None = None
) -> dict[str, str]:
    """Make sure the existing warehouse table ``name`` holds the rows of ``source``: a table
    of another source (two sources of a deployment selecting the same table into one database)
    would mix two sources' changes, so it is refused; a table made before tables named their
    source is given this one. A table the source is routed into (``shared``) must be one made
    for routes, keyed as the source's table (``key``), and a table made for routes is no single
    source's.

    Returns the table's properties.

    Raises:
        MaterializeError: the table belongs to another source, or is shared while the source is
            not routed into it, or the other way round, or is keyed otherwise.
    """
    properties = table_properties(spark, name)
    owner = properties.get(OWNER_PROPERTY)
    shared_key = properties.get(SHARED_PROPERTY)
    if shared and shared_key is not None and key is not None and json.loads(shared_key) != key:
        raise MaterializeError(
            f"{name} is shared by the sources routed into it and keyed by {', '.join(json.loads(shared_key))}, "
            f"but the table of source {source!r} is keyed by {', '.join(key)}. The tables routed "
            "into one shared table must have the same key: make this one match the others, or route it "
            "into a table of its own (tables.routes)"
        )
    if shared != (shared_key is not None):
        raise MaterializeError(
            f"{name} is shared by the sources routed into it (tables.routes), and {source!r} "
            "has no route into it: route the table there too, or give the source its own "
            "[warehouse] database"
            if not shared
            else f"{name} holds the rows of source {owner!r} alone, so {source!r} cannot be "
            "routed into it: route into another table name (tables.routes), or re-create the table "
            "as a shared one (drop it, then load every source routed into it)"
        )
    if shared:
        return properties
    claim = f"ALTER TABLE {name} SET TBLPROPERTIES ({_owner_sql(source)})"
    if owner is None:
        spark.sql(claim)
    elif owner != source:
        raise MaterializeError(
            f"{name} holds the rows of source {owner!r}, not of {source!r}: two sources cannot "
            f"share a warehouse table. Give one of them its own [warehouse] database in its source file; "
            f"if the source was renamed from {owner!r}: {claim}"
        )
    return properties


def _owner_sql(source: str) -> str:
    """The owner property of the tables of ``source``, as a ``TBLPROPERTIES`` entry."""
    return f"'{OWNER_PROPERTY}' = {types.spark_string(source)}"


def database_name(warehouse: WarehouseConfig) -> str:
    """The warehouse database as Spark SQL names it (in the Iceberg catalog for Iceberg tables)."""
    database = quote_identifier(warehouse.database)
    return f"{ICEBERG_CATALOG}.{database}" if warehouse.format == "iceberg" else database


def ensure_database(spark: Any, wh: WarehouseConfig) -> None:
    """Create the warehouse database (an Iceberg namespace for Iceberg tables) if it is missing."""
    name = database_name(wh)
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}")
    except Exception:
        # Another source's job created it at the same moment (a JDBC catalog's create is a check
        # and an insert, and the later insert fails on its primary key): then it is there.
        if not _namespace_exists(spark, name):
            raise


def _namespace_exists(spark: Any, name: str) -> bool:
    try:
        spark.sql(f"DESCRIBE NAMESPACE {name}")
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class Target:
    """What a merge or a copy reads of the configuration: the source's name (on the tables it owns
    and on its rows in shared ones), its tables' routes, and the warehouse."""

    source: str
    tables: TablesConfig
    warehouse: WarehouseConfig

    @classmethod
    def of(cls, cfg: Config) -> Target:
        return cls(cfg.source.name, cfg.tables, cfg.warehouse)


def table_name(settings: Config | Target, schema: str, table: str) -> str:
    """The source table's warehouse table as Spark SQL names it: ```<database>`.`<name>```
    (``iceberg.`<database>`.`<name>``` for Iceberg tables), the name from
    ``TablesConfig.warehouse_name``."""
    name = settings.tables.warehouse_name(schema, table)
    return f"{database_name(settings.warehouse)}.{quote_identifier(name)}"


def source_filter(source: str, tables: TablesConfig, schema: str, table: str, alias: str = "") -> str:
    """The predicate that keeps ``source``'s rows of its warehouse table: those with its name in
    ``_source`` when ``tables`` routes the table into a shared one, every row otherwise (empty)."""
    if tables.route(schema, table) is None:
        return ""
    return rows_of_source(source, alias)


def rows_to_compare(mode: str, source: str, tables: TablesConfig, schema: str, table: str) -> str:
    """The predicate that keeps the rows of a warehouse table in ``mode`` that stand for the
    source table's rows now: ``source``'s (``source_filter``), live (``live_rows``); empty when
    that is every row."""
    own = source_filter(source, tables, schema, table)
    return " AND ".join(p for p in (own, live_rows(mode)) if p)


def source_column_sql(source: str) -> str:
    """The select item that names ``source`` on each row written into a shared table."""
    return f"{types.spark_string(source)} AS {SOURCE_COLUMN}"


def rows_of_source(source: str, alias: str = "") -> str:
    """The predicate that keeps ``source``'s rows of a shared table (alias ``alias``, if any)."""
    column = f"{alias}.{SOURCE_COLUMN}" if alias else SOURCE_COLUMN
    return f"{column} = {types.spark_string(source)}"


def legacy_tables(spark: Any, database: str, tables: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Source tables whose warehouse table is missing while a table under the name loader versions
    before ``loader.core.naming`` gave them exists (``naming.legacy_warehouse_table``): that table
    holds their rows, and materialising into a new, empty table would lose them.

    A legacy name that is also the current name of one of ``tables`` belongs to that table and
    is not reported (``T`` beside ``t``: the old ``s__t`` is ``t``'s).

    Returns:
        Each such source table and its legacy warehouse table name (without the database).
    """
    tables = list(tables)
    current = {warehouse_table(s, t) for s, t in tables}
    out = {}
    for schema, table in tables:
        old = legacy_warehouse_table(schema, table)
        if (
            old is not None
            and old not in current
            and not spark.catalog.tableExists(
                f"{quote_identifier(database)}.{quote_identifier(warehouse_table(schema, table))}"
            )
            and spark.catalog.tableExists(f"{quote_identifier(database)}.{quote_identifier(old)}")
        ):
            out[(schema, table)] = old
    return out


# The warehouse table's own data columns, after the source's (the partition column comes last).
# The change that wrote each row (``loader.core.modes``' contract) and the dates its types cannot hold.
META_COLUMNS = {
    modes.OP: "STRING",
    modes.SEQNO: "BIGINT",
    modes.ROWNO: "INT",
    modes.COMMIT_TS: "TIMESTAMP",
    modes.INTERVAL: "STRING",
    modes.LOADED_AT: "TIMESTAMP",
    INVALID_DATES_COLUMN: "MAP<STRING, STRING>",
}
META_DDL = ", ".join(f"{column} {kind}" for column, kind in META_COLUMNS.items())
# What each mode adds after them (``loader.core.modes.MODE_COLUMNS``).
MODE_COLUMN_TYPES = {
    modes.IS_DELETED: "BOOLEAN",
    modes.DELETED_AT: "TIMESTAMP",
    modes.VALID_FROM: "TIMESTAMP",
    modes.VALID_TO: "TIMESTAMP",
    modes.VALID_FROM_SEQNO: "BIGINT",
    modes.VALID_TO_SEQNO: "BIGINT",
    modes.IS_CURRENT: "BOOLEAN",
}


def own_columns_ddl(mode: str) -> str:
    """The DDL of a table's own columns in ``mode``: the change metadata, then the mode's."""
    return ", ".join([META_DDL, *(f"{c} {MODE_COLUMN_TYPES[c]}" for c in modes.MODE_COLUMNS[mode])])


def live_rows(mode: str, alias: str = "") -> str:
    """The predicate that keeps the rows of a table in ``mode`` that the source has now (alias
    ``alias``, if any): every row of a mirror; the rows not marked deleted; the current versions."""
    prefix = f"{alias}." if alias else ""
    if mode == modes.SOFT_DELETE:
        return f"NOT {prefix}{modes.IS_DELETED}"
    if mode == modes.HISTORY:
        return f"{prefix}{modes.IS_CURRENT}"
    return ""


def ensure_table(
    spark: Any,
    target: Target,
    schema: str,
    table: str,
    columns: list[ColumnSpec],
    *,
    key: list[str] | None = None,
    replace: bool = False,
    cause: str = "",
) -> dict[str, str]:
    """Create the table on first sight, or make it follow the source's ``columns``: columns added
    at the end are added, and a column whose type widened (``types.spark_widens``) is widened in
    place. ``replace`` (a re-load, which rewrites every row) takes ``columns`` whatever they were.
    ``cause`` (the statement that changed the table, if known) goes into the errors. ``key``
    (the primary key columns) partitions a new Iceberg table.

    Returns each column's warehouse (Spark) type, which staged values are cast to; a column the
    warehouse keeps wider than the source's type stays so.

    Raises:
        MaterializeError: the columns were dropped, renamed, moved or changed type in a way the
            table cannot follow; the message names the column and the remedy (a re-load). Or
            the table holds another source's rows (``claim_table``).
    """
    q = quote_identifier
    name = table_name(target, schema, table)
    iceberg = target.warehouse.format == "iceberg"
    reserved = reserved_column_problem(schema, table, (c.name for c in columns), target.warehouse.format)
    if reserved:
        raise MaterializeError(reserved)
    wanted = {c.name: types.spark_type(c.mysql_type) for c in columns}
    shared = target.tables.route(schema, table) is not None
    mode = target.tables.mode_of(schema, table)
    exists = spark.catalog.tableExists(name)
    mode_changes = False
    if exists:
        have = table_mode(claim_table(spark, target.source, name, shared, key))
        mode_changes = have != mode
        if mode_changes and (shared or not replace):
            raise MaterializeError(_mode_difference(name, schema, table, have, mode, shared))
    if iceberg and replace and not shared:
        return wanted  # the copy replaces the table, its columns with it (``replace_iceberg_table``)
    if not exists:
        cols = ", ".join(f"{q(c)} {t}" for c, t in wanted.items())
        if iceberg:
            partitioning = target.warehouse.partitioning(schema, table)
            partitioned = (
                f"PARTITIONED BY ({iceberg_partitioning(columns, key, *partitioning, shared=shared)}) "
                if key
                else ""
            )
            first = f"{SOURCE_COLUMN} STRING, " if shared else ""
            # Two shards' first merges can both find no shared table: the table of the one that
            # creates it first is kept, and the other's key and columns are checked against it
            # below, as against a table that was there.
            if_missing = "IF NOT EXISTS " if shared else ""
            properties = iceberg_properties_sql(
                target.source, target.warehouse, shared_key=key if shared else None, mode=mode
            )
            spark.sql(
                f"CREATE TABLE {if_missing}{name} ({first}{cols}, {own_columns_ddl(mode)}) USING iceberg "
                f"{partitioned}{properties}"
            )
            if not shared:
                return wanted
            have = table_mode(claim_table(spark, target.source, name, shared, key))
            if have != mode:
                raise MaterializeError(_mode_difference(name, schema, table, have, mode, shared))
        else:
            spark.sql(
                f"CREATE TABLE {name} ({cols}, {own_columns_ddl(mode)}, {PART} BIGINT) USING parquet "
                f"PARTITIONED BY ({PART}) TBLPROPERTIES ({_owner_sql(target.source)}, "
                f"'{MODE_PROPERTY}' = {types.spark_string(mode)})"
            )
            return wanted
    fields = spark.table(name).schema.fields
    existing = {f.name: f.dataType.simpleString() for f in fields if f.name not in RESERVED_COLUMNS}
    # Tables made by an older loader get the columns it did not write (NULL in their older rows).
    present = {f.name for f in fields}
    lacks_meta = any(column not in present for column in META_COLUMNS)
    if iceberg:
        _add_columns(spark, name, {c: kind for c, kind in META_COLUMNS.items() if c not in present})
    if shared:
        return _follow_shard(spark, name, existing, target.source, schema, table, wanted, cause)
    if replace:
        if existing != wanted or lacks_meta or mode_changes:
            _set_columns(spark, target, schema, table, wanted, mode)
        if mode_changes:
            spark.sql(
                f"ALTER TABLE {name} SET TBLPROPERTIES ('{MODE_PROPERTY}' = {types.spark_string(mode)})"
            )
        return wanted
    if list(wanted)[: len(existing)] != list(existing):
        raise MaterializeError(
            f"{name}: the source's columns {list(wanted)} do not continue the warehouse's "
            f"{list(existing)} (only columns added at the end can be carried){cause}; "
            + reload_remedy((schema, table))
        )
    widens = types.iceberg_widens if iceberg else types.spark_widens
    result = dict(existing)
    for column, have in existing.items():
        want = wanted[column]
        if widens(have, want):
            result[column] = want
        elif not types.spark_widens(want, have):
            raise MaterializeError(
                f"{name}: column {column} is {have} in the warehouse but the staged changes have "
                f"{want}, which it cannot hold{cause}; " + reload_remedy((schema, table))
            )
    if iceberg:
        for column, want in result.items():
            if want != existing[column]:  # Iceberg widens a column in its metadata only
                spark.sql(f"ALTER TABLE {name} ALTER COLUMN {q(column)} TYPE {want}")
    elif result != existing or lacks_meta:
        _set_columns(spark, target, schema, table, result, mode)
    added = {c: t for c, t in wanted.items() if c not in existing}
    _add_columns(spark, name, added)
    result.update(added)
    return result


def _add_columns(spark: Any, name: str, columns: dict[str, str]) -> None:
    """Add ``columns`` (name: Spark type) at the end of the table ``name``, if any."""
    if columns:
        q = quote_identifier
        spark.sql(
            f"ALTER TABLE {name} ADD COLUMNS (" + ", ".join(f"{q(c)} {t}" for c, t in columns.items()) + ")"
        )


def _mode_difference(name: str, schema: str, table: str, have: str, want: str, shared: bool) -> str:
    """Why a table in mode ``have`` cannot take the changes of a source table in mode ``want``."""
    if shared:
        return (
            f"{name} is a shared table in mode {have!r} and {schema}.{table} is in mode {want!r} "
            "(tables.mode, tables.modes): the sources routed into one shared table must give it the "
            f"same mode; set {schema}.{table}'s to {have!r}, or drop the shared table and load every "
            "source routed into it"
        )
    return (
        f"{name} is in mode {have!r} and [tables] makes {schema}.{table} {want!r}: a table takes "
        f"another mode by a re-load, which rebuilds it from the source (what {have!r} kept of "
        f"earlier changes is not carried): {reload_remedy((schema, table))}, or set its mode back "
        f"to {have!r} (tables.mode, tables.modes)"
    )


def _follow_shard(
    spark: Any,
    name: str,
    existing: dict[str, str],
    source: str,
    schema: str,
    table: str,
    wanted: dict[str, str],
    cause: str,
) -> dict[str, str]:
    """Make the shared table ``name`` hold a shard's columns ``wanted``: the shards of a table
    change their columns one after another, so a shard may have columns added at the end of the
    table's (they are added: the other shards' rows have NULL in them until they add them too), or
    lack the table's last ones (its rows have NULL in them); every other difference is refused.

    Returns the types of the table's columns, the shard's among them.
    """
    have, want = list(existing), list(wanted)
    common = min(len(have), len(want))
    if have[:common] != want[:common] or any(existing[c] != wanted[c] for c in have[:common]):
        raise MaterializeError(_shape_difference(name, existing, source, schema, table, wanted) + cause)
    added = {c: wanted[c] for c in want[common:]}
    _add_columns(spark, name, added)
    return {**existing, **added}


def _shape_difference(
    name: str, existing: dict[str, str], source: str, schema: str, table: str, wanted: dict[str, str]
) -> str:
    """Why a source's table cannot be merged into the shared table ``name``: its columns (names,
    order and types) do not continue the table's, nor the table's them, said column by column."""
    problems = [f"{c} is {wanted[c]}, not {t}" for c, t in existing.items() if c in wanted and wanted[c] != t]
    common = min(len(existing), len(wanted))
    if list(existing)[:common] != list(wanted)[:common]:
        problems.append(f"its columns come in the order {list(wanted)}, not {list(existing)}")
    return (
        f"{name} is shared by the sources routed into it and {schema}.{table} of source "
        f"{source!r} does not have its shape: {'; '.join(problems)}. The tables routed into "
        "one shared table must have the same columns, of the same types, in the same order (a "
        "column added at the end of one is added to the shared table): make this one match the "
        "others, or route it into a table of its own (tables.routes)"
    )


def _set_columns(
    spark: Any, target: Target, schema: str, table: str, columns: dict[str, str], mode: str
) -> None:
    """Give the table these data columns, and the own columns of ``mode``, in the catalog.
    Spark's SQL cannot change a Parquet table's column types or drop its columns, its external
    catalog can; files already written are read as the new types by column name (only
    widenings reach here without a re-load, which rewrites every file)."""
    q = quote_identifier
    jvm = spark.sparkContext._jvm
    ddl = ", ".join(f"{q(c)} {t}" for c, t in columns.items()) + f", {own_columns_ddl(mode)}"
    data_schema = jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl)
    spark._jsparkSession.sharedState().externalCatalog().alterTableDataSchema(
        target.warehouse.database, warehouse_table(schema, table), data_schema
    )
    spark.catalog.refreshTable(table_name(target, schema, table))


def publish_version(
    spark: Any,
    target: Target,
    schema: str,
    table: str,
    rows: Any,
    version: str,
    partitions: list[int] | None,
    catalog: PartitionCatalog | None = None,
) -> None:
    """Write ``rows`` (with their partition column) as a new version of the table, swap it in, and
    delete superseded versions past the retention.

    ``partitions``: the ones to swap; None replaces the whole table (every partition it has or
    the write made). ``catalog``: the table's partitions as the caller read them (else read here).
    """
    name = table_name(target, schema, table)
    if catalog is None:
        catalog = PartitionCatalog(spark, target.warehouse.database, warehouse_table(schema, table), PART)
    location = catalog.table_location()
    version_root = f"{location}/_versions/{version}"
    rows.write.mode("overwrite").partitionBy(PART).parquet(version_root)
    _mark_written(spark, version_root)
    crashpoints.reached("after version written")
    swap_in(spark, catalog, version_root, partitions, rows.drop(PART).schema, target.warehouse.swap_batch)
    spark.catalog.refreshTable(name)
    delete_old_versions(spark, catalog, location, target.warehouse.retention_hours)


def swap_in(
    spark: Any,
    catalog: PartitionCatalog,
    version_root: str,
    partitions: list[int] | None,
    row_schema: Any,
    batch: int,
) -> None:
    """Point each partition at its folder under ``version_root``, ``batch`` partitions per atomic
    catalog call.

    A partition the write left no folder for (all its rows went) gets an empty version; None
    swaps every partition the table has or the write made.
    """
    written = set(written_partitions(spark, version_root))
    if partitions is None:
        partitions = sorted(written | set(catalog.locations()))
    for p in partitions:
        if p not in written:
            empty_rows(spark, row_schema).write.mode("overwrite").parquet(f"{version_root}/{PART}={p}")
    for start in range(0, len(partitions), batch):
        catalog.point({p: f"{version_root}/{PART}={p}" for p in partitions[start : start + batch]})
        crashpoints.reached("after catalog swap")


def empty_rows(spark: Any, schema: Any) -> Any:
    """No rows, with this schema (a ``StructType``), as a DataFrame the JVM plans by itself.

    ``spark.createDataFrame([], schema)`` parallelises a Python list: each of its (empty) tasks
    needs a Python worker, and a job's first one costs seconds to start.
    """
    from pyspark.sql import DataFrame

    jschema = spark._jsparkSession.parseDataType(schema.json())
    return DataFrame(spark._jsparkSession.createDataFrame(spark._jvm.java.util.ArrayList(), jschema), spark)


def _filesystem(spark: Any, uri: str) -> tuple[Any, Any]:
    """Hadoop's FileSystem for a location (file:, hdfs:, s3a:, ...) and the location as a Path."""
    path = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def written_partitions(spark: Any, root: str) -> list[int]:
    """The partition values a partitioned write created folders for."""
    fs, path = _filesystem(spark, root)
    out = []
    for status in fs.listStatus(path):
        name = status.getPath().getName()
        if status.isDirectory() and name.startswith(f"{PART}="):
            out.append(int(name.split("=", 1)[1]))
    return out


def delete_old_versions(
    spark: Any, catalog: PartitionCatalog, location: str, retention_hours: float
) -> list[str]:
    """Delete the table's version folders no partition points at, once older than the retention.

    Returns the deleted folders. The retention keeps superseded versions for readers that
    planned their query before a swap (and for looking back after a bad run).
    """
    fs, root = _filesystem(spark, f"{location}/_versions")
    if not fs.exists(root):
        return []
    cutoff_ms = (time.time() - retention_hours * 3600) * 1000
    # Read again: a folder is deleted for good, so only the catalog's word now will do.
    live = [_without_scheme(p) + "/" for p in catalog.locations(fresh=True).values()]
    deleted = []
    for status in fs.listStatus(root):
        folder = status.getPath()
        path = _without_scheme(str(folder.toString())) + "/"
        if any(loc.startswith(path) for loc in live) or _written_ms(fs, folder) > cutoff_ms:
            continue
        fs.delete(folder, True)
        deleted.append(str(folder.toString()))
    return deleted


# An empty file at a version folder's root, written when its rows are: its time is the folder's.
# (Spark's own _SUCCESS marker stays in the staging folder of a dynamic partition overwrite.)
WRITTEN_MARKER = "_loader_written"


def _mark_written(spark: Any, version_root: str) -> None:
    fs, path = _filesystem(spark, f"{version_root}/{WRITTEN_MARKER}")
    fs.create(path, True).close()


def _written_ms(fs: Any, folder: Any) -> int:
    """When a version folder was written: its marker's time, else (a folder an older loader
    wrote, or one whose write was cut short) its newest file's time (an object store such as
    s3a gives a folder the time of the listing, not of the write). The marker first: walking
    every file of every folder the retention keeps took three calls to the JVM a file, on
    every merge."""
    marker = folder.suffix(f"/{WRITTEN_MARKER}")
    if fs.exists(marker):
        return int(fs.getFileStatus(marker).getModificationTime())
    files = fs.listFiles(folder, True)
    newest = 0
    while files.hasNext():
        newest = max(newest, files.next().getModificationTime())
    return newest


def _without_scheme(uri: str) -> str:
    """A location without ``file:`` (Hadoop writes local paths as file:/x or file:///x)."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return uri[len("file:") :] if uri.startswith("file:") else uri
