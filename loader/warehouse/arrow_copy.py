"""The initial load's copy of a table without Spark's reading and writing (``[load] engine =
"arrow"``).

Each key range of the table (``initial_load.key_ranges``, ``load.parallelism`` at a time, a
thread and a source connection each) is read by the native reader (``source.rows``), cast as
``arrow_types`` says (the values Spark's copy gives) and written by pyarrow as Parquet data files
of the new table, a file per partition a batch of rows has, the columns carrying their Iceberg
ids. Iceberg's own catalog API (the Spark job's JVM) then creates the table with those files in
one commit, as Spark's CREATE TABLE … AS SELECT does (``iceberg.replace_table``): the same
schema, partition spec and properties, format version 3 (which pyiceberg cannot commit), each
file's metrics read from its footer, and a snapshot whose summary names the load. Readers see no
table until then.

It copies into an Iceberg table in a local warehouse folder, a new one or one it replaces (a
re-load: readers see the old rows until the commit, the table's history keeps them); a
``soft_delete`` or ``history`` table loaded again (which keeps what it knew), a table several
sources share, Hive-format tables and a warehouse on S3 or HDFS stay Spark's (``unsupported``
says why).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import datetime as dt
import itertools
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from loader.core import modes
from loader.core.config import Config, arrow_engine_problem
from loader.core.driver import pymysql
from loader.core.errors import LoadError, TransientError
from loader.core.naming import INVALID_DATES_COLUMN
from loader.source.connection import LOST_CONNECTION, Credentials, connect
from loader.source.rows import row_batches
from loader.state.records import Load
from loader.warehouse import arrow_types, iceberg, resync
from loader.warehouse import types as type_map
from loader.warehouse.tables import (
    ICEBERG_CATALOG,
    iceberg_key_partition,
    iceberg_properties,
    quote_identifier,
    table_mode,
    table_name,
    table_properties,
)

Progress = Callable[[str], None]

# The Spark session's zone, in which TIMESTAMP values are read as text (``types.cast_sql``).
_SESSION = "SET time_zone = '+00:00'"
_INVALID_DATES_TYPE = "map<string,string>"


def unsupported(spark: Any, cfg: Config, schema: str, table: str) -> str | None:
    """Why this engine leaves the copy of ``schema.table`` to Spark; None when it copies it."""
    problem = arrow_engine_problem(cfg.warehouse)
    if problem is not None:
        return problem
    if cfg.tables.route(schema, table) is not None:
        return "its warehouse table is shared by several sources (tables.routes)"
    mode = cfg.tables.mode_of(schema, table)
    name = table_name(cfg, schema, table)
    if (
        mode != modes.MIRROR
        and spark.catalog.tableExists(name)
        and table_mode(table_properties(spark, name)) == mode
    ):
        return f"a {mode} table loaded again keeps what it knew of the rows the copy lacks"
    return None


def _java_map(jvm: Any, items: dict[str, str]) -> Any:
    out = jvm.java.util.HashMap()
    for key, value in items.items():
        out.put(key, value)
    return out


def copy_table(
    spark: Any,
    cfg: Config,
    creds: Credentials,
    info: Any,
    ranges: list[str],
    load: Load,
    progress: Progress,
    readers: threading.Semaphore | None = None,
) -> int:
    """Copy ``info`` (an ``initial_load.SourceTableInfo``) read in key ``ranges`` (predicates on
    the key's columns) into its warehouse table, new or replaced; the rows copied. ``readers``:
    taken by each range while it is read, when tables copied at once share their readers."""
    mode = cfg.tables.mode_of(info.schema, info.table)
    columns = [(c.name, type_map.spark_type(c.mysql_type)) for c in info.columns]
    constants = resync.copied_change_values(load.seqno, load.started_at, load.id)
    constants.append((modes.LOADED_AT, "timestamp", _now_text()))
    after = resync.copied_mode_values(mode, load.seqno, load.started_at)
    every = [
        *columns,
        *((n, k) for n, k, _ in constants),
        (INVALID_DATES_COLUMN, _INVALID_DATES_TYPE),
        *((n, k) for n, k, _ in after),
    ]
    arrow_schema = pa.schema([pa.field(n, arrow_types.arrow_type(k)) for n, k in every])
    created = _create_table_transaction(spark, cfg, info, every, mode)
    table = created.table()
    files = _DataFiles(_pyiceberg_metadata(spark, table), table.location())
    select = ", ".join(arrow_types.select_sql(quote_identifier(c.name), c.mysql_type) for c in info.columns)
    source_sql = f"SELECT {select} FROM {info.sql_name}"

    def batch_table(values: list[pa.Array]) -> pa.Table:
        rows = len(values[0])
        out, lost = [], []
        for column, raw in zip(info.columns, values, strict=True):
            typed, invalid = arrow_types.to_arrow(raw, column.mysql_type)
            out.append(typed)
            if invalid is not None:
                lost.append((column.name, invalid))
        out += [_repeat(kind, value, rows) for _, kind, value in constants]
        out.append(arrow_types.invalid_dates(lost, rows))
        out += [_repeat(kind, value, rows) for _, kind, value in after]
        return pa.Table.from_arrays(out, schema=arrow_schema)

    told = _Told(info.qualified, len(ranges), info.estimated_rows, progress)

    def _failed(predicate: str, why: str) -> LoadError:
        return LoadError(
            f"{info.qualified}: the copy of key range {predicate} for initial load {load.id} (P0 "
            f"{load.p0}) failed: {why}. Nothing of the table was committed; run the load again "
            "once the cause is mended"
        )

    def copy_range(predicate: str) -> tuple[int, list[tuple[str, Partition]]]:
        with readers or contextlib.nullcontext():
            return read_range(predicate)

    def read_range(predicate: str) -> tuple[int, list[tuple[str, Partition]]]:
        conn = connect(creds)
        try:
            with conn.cursor() as cur:
                cur.execute(_SESSION)
            rows = 0
            out = files.of_range()
            try:
                for values in row_batches(conn, f"{source_sql} WHERE {predicate}", len(info.columns)):
                    batch = batch_table(values)
                    rows += batch.num_rows
                    out.write(batch)
                    told.rows(batch.num_rows)
            finally:
                written = out.close()
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in LOST_CONNECTION:
                raise TransientError(
                    f"{creds.where}: lost the connection copying key range {predicate} of {info.qualified} "
                    f"for initial load {load.id} (P0 {load.p0}): {exc.args[-1]}. Nothing of the table was "
                    "committed; the load's next run copies it again"
                ) from exc
            raise _failed(predicate, f"{creds.where} answered {exc.args[-1] if exc.args else exc}") from exc
        except (pymysql.err.Error, ValueError, pa.ArrowException) as exc:
            raise _failed(predicate, str(exc)) from exc
        finally:
            conn.close()
        told.range_done()
        return rows, written

    with concurrent.futures.ThreadPoolExecutor(max(1, cfg.load.parallelism)) as pool:
        parts = list(pool.map(copy_range, ranges))
    summary = {iceberg.SOURCE: cfg.source.name, iceberg.LOAD: load.id}
    _commit(spark, created, [f for _, written in parts for f in written], summary)
    return sum(rows for rows, _ in parts)


class _Told:
    """A table's copy as its key ranges' threads report it: each range done, and every
    ``every`` seconds the rows copied so far."""

    def __init__(
        self, table: str, ranges: int, estimated: int, progress: Progress, every: float = 5.0
    ) -> None:
        self._table, self._ranges, self._estimated = table, ranges, estimated
        self._progress, self._every = progress, every
        self._lock = threading.Lock()
        self._done = self._copied = 0
        self._last = time.monotonic()

    def rows(self, count: int) -> None:
        with self._lock:
            self._copied += count
            if time.monotonic() - self._last >= self._every:
                self._last = time.monotonic()
                self._progress(f"{self._table}: {self._copied:,} of ~{self._estimated:,} rows copied")

    def range_done(self) -> None:
        with self._lock:
            self._done += 1
            self._progress(
                f"{self._table}: {self._done}/{self._ranges} key ranges copied ({self._copied:,} rows)"
            )


def _now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _create_table_transaction(
    spark: Any, cfg: Config, info: Any, columns: list[tuple[str, str]], mode: str
) -> Any:
    """Iceberg's transaction creating the warehouse table of ``info`` with ``columns`` (name,
    Spark type), or replacing it (a re-load: its history stays, a column keeps its id), as
    Spark's CREATE OR REPLACE TABLE … AS SELECT does: the schema converted from Spark's (every
    column optional), the key's partition transform (``tables.iceberg_key_partition``), the
    table's properties (``tables.iceberg_properties``), the catalog's default location; a new
    table's owner the Spark user."""
    jvm = spark._jvm
    iceberg_api = jvm.org.apache.iceberg
    ddl = ", ".join(f"{quote_identifier(n)} {k}" for n, k in columns)
    struct = jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl).asNullable()
    schema = iceberg_api.spark.SparkSchemaUtil.convert(struct)
    transform, column, width = iceberg_key_partition(
        info.columns, info.key, *cfg.warehouse.partitioning(info.schema, info.table)
    )
    spec = getattr(iceberg_api.PartitionSpec.builderFor(schema), transform)(column, width).build()
    catalog = iceberg_api.spark.Spark3Util.loadIcebergCatalog(spark._jsparkSession, ICEBERG_CATALOG)
    levels = spark.sparkContext._gateway.new_array(jvm.java.lang.String, 1)
    levels[0] = cfg.warehouse.database
    identifier = iceberg_api.catalog.TableIdentifier.of(
        iceberg_api.catalog.Namespace.of(levels), cfg.tables.warehouse_name(info.schema, info.table)
    )
    if catalog.tableExists(identifier):
        properties = iceberg_properties(cfg.source.name, cfg.warehouse, new=False, mode=mode)
        return catalog.newReplaceTableTransaction(identifier, schema, spec, _java_map(jvm, properties), False)
    properties = iceberg_properties(cfg.source.name, cfg.warehouse, mode=mode)
    properties["owner"] = spark.sparkContext.sparkUser()  # as Spark's CREATE TABLE sets it
    return catalog.newCreateTableTransaction(identifier, schema, spec, _java_map(jvm, properties))


def _pyiceberg_metadata(spark: Any, table: Any) -> Any:
    """The metadata of the table being created, as pyiceberg reads it (its writer's input)."""
    from pyiceberg.table.metadata import TableMetadataUtil

    return TableMetadataUtil.parse_raw(iceberg.metadata_json(spark, table.operations().current()))


# Iceberg's default ``write.target-file-size-bytes``: a data file is closed once it holds this much.
TARGET_FILE_BYTES = 512 << 20


class _DataFiles:
    """Writes a table's rows as Parquet data files under its location, as Iceberg's writers lay
    them out: each key range's rows of each partition (``tables.iceberg_key_partition``) in files of up to the table's target size, the columns carrying their Iceberg ids;
    compressed as the table's properties say."""

    def __init__(self, metadata: Any, location: str) -> None:
        from pyiceberg.io.pyarrow import schema_to_pyarrow

        self._metadata = metadata
        self.location = location.rstrip("/")
        self.schema = schema_to_pyarrow(metadata.schema(), include_field_ids=True)
        self._numbers = itertools.count()
        self._prefix = uuid.uuid4()
        properties = metadata.properties
        level = properties.get("write.parquet.compression-level")
        self.options = {
            "compression": properties.get("write.parquet.compression-codec", "zstd"),
            "compression_level": int(level) if level else None,
        }
        self.target = int(properties.get("write.target-file-size-bytes", TARGET_FILE_BYTES))

    def file_name(self) -> str:
        """A new data file's name, unique in the table."""
        return f"{next(self._numbers):05d}-{self._prefix}.parquet"

    def of_range(self) -> _RangeFiles:
        """A writer of one key range's batches (one thread's)."""
        return _RangeFiles(self)

    def partitions(self, batch: pa.Table) -> list[tuple[Partition, pa.Table]]:
        """The batch's rows by partition (the table's one partition field): each one's value and
        folder (``name=value`` escaped, as Iceberg's writers name it). A key range within one
        partition (the common case) is written as it is."""
        import pyarrow.compute as pc
        from pyiceberg.typedef import Record

        spec, schema = self._metadata.spec(), self._metadata.schema()
        (field,) = spec.fields
        source = schema.find_field(field.source_id)
        values = field.transform.pyarrow_transform(source.field_type)(batch.column(source.name))
        found = pc.unique(values).to_pylist()

        def partition(value: Any) -> Partition:
            return Partition(value, spec.partition_to_path(Record(value), schema))

        if len(found) == 1:
            return [(partition(found[0]), batch)]
        return [(partition(v), batch.filter(pc.equal(values, v))) for v in found]


@dataclasses.dataclass(frozen=True)
class Partition:
    """A data file's partition: the value of the table's partition field (an integer: a key's
    truncated value or bucket; None for a NULL key) and the folder its files go into."""

    value: int | None
    folder: str


class _RangeFiles:
    """One key range's data files: a file open per partition its rows have, closed once it holds
    the target size or the range ends."""

    def __init__(self, files: _DataFiles) -> None:
        import pyarrow.fs as pafs

        self._files = files
        self._fs, self._root = pafs.FileSystem.from_uri(files.location)
        self._open: dict[Partition, tuple[Any, Any, str]] = {}  # writer, stream, name
        self.written: list[tuple[str, Partition]] = []  # (path, a URI as the table's location; partition)

    def write(self, batch: pa.Table) -> None:
        import pyarrow.parquet as pq

        files = self._files
        for partition, rows in files.partitions(batch):
            if partition not in self._open:
                name = files.file_name()
                folder = f"{self._root}/data/{partition.folder}"
                self._fs.create_dir(folder, recursive=True)
                stream = self._fs.open_output_stream(f"{folder}/{name}", buffer_size=1 << 20)
                self._open[partition] = (
                    pq.ParquetWriter(stream, files.schema, **files.options),
                    stream,
                    name,
                )
            writer, stream, _ = self._open[partition]
            writer.write_table(rows.cast(files.schema))
            if stream.tell() >= files.target:
                self._close(partition)

    def close(self) -> list[tuple[str, Partition]]:
        """Close the files still open; every file written."""
        for partition in list(self._open):
            self._close(partition)
        return self.written

    def _close(self, partition: Partition) -> None:
        writer, stream, name = self._open.pop(partition)
        writer.close()
        stream.close()
        self.written.append((f"{self._files.location}/data/{partition.folder}/{name}", partition))


def _commit(spark: Any, created: Any, files: list[tuple[str, Partition]], summary: dict[str, str]) -> None:
    """Append the data files (path, partition) in the snapshot creating the table, with
    ``summary`` in its summary; each file's metrics read from its footer as Iceberg's Spark
    writer keeps them (the table's metrics settings). The partition is given to Iceberg as its
    value: a folder's name is escaped text, which Iceberg does not read back (a key column named
    ``key col`` is ``key+col_trunc=0``)."""
    jvm = spark._jvm
    iceberg_api = jvm.org.apache.iceberg
    table = created.table()
    spec = table.spec()
    metrics = iceberg_api.MetricsConfig.forTable(table)
    append = created.newAppend()
    for path, partition in files:
        source = table.io().newInputFile(path)
        append.appendFile(
            iceberg_api.DataFiles.builder(spec)
            .withInputFile(source)
            .withFormat(iceberg_api.FileFormat.PARQUET)
            .withMetrics(iceberg_api.parquet.ParquetUtil.fileMetrics(source, metrics))
            .withPartitionValues(_partition_values(jvm, partition.value))
            .build()
        )
    for key, value in summary.items():
        append.set(key, value)
    append.commit()
    created.commitTransaction()


def _partition_values(jvm: Any, value: int | None) -> Any:
    """The Java list of a data file's partition values as Iceberg parses them (the one field's
    decimal text; a NULL key's null)."""
    out = jvm.java.util.ArrayList()
    out.add(None if value is None else str(value))
    return out


def _repeat(kind: str, value: resync.Value, rows: int) -> pa.Array:
    """A constant column of ``rows`` rows (a timestamp's value is its UTC text)."""
    target = arrow_types.arrow_type(kind)
    if value is None:
        return pa.nulls(rows, target)
    if kind == "timestamp":
        one = pa.array([value], pa.large_string()).cast(pa.timestamp("us")).cast(target)
    else:
        one = pa.array([value], target)
    return one.take(pa.array(np.zeros(rows, np.int32)))
