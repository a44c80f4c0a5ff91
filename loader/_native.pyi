"""The loader's native module (native/, Rust): built by make setup and ``pip install``."""

def float_text(value: float) -> str:
    """The text Python's ``repr`` gives ``value``."""

# (kind, a, b, c, labels): see ``loader.binlog.nativeplan.column_spec``.
ColumnSpec = tuple[str, int, int, int, list[str] | None]

class RowPlan:
    """A table map's plan: decodes its rows events' images into staging rows."""

    def __init__(self, columns: list[ColumnSpec]) -> None: ...
    def encode(self, data: bytes, rows_off: int, kind: str) -> EncodedRows:
        """The change rows of ``data[rows_off:]`` (every column present); ValueError on bad bytes."""

class EncodedRows:
    """The change rows of one rows event, waiting for their seqno and commit time."""

    @property
    def changes(self) -> int: ...
    def csv(self, seqno: int, first_row_id: int, commit_ts: str) -> bytes: ...
    def lines(self, seqno: int, first_row_id: int, commit_ts: str) -> list[bytes]: ...
