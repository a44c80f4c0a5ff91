"""The binlog reader as the rest of the loader uses it: a transport chosen by the config, and
committed transactions between two positions."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, overload

from loader.binlog.files import BinlogFiles
from loader.binlog.gtids import GtidSet
from loader.binlog.schema import InformationSchema, SchemaProvider
from loader.binlog.server import BinlogServer
from loader.binlog.transactions import NativeRun, OpenRows, TableFilter, Transaction, TransactionReader
from loader.binlog.transport import Transport, in_runs
from loader.core.config import SourceConfig
from loader.core.errors import ConfigError, DecodeError
from loader.core.positions import Position
from loader.source.connection import Credentials, connect, credentials


def open_transport(cfg: SourceConfig, location: str | None = None, server_id: int | None = None) -> Transport:
    """Files (``location``, or ``binlog_dir`` when the transport is ``files``) or the server, as
    the replica ``server_id`` (by default the config's; 0 reads without registering)."""
    if location:
        return BinlogFiles(location)
    if cfg.transport == "files":
        return BinlogFiles(cfg.binlog_dir)
    creds = credentials(cfg)
    return BinlogServer(creds, cfg.server_id if server_id is None else server_id, creds.read_timeout)


def native_decoder(source: SourceConfig) -> bool:
    """Whether rows are decoded by the native module (``[source] decoder``).

    Raises:
        ConfigError: the native decoder is asked for and not built: never the slow path unasked.
    """
    if source.decoder != "native":
        return False
    try:
        import loader._native  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"the native decoder (loader._native) is not built ({exc}): run make setup (or pip install .) "
            'to build it, or set [source] decoder = "python" to extract with the Python decoder'
        ) from None
    return True


@contextmanager
def source_schema(creds: Credentials) -> Iterator[SchemaProvider]:
    """Table schemas read from the source's information_schema, on a connection of their own
    opened when a schema is first asked for: a binlog with full metadata rarely needs one, and
    each range a process decodes would open it."""
    conn = _OnFirstUse(creds)
    try:
        yield InformationSchema(conn)
    finally:
        conn.close()


class _OnFirstUse:
    """A connection to the source, made when a cursor is first asked of it."""

    def __init__(self, creds: Credentials) -> None:
        self.creds = creds
        self.conn: Any = None

    def cursor(self) -> Any:
        if self.conn is None:
            self.conn = connect(self.creds)
        return self.conn.cursor()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


@overload
def read_transactions(
    transport: Transport,
    start: Position,
    end: Position | None,
    table_filter: TableFilter | None = None,
    schema: SchemaProvider | None = None,
    strict: bool = True,
    allow_partial_end: bool = False,
    skip_before: Mapping[tuple[str, str], Position] | None = None,
    max_open_changes: None = None,
    gtid_state: dict[int, str] | None = None,
    seqno_epoch: int = 0,
    mysql_gtids: GtidSet | None = None,
    native: bool = False,
    native_json: bool = False,
) -> Generator[Transaction, None, None]: ...


@overload
def read_transactions(
    transport: Transport,
    start: Position,
    end: Position | None,
    table_filter: TableFilter | None = None,
    schema: SchemaProvider | None = None,
    strict: bool = True,
    allow_partial_end: bool = False,
    skip_before: Mapping[tuple[str, str], Position] | None = None,
    max_open_changes: int | None = None,
    gtid_state: dict[int, str] | None = None,
    seqno_epoch: int = 0,
    mysql_gtids: GtidSet | None = None,
    native: bool = False,
    native_json: bool = False,
    *,
    runs: bool,
    budget: int | None = None,
) -> Generator[Transaction | OpenRows | NativeRun, None, None]: ...


def read_transactions(
    transport: Transport,
    start: Position,
    end: Position | None,
    table_filter: TableFilter | None = None,
    schema: SchemaProvider | None = None,
    strict: bool = True,
    allow_partial_end: bool = False,
    skip_before: Mapping[tuple[str, str], Position] | None = None,
    max_open_changes: int | None = None,
    gtid_state: dict[int, str] | None = None,
    seqno_epoch: int = 0,
    mysql_gtids: GtidSet | None = None,
    native: bool = False,
    native_json: bool = False,
    runs: bool = False,
    budget: int | None = None,
) -> Generator[Transaction | OpenRows | NativeRun, None, None]:
    """Committed transactions from ``start`` up to ``end`` (both transaction boundaries).

    ``skip_before`` passes over the rows of tables re-loaded after them, ``max_open_changes``
    hands out the rows of a large transaction before it commits, ``gtid_state`` receives the
    last MariaDB GTID read in each domain and ``mysql_gtids`` every MySQL one, ``seqno_epoch`` is
    the history the positions belong to, ``native`` decodes rows with the native module (see
    ``TransactionReader``); with ``runs`` too, whole transactions of a transport that hands out
    runs of events come as ``NativeRun``s, the native reader stopping at the transaction that
    brings the changes handed out to ``budget``; ``native_json`` has the native decoder write
    ``binlog show``'s JSON images instead of staging rows.

    Raises:
        DecodeError: when ``end`` falls inside a transaction (unless ``allow_partial_end``: then
            that transaction is left out).
    """
    reader = TransactionReader(
        table_filter=table_filter,
        schema=schema,
        strict=strict,
        skip_before=skip_before,
        max_open_changes=max_open_changes,
        gtid_state=gtid_state,
        seqno_epoch=seqno_epoch,
        mysql_gtids=mysql_gtids,
        native=native,
        native_json=native_json,
    )
    try:
        if native and runs:
            reader.scan_budget = budget
            files = getattr(transport, "runs", None)
            yield from reader.read_runs(files(start, end) if files else in_runs(transport.events(start, end)))
        else:
            yield from reader.read(transport.events(start, end))
    finally:
        transport.close()
    since = reader.open_since
    if since is not None and end is not None and not allow_partial_end:
        raise DecodeError(
            f"the end position {end} is inside the transaction that starts at {since}; "
            "an interval must end on a transaction boundary",
            str(end),
        )
