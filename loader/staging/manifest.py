"""The interval manifest: what an interval holds, written after its data files (DESIGN.md §3).

An interval without a manifest does not exist for the materialiser. The manifest is JSON with a
``version``; it holds no timestamps of its own, so extracting an interval again writes the same
bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from loader.core.errors import ManifestError
from loader.staging import versioned

MANIFEST_VERSION = 2


def _checksum_named(fields: dict[str, Any]) -> dict[str, Any]:
    """Version 1 recorded each file's SHA-256 as ``sha256``; version 2 a ``checksum`` naming its
    algorithm (see ``checksums``)."""
    tables = fields.get("tables")
    for table in tables if isinstance(tables, list) else []:
        files = table.get("files") if isinstance(table, dict) else None
        for entry in files if isinstance(files, list) else []:
            if isinstance(entry, dict) and "sha256" in entry:
                entry["checksum"] = f"sha256:{entry.pop('sha256')}"
    return fields


UPGRADES = {1: _checksum_named}


@dataclass(frozen=True)
class ColumnSpec:
    """A column of a file: its name and MySQL type (see ``rowplan.PlanColumn.mysql_type``)."""

    name: str
    mysql_type: str


@dataclass
class FileEntry:
    """One CSV part."""

    path: str
    layout: int  # index into the table's layouts
    rows: int
    ops: dict[str, int]
    bytes: int
    checksum: str  # "<algorithm>:<hex digest>" of the file's bytes (see ``checksums``)


@dataclass
class TableEntry:
    """Everything one interval holds for one table."""

    schema: str
    table: str
    primary_key: list[str]
    layouts: list[list[ColumnSpec]] = field(default_factory=list)
    files: list[FileEntry] = field(default_factory=list)
    statements: list[dict[str, str]] = field(default_factory=list)

    @property
    def ops(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            for op, n in f.ops.items():
                out[op] = out.get(op, 0) + n
        return out


@dataclass
class Manifest:
    """An interval's manifest."""

    interval_id: str
    source: dict[str, str]
    start: str
    end: str
    seqno_min: int | None
    seqno_max: int | None
    transactions: int
    tables: list[TableEntry]
    version: int = MANIFEST_VERSION

    def to_json(self) -> bytes:
        return versioned.encode(asdict(self), self.version)

    @classmethod
    def from_json(cls, data: bytes, what: str = "manifest") -> Manifest:
        """Read a manifest (``what`` names it in errors: its key in the store)."""
        raw = versioned.decode(data, what, MANIFEST_VERSION, UPGRADES, ManifestError)
        try:
            tables = [
                TableEntry(
                    schema=t["schema"],
                    table=t["table"],
                    primary_key=list(t["primary_key"]),
                    layouts=[[ColumnSpec(**c) for c in layout] for layout in t["layouts"]],
                    files=[FileEntry(**f) for f in t["files"]],
                    statements=list(t.get("statements", [])),
                )
                for t in raw["tables"]
            ]
            return cls(
                interval_id=raw["interval_id"],
                source=dict(raw["source"]),
                start=raw["start"],
                end=raw["end"],
                seqno_min=raw["seqno_min"],
                seqno_max=raw["seqno_max"],
                transactions=raw["transactions"],
                tables=tables,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{what} cannot be read: {exc}") from None
