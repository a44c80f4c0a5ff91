"""The binlog reader as the rest of the loader uses it: a transport chosen by the config, and
committed transactions between two positions."""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, overload

from loader.binlog.files import BinlogFiles
from loader.binlog.gtids import GtidSet
from loader.binlog.schema import InformationSchema, SchemaProvider
from loader.binlog.server import BinlogServer
from loader.binlog.split import split_points
from loader.binlog.spool import stream_bytes
from loader.binlog.transactions import NativeRun, OpenRows, TableFilter, Transaction, TransactionReader
from loader.binlog.transport import Transport, in_runs
from loader.core.config import SourceConfig
from loader.core.errors import ConfigError, DecodeError
from loader.core.positions import Position
from loader.source.connection import Credentials, binary_logs, connect, credentials


def open_transport(
    cfg: SourceConfig,
    location: str | None = None,
    server_id: int | None = None,
    creds: Credentials | None = None,
) -> Transport:
    """Files (``location``, or ``binlog_dir`` when the transport is ``files``) or the server, as
    the replica ``server_id`` (by default the config's; 0 reads without registering), logged in
    with ``creds`` (by default the config's)."""
    if location:
        return BinlogFiles(location)
    if cfg.transport == "files":
        return BinlogFiles(cfg.binlog_dir)
    creds = creds or credentials(cfg)
    return BinlogServer(creds, cfg.server_id if server_id is None else server_id, creds.read_timeout)


@dataclass(frozen=True)
class SourceLog:
    """One source's binlog as an extract reads it, settled once from its settings: its transport
    (the files, or the server's stream), whether rows are decoded natively, and the login that
    reads the table schemas the log does not carry. Crosses process boundaries."""

    source: SourceConfig
    native: bool
    creds: Credentials

    @classmethod
    def of(cls, source: SourceConfig) -> SourceLog:
        """Raises ConfigError: the native decoder is asked for and not built."""
        return cls(source, native_decoder(source), credentials(source))

    def open(self) -> Transport:
        """A transport over the log (each decoding process opens its own)."""
        return open_transport(self.source, creds=self.creds)

    def schemas(self) -> AbstractContextManager[SchemaProvider]:
        """The source's table schemas, on a connection opened when one is first asked for."""
        return source_schema(self.creds)

    def bytes_between(self, start: Position, end: Position) -> int:
        """Bytes of binlog in ``[start, end)``, from the sizes of the files or the server's list
        (asked only when the range spans files)."""
        sizes: dict[str, int] = {}
        if self.source.transport == "files":
            sizes = {p.name: p.stat().st_size for p in BinlogFiles(self.source.binlog_dir).list_files()}
        elif start.file != end.file:
            conn = connect(self.creds)
            try:
                sizes = binary_logs(conn)
            finally:
                conn.close()
        return stream_bytes(sizes, start, end)

    def cut(self, start: Position, end: Position, parts: int) -> list[tuple[Position, Position]]:
        """``[start, end)`` of the files cut at transaction starts into up to ``parts`` ranges of
        similar sizes (a server's stream is cut as it is spooled: ``spool.spool_pieces``)."""
        cuts = [start, *split_points(BinlogFiles(self.source.binlog_dir), start, end, parts), end]
        return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]


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
