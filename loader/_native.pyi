"""The loader's native module (native/, Rust): built by make setup and ``pip install``."""

def float_text(value: float) -> str:
    """The text Python's ``repr`` gives ``value``."""

def json_text(data: bytes) -> str:
    """``jsonb.json_text`` of a MySQL binary JSON document; ValueError where the native path
    leaves the document to the Python decoder."""

# (kind, a, b, c, labels): see ``loader.binlog.nativeplan.column_spec``.
ColumnSpec = tuple[str, int, int, int, list[str] | None]

class RowPlan:
    """A table map's plan: decodes its rows events' images into staging rows."""

    def __init__(self, columns: list[ColumnSpec]) -> None: ...
    def encode(self, data: bytes, rows_off: int, kind: str) -> EncodedRows:
        """The change rows of ``data[rows_off:]`` (every column present); ValueError on bad bytes."""
    def encode_json(self, data: bytes, rows_off: int, kind: str, keys: tuple[bytes, ...]) -> EncodedRows:
        """The images as ``binlog show``'s JSON objects, ``keys`` the names as JSON text."""

class EncodedRows:
    """The change rows of one rows event, waiting for their seqno and commit time."""

    @property
    def changes(self) -> int: ...
    def csv(self, seqno: int, first_row_id: int, commit_ts: str) -> bytes: ...
    def lines(self, seqno: int, first_row_id: int, commit_ts: str) -> list[bytes]: ...
    def json_lines(self, head: bytes, first_row_id: int, middle: bytes) -> bytes: ...

def whole_events(data: bytes) -> int:
    """Bytes of whole events at the start of ``data``, before a rotate, stop or format description."""

def transaction_start(data: bytes, target: int) -> tuple[int, int]:
    """``(offset, status)`` of the first transaction start at or after ``target`` in ``data``
    (``split._transaction_start_python`` is the reference)."""

# (table, plan, rows, byte ends, changes, deletes, first offset); the arrays are native u64s.
Segment = tuple[int, int, bytes, bytes, bytes, bytes, int]

class Scanner:
    """Whole transactions of runs of events, decoded natively for the table maps registered."""

    def __init__(self, checksum: bool, post_header: bytes) -> None: ...
    def register_native(
        self,
        table_map: bytes,
        plan: RowPlan,
        table: int,
        json: tuple[tuple[bytes, ...], bytes, bytes] | None = None,
    ) -> int: ...
    def register_other(self, table_map: bytes, python: bool) -> None: ...
    def clear(self) -> None: ...
    def scan(
        self,
        data: bytes,
        start: int,
        seqno_base: int,
        file_pos: int,
        gap_offsets: tuple[int, ...],
        gap_positions: tuple[int, ...],
        budget: int,
        max_open: int,
        json_file: bytes | None = None,
    ) -> ScanResult: ...

class ScanResult:
    """What a scan took."""

    @property
    def consumed(self) -> int: ...
    @property
    def end_pos(self) -> int: ...
    @property
    def transactions(self) -> int: ...
    @property
    def changes(self) -> int: ...
    @property
    def seqno_min(self) -> int | None: ...
    @property
    def seqno_max(self) -> int | None: ...
    @property
    def commit_ts_max(self) -> int | None: ...
    @property
    def gtids(self) -> list[tuple[int, int, int]]: ...
    @property
    def mysql_gtids(self) -> list[tuple[bytes, int, int]]: ...
    @property
    def last_gtid(self) -> int | None: ...
    @property
    def stop(self) -> str: ...
    @property
    def segments(self) -> list[Segment]: ...
    @property
    def json(self) -> bytes: ...

class PacketStream:
    """A replication stream's packets to runs of events."""

    def __init__(self) -> None: ...
    def feed(
        self, chunk: bytes, limit: int, most: int
    ) -> list[bytes | tuple[int, bytes, list[int], list[int], int]]:
        """``chunk`` added; then a run ``(first position, events, gap offsets, gap positions,
        end)`` and/or a packet's payload to read; none when more must be read."""

class TextRows:
    """A text-protocol result set's rows to Arrow-layout columns (large binary)."""

    def __init__(self, width: int) -> None: ...
    def feed(self, chunk: bytes) -> tuple[bool, bytes | None]:
        """``chunk`` taken in: ``(done, error)``, done once the end-of-rows packet was read,
        error the payload of an error packet sent instead."""
    def take(self) -> tuple[int, list[tuple[bytes | None, bytes, bytes]]]:
        """The rows read since the last take: ``(rows, [(validity or None, offsets, values)])``."""
