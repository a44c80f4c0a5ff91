"""One frozen record per event type; ``parser.parse_event`` builds them.

Rows events keep their row data undecoded: rows are decoded against a compiled table plan
(``rowplan``) only for the tables that are wanted.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Header:
    """The 19-byte v4 event header, plus where the event starts."""

    timestamp: int
    type: int
    server_id: int
    size: int
    log_pos: int
    flags: int
    pos: int


@dataclass(frozen=True, slots=True)
class FormatDescription:
    """Describes how the rest of the file is written."""

    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: int

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def post_header_len(self, event_type: int) -> int:
        """The post-header length of an event type, 0 for types this server did not know."""
        i = event_type - 1
        return self.post_header_lengths[i] if 0 <= i < len(self.post_header_lengths) else 0


@dataclass(frozen=True, slots=True)
class Rotate:
    """The next file and the position to continue at."""

    position: int
    next_file: str


@dataclass(frozen=True, slots=True)
class Stop:
    """The server stopped; the next file continues the log."""


@dataclass(frozen=True, slots=True)
class Query:
    """A statement: BEGIN, COMMIT, ROLLBACK, SAVEPOINT, DDL, or a statement-logged DML."""

    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    query: str


@dataclass(frozen=True, slots=True)
class Xid:
    """The commit of a transaction on a transactional engine."""

    xid: int


@dataclass(frozen=True, slots=True)
class XaPrepare:
    """XA PREPARE of an XA transaction (its rows commit later with XA COMMIT)."""

    one_phase: bool


@dataclass(frozen=True, slots=True)
class Column:
    """One column as the table map describes it, optional metadata folded in."""

    index: int
    type: int
    meta: int
    nullable: bool
    real_type: int
    name: str | None = None
    unsigned: bool | None = None
    collation: int | None = None
    labels: tuple[str, ...] | None = None
    visible: bool = True


@dataclass(frozen=True, slots=True)
class TableMap:
    """Maps a table id to a table and its columns for the rows events that follow."""

    table_id: int
    flags: int
    schema: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[int, ...] | None
    has_full_metadata: bool

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True, slots=True)
class Rows:
    """A Write/Update/Delete/Partial_update rows event; ``data[rows_off:]`` holds the images."""

    kind: str  # "I", "U" or "D"
    table_id: int
    flags: int
    column_count: int
    present: int  # bitmap of columns in the (before) image
    present_after: int  # bitmap of columns in the after image of an update; else == present
    partial: bool  # PARTIAL_UPDATE_ROWS: after images may hold JSON diffs
    data: bytes = field(repr=False)
    rows_off: int = 0


@dataclass(frozen=True, slots=True)
class Gtid:
    """MySQL GTID, anonymous GTID or tagged GTID: starts a transaction."""

    anonymous: bool
    flags: int
    sid: str
    gno: int
    tag: str = ""
    last_committed: int = 0
    sequence_number: int = 0
    immediate_commit_ts: int = 0  # microseconds since the epoch, 0 when not written
    original_commit_ts: int = 0

    def text(self) -> str:
        if self.anonymous:
            return "ANONYMOUS"
        return f"{self.sid}:{self.tag}:{self.gno}" if self.tag else f"{self.sid}:{self.gno}"


@dataclass(frozen=True, slots=True)
class PreviousGtids:
    """MySQL: the GTID set executed before this binlog file (its second event)."""

    gtids: str  # as the server prints it (``gtids.GtidSet.text``)


@dataclass(frozen=True, slots=True)
class MariaGtid:
    """MariaDB GTID: starts a transaction (or a standalone statement)."""

    seq_no: int
    domain_id: int
    flags: int
    commit_id: int = 0

    FL_STANDALONE = 1

    @property
    def standalone(self) -> bool:
        return bool(self.flags & self.FL_STANDALONE)

    def text(self, server_id: int) -> str:
        return f"{self.domain_id}-{server_id}-{self.seq_no}"


@dataclass(frozen=True, slots=True)
class TransactionPayload:
    """MySQL 8 compressed transaction: the inner events, already decompressed."""

    compression: int
    uncompressed_size: int
    payload: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class Incident:
    """The server lost events here (for example on a failed statement)."""

    code: int
    message: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Sent by the server when idle; carries the current file name."""

    log_file: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """An event the loader never needs (GTID lists, annotations, variables, unknown ignorables)."""

    reason: str


Body = (
    FormatDescription
    | Rotate
    | Stop
    | Query
    | Xid
    | XaPrepare
    | TableMap
    | Rows
    | Gtid
    | MariaGtid
    | PreviousGtids
    | TransactionPayload
    | Incident
    | Heartbeat
    | Skipped
)


@dataclass(frozen=True, slots=True)
class Event:
    """A parsed event: its header and the record of its type."""

    header: Header
    body: Body
