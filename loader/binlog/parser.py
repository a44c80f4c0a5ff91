"""The single dispatch point from raw event bytes to event records.

``BinlogParser.parse`` checks the event's length and CRC32, picks the decoder by event type, and
keeps the only state decoding needs: the format description and the table maps. Layouts mirror
MySQL's ``libbinlogevents/src/*.cpp`` and MariaDB's ``sql/log_event.cc``.
"""

from __future__ import annotations

import functools
import re
import struct
import zlib
from collections.abc import Callable

from loader.binlog import events as ev
from loader.binlog.constants import (
    CHECKSUM_CRC32,
    CHECKSUM_LEN,
    CHECKSUM_UNDEFINED,
    ENUM_SET_TYPES,
    HEADER_LEN,
    LOG_EVENT_BINLOG_IN_USE_F,
    LOG_EVENT_IGNORABLE_F,
    MARIADB_CHARACTER_TYPES,
    MYSQL_CHARACTER_TYPES,
    MYSQL_YEAR_SIGNEDNESS_FROM,
    NUMERIC_TYPES,
    YEAR_SIGNEDNESS_TYPES,
    ColumnType,
    EventType,
    OptionalMetadata,
    event_name,
)
from loader.binlog.gtids import GtidSet
from loader.binlog.values import lenenc
from loader.binlog.values.strings import string_meta
from loader.core.errors import BodyError, DecodeError

_HEADER = struct.Struct("<IBIIIH")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def _take(data: bytes, pos: int, n: int, what: str) -> tuple[bytes, int]:
    end = pos + n
    if n < 0 or end > len(data):
        raise BodyError(f"{what} runs past the event ({n} bytes at {pos} of {len(data)})")
    return data[pos:end], end


def _version_tuple(version: str) -> tuple[int, int, int]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def has_checksum_field(server_version: str) -> bool:
    """Servers from MySQL 5.6.1 and MariaDB 5.3 write a checksum algorithm byte in the FDE."""
    v = _version_tuple(server_version)
    if "mariadb" in server_version.lower():
        return v >= (5, 3, 0)
    return v >= (5, 6, 1)


# A format description for events read before the file's own (the server stream's fake rotate).
DEFAULT_FDE = ev.FormatDescription(4, "", 0, HEADER_LEN, b"", CHECKSUM_UNDEFINED)


class BinlogParser:
    """Decodes events of one binlog stream, remembering its format description and table maps."""

    def __init__(self, file: str = "") -> None:
        self.file = file
        self.fde: ev.FormatDescription = DEFAULT_FDE
        self.tables: dict[int, ev.TableMap] = {}
        # The bytes each table id's table map was read from (after the header, before the CRC).
        self.table_keys: dict[int, bytes] = {}
        # Every transaction repeats its table maps; identical bytes give the identical record,
        # so plans compiled for it can be reused.
        self._table_map_cache: dict[bytes, ev.TableMap] = {}

    @property
    def checksum(self) -> bool:
        return self.fde.checksum_alg == CHECKSUM_CRC32

    def where(self, pos: int) -> str:
        return f"{self.file}:{pos}"

    def read_header(self, raw: bytes, pos: int) -> ev.Header:
        """The header of the event in ``raw`` (at least 19 bytes) starting at file offset ``pos``."""
        if len(raw) < HEADER_LEN:
            raise DecodeError(f"event header truncated ({len(raw)} of {HEADER_LEN} bytes)", self.where(pos))
        ts, typ, sid, size, log_pos, flags = _HEADER.unpack_from(raw, 0)
        if size < HEADER_LEN:
            raise DecodeError(
                f"event size {size} is smaller than its header", self.where(pos), event_name(typ)
            )
        return ev.Header(ts, typ, sid, size, log_pos, flags, pos)

    def parse(self, raw: bytes, pos: int, in_payload: bool = False) -> ev.Event:
        """Decode one whole event (header, body and checksum, exactly ``size`` bytes).

        Args:
            raw: the event's bytes.
            pos: its offset in the binlog file (for errors and positions).
            in_payload: the event sits inside a Transaction_payload (it carries no CRC32).

        Raises:
            DecodeError: naming file:position and event type, for any malformed event.
        """
        header = self.read_header(raw, pos)
        name = event_name(header.type)
        if header.size != len(raw):
            raise DecodeError(
                f"event size {header.size} does not match the {len(raw)} bytes read", self.where(pos), name
            )
        if header.type == EventType.FORMAT_DESCRIPTION:
            return ev.Event(header, self._format_description(raw, header))
        end = len(raw)
        if self.checksum and not in_payload:
            end -= CHECKSUM_LEN
            if end < HEADER_LEN:
                raise DecodeError("event too short for its checksum", self.where(pos), name)
            expected = _U32.unpack_from(raw, end)[0]
            if zlib.crc32(raw[:end]) != expected:
                raise DecodeError("CRC32 checksum mismatch", self.where(pos), name)
        if header.type == EventType.TABLE_MAP:
            key = raw[HEADER_LEN:end]
            cached = self._table_map_cache.get(key)
            if cached is not None:
                self.tables[cached.table_id] = cached
                self.table_keys[cached.table_id] = key
                return ev.Event(header, cached)
        decode = _DECODERS.get(header.type)
        if decode is None:
            reason = "ignorable" if header.flags & LOG_EVENT_IGNORABLE_F else "unknown"
            return ev.Event(header, ev.Skipped(f"{reason} event type {header.type}"))
        try:
            body = decode(self, raw[HEADER_LEN:end], header)
        except DecodeError:
            raise
        except (BodyError, ValueError, IndexError, struct.error, UnicodeDecodeError, zlib.error) as exc:
            raise DecodeError(str(exc), self.where(pos), name) from None
        if isinstance(body, ev.TableMap):
            self.tables[body.table_id] = body
            self.table_keys[body.table_id] = raw[HEADER_LEN:end]
            if len(self._table_map_cache) > 4096:
                self._table_map_cache.clear()
            self._table_map_cache[raw[HEADER_LEN:end]] = body
        return ev.Event(header, body)

    def _format_description(self, raw: bytes, header: ev.Header) -> ev.FormatDescription:
        where, name = self.where(header.pos), "FORMAT_DESCRIPTION"
        body = raw[HEADER_LEN:]
        if len(body) < 2 + 50 + 4 + 1:
            raise DecodeError("format description truncated", where, name)
        version = body[2:52].split(b"\0", 1)[0].decode("ascii", "replace")
        end = len(body)
        alg = 0
        if has_checksum_field(version):
            end -= 1 + CHECKSUM_LEN
            alg = body[end]
            if alg == CHECKSUM_CRC32:
                # The CRC is computed with the in-use flag cleared: the server sets that flag
                # after writing the event and clears it on a clean close.
                flags = header.flags & ~LOG_EVENT_BINLOG_IN_USE_F
                covered = raw[:17] + _U16.pack(flags) + raw[19 : len(raw) - CHECKSUM_LEN]
                if zlib.crc32(covered) != _U32.unpack_from(raw, len(raw) - CHECKSUM_LEN)[0]:
                    raise DecodeError("CRC32 checksum mismatch", where, name)
        fde = ev.FormatDescription(
            binlog_version=_U16.unpack_from(body, 0)[0],
            server_version=version,
            create_timestamp=_U32.unpack_from(body, 52)[0],
            header_length=body[56],
            post_header_lengths=bytes(body[57:end]),
            checksum_alg=alg,
        )
        if fde.binlog_version != 4 or fde.header_length != HEADER_LEN:
            raise DecodeError(
                f"binlog version {fde.binlog_version} with header length {fde.header_length} "
                "is not supported (only v4, MySQL 5.0+ / MariaDB)",
                where,
                name,
            )
        self.fde = fde
        self.tables.clear()
        self.table_keys.clear()
        self._table_map_cache.clear()
        return fde


Decoder = Callable[[BinlogParser, bytes, ev.Header], ev.Body]


def _rotate(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 8:
        raise BodyError("rotate event truncated")
    return ev.Rotate(_U64.unpack_from(body, 0)[0], body[8:].decode("utf-8"))


def _stop(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    return ev.Stop()


def _query(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 13:
        raise BodyError("query event truncated")
    thread_id, exec_time = struct.unpack_from("<II", body, 0)
    db_len = body[8]
    error_code, status_len = struct.unpack_from("<HH", body, 9)
    # LOAD DATA's statement (a query event with 13 more bytes of post-header) is read as a query
    # so that a statement-logged LOAD DATA into a selected table is seen, not skipped.
    own = EventType.EXECUTE_LOAD_QUERY if h.type == EventType.EXECUTE_LOAD_QUERY else EventType.QUERY
    post = p.fde.post_header_len(own) or (26 if own == EventType.EXECUTE_LOAD_QUERY else 13)
    pos = post + status_len
    schema_raw, pos = _take(body, pos, db_len, "query schema name")
    pos += 1  # the schema name's terminating zero
    if pos > len(body):
        raise BodyError("query event truncated after the schema name")
    text = body[pos:]
    if h.type == EventType.MARIA_QUERY_COMPRESSED:
        text = _maria_uncompress(text)
    return ev.Query(
        thread_id,
        exec_time,
        error_code,
        schema_raw.decode("utf-8", "surrogateescape"),
        text.decode("utf-8", "surrogateescape"),
    )


def _xid(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 8:
        raise BodyError("xid event truncated")
    return ev.Xid(_U64.unpack_from(body, 0)[0])


def _xa_prepare(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 1:
        raise BodyError("XA prepare event truncated")
    return ev.XaPrepare(bool(body[0]))


def _column_meta(col_type: int, meta: bytes, pos: int) -> tuple[int, int]:
    if col_type in (
        ColumnType.FLOAT,
        ColumnType.DOUBLE,
        ColumnType.BLOB,
        ColumnType.TINY_BLOB,
        ColumnType.MEDIUM_BLOB,
        ColumnType.LONG_BLOB,
        ColumnType.GEOMETRY,
        ColumnType.JSON,
        ColumnType.VECTOR,
        ColumnType.TIME2,
        ColumnType.DATETIME2,
        ColumnType.TIMESTAMP2,
    ):
        return meta[pos], pos + 1
    if col_type in (ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.BIT):
        return meta[pos] | meta[pos + 1] << 8, pos + 2
    if col_type in (ColumnType.NEWDECIMAL, ColumnType.STRING, ColumnType.ENUM, ColumnType.SET):
        return meta[pos] << 8 | meta[pos + 1], pos + 2
    return 0, pos


def _bits_msb_first(data: bytes, count: int) -> list[bool]:
    return [bool(data[i // 8] >> (7 - i % 8) & 1) for i in range(count)]


@functools.lru_cache(maxsize=16)
def _counted_columns(server_version: str) -> tuple[frozenset[int], frozenset[int]]:
    """The column types a server's table maps give a signedness bit and a charset: its flavour's
    lists, and on MySQL its version's (YEAR from ``MYSQL_YEAR_SIGNEDNESS_FROM``)."""
    if "mariadb" in server_version.lower():
        return YEAR_SIGNEDNESS_TYPES, MARIADB_CHARACTER_TYPES
    numbers = re.match(r"\d+(?:\.\d+)*", server_version)
    version = tuple(int(n) for n in numbers.group().split(".")) if numbers else ()
    signed = YEAR_SIGNEDNESS_TYPES if version >= MYSQL_YEAR_SIGNEDNESS_FROM else NUMERIC_TYPES
    return signed, MYSQL_CHARACTER_TYPES


def _table_map(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    post = p.fde.post_header_len(EventType.TABLE_MAP) or 8
    id_len = 4 if post == 6 else 6
    if len(body) < post:
        raise BodyError("table map truncated")
    table_id = int.from_bytes(body[:id_len], "little")
    flags = _U16.unpack_from(body, id_len)[0]
    pos = post
    slen = body[pos]
    schema, pos = _take(body, pos + 1, slen, "schema name")
    tlen = body[pos + 1]
    table, pos = _take(body, pos + 2, tlen, "table name")
    pos += 1
    ncols, pos = lenenc(body, pos)
    types, pos = _take(body, pos, ncols, "column types")
    meta_len, pos = lenenc(body, pos)
    meta, pos = _take(body, pos, meta_len, "column metadata")
    metas: list[int] = []
    real_types: list[int] = []
    mpos = 0
    for t in types:
        try:
            m, mpos = _column_meta(t, meta, mpos)
        except IndexError:
            raise BodyError("column metadata shorter than its column types need") from None
        metas.append(m)
        real_types.append(string_meta(m)[0] if t == ColumnType.STRING and m else t)
    if mpos != meta_len:
        raise BodyError(f"column metadata is {meta_len} bytes but the column types use {mpos}")
    nullable_raw, pos = _take(body, pos, (ncols + 7) // 8, "null bitmap")
    nullable = [bool(nullable_raw[i // 8] >> (i % 8) & 1) for i in range(ncols)]

    names: list[str] | None = None
    unsigned: list[bool | None] = [None] * ncols
    collations: list[int | None] = [None] * ncols
    labels: list[tuple[str, ...] | None] = [None] * ncols
    visible = [True] * ncols
    pk: list[int] | None = None
    signed_types, character_types = _counted_columns(p.fde.server_version)
    numeric = [i for i, t in enumerate(real_types) if t in signed_types]
    character = [i for i, t in enumerate(real_types) if t in character_types]
    enum_set = [i for i, t in enumerate(real_types) if t in ENUM_SET_TYPES]
    enums = [i for i, t in enumerate(real_types) if t == ColumnType.ENUM]
    sets = [i for i, t in enumerate(real_types) if t == ColumnType.SET]
    while pos < len(body):
        ftype = body[pos]
        flen, pos = lenenc(body, pos + 1)
        field, pos = _take(body, pos, flen, "table map optional metadata")
        if ftype == OptionalMetadata.SIGNEDNESS:
            for i, flag in zip(numeric, _bits_msb_first(field, len(numeric)), strict=True):
                unsigned[i] = flag
        elif ftype in (OptionalMetadata.DEFAULT_CHARSET, OptionalMetadata.ENUM_AND_SET_DEFAULT_CHARSET):
            targets = character if ftype == OptionalMetadata.DEFAULT_CHARSET else enum_set
            default, fpos = lenenc(field, 0)
            for i in targets:
                collations[i] = default
            while fpos < len(field):
                idx, fpos = lenenc(field, fpos)
                coll, fpos = lenenc(field, fpos)
                if idx >= len(targets):
                    raise BodyError(f"charset for column #{idx} of {len(targets)} character columns")
                collations[targets[idx]] = coll
        elif ftype in (OptionalMetadata.COLUMN_CHARSET, OptionalMetadata.ENUM_AND_SET_COLUMN_CHARSET):
            targets = character if ftype == OptionalMetadata.COLUMN_CHARSET else enum_set
            fpos = 0
            for i in targets:
                collations[i], fpos = lenenc(field, fpos)
        elif ftype == OptionalMetadata.COLUMN_NAME:
            names = []
            fpos = 0
            while fpos < len(field):
                n, fpos = lenenc(field, fpos)
                raw, fpos = _take(field, fpos, n, "column name")
                names.append(raw.decode("utf-8"))
            if len(names) != ncols:
                raise BodyError(f"table map names {len(names)} columns but has {ncols}")
        elif ftype in (OptionalMetadata.SET_STR_VALUE, OptionalMetadata.ENUM_STR_VALUE):
            targets = sets if ftype == OptionalMetadata.SET_STR_VALUE else enums
            fpos = 0
            for i in targets:
                count, fpos = lenenc(field, fpos)
                values: list[bytes] = []
                for _ in range(count):
                    n, fpos = lenenc(field, fpos)
                    raw, fpos = _take(field, fpos, n, "enum/set label")
                    values.append(raw)
                labels[i] = tuple(v.decode("utf-8", "surrogateescape") for v in values)
        elif ftype == OptionalMetadata.SIMPLE_PRIMARY_KEY:
            pk = []
            fpos = 0
            while fpos < len(field):
                idx, fpos = lenenc(field, fpos)
                pk.append(idx)
        elif ftype == OptionalMetadata.PRIMARY_KEY_WITH_PREFIX:
            pk = []
            fpos = 0
            while fpos < len(field):
                idx, fpos = lenenc(field, fpos)
                _prefix, fpos = lenenc(field, fpos)
                pk.append(idx)
        elif ftype == OptionalMetadata.COLUMN_VISIBILITY:
            visible = _bits_msb_first(field, ncols)
        # GEOMETRY_TYPE, VECTOR_DIMENSIONALITY and future fields: nothing the loader needs.
    if pk is not None and any(i >= ncols for i in pk):
        raise BodyError("primary key names a column beyond the table's columns")
    columns = tuple(
        ev.Column(
            index=i,
            type=types[i],
            meta=metas[i],
            nullable=nullable[i],
            real_type=real_types[i],
            name=names[i] if names else None,
            unsigned=unsigned[i],
            collation=collations[i],
            labels=labels[i],
            visible=visible[i],
        )
        for i in range(ncols)
    )
    return ev.TableMap(
        table_id,
        flags,
        schema.decode("utf-8", "surrogateescape"),
        table.decode("utf-8", "surrogateescape"),
        columns,
        tuple(pk) if pk is not None else None,
        has_full_metadata=names is not None,
    )


_ROWS_KIND = {
    EventType.WRITE_ROWS_V1: "I",
    EventType.UPDATE_ROWS_V1: "U",
    EventType.DELETE_ROWS_V1: "D",
    EventType.WRITE_ROWS_V2: "I",
    EventType.UPDATE_ROWS_V2: "U",
    EventType.DELETE_ROWS_V2: "D",
    EventType.PARTIAL_UPDATE_ROWS: "U",
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: "I",
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: "U",
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: "D",
    EventType.MARIA_WRITE_ROWS_COMPRESSED: "I",
    EventType.MARIA_UPDATE_ROWS_COMPRESSED: "U",
    EventType.MARIA_DELETE_ROWS_COMPRESSED: "D",
}
_V2 = frozenset(
    {
        EventType.WRITE_ROWS_V2,
        EventType.UPDATE_ROWS_V2,
        EventType.DELETE_ROWS_V2,
        EventType.PARTIAL_UPDATE_ROWS,
        EventType.MARIA_WRITE_ROWS_COMPRESSED,
        EventType.MARIA_UPDATE_ROWS_COMPRESSED,
        EventType.MARIA_DELETE_ROWS_COMPRESSED,
    }
)
_MARIA_COMPRESSED_ROWS = frozenset(range(EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, 172))
_EXTRA_NDB, _EXTRA_PART = 0, 1


def _rows(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    v2 = h.type in _V2
    post = p.fde.post_header_len(h.type) or (10 if v2 else 8)
    id_len = 4 if post == 6 else 6
    if len(body) < post:
        raise BodyError("rows event truncated")
    table_id = int.from_bytes(body[:id_len], "little")
    flags = _U16.unpack_from(body, id_len)[0]
    pos = id_len + 2
    kind = _ROWS_KIND[EventType(h.type)]
    if v2:
        extra_len = _U16.unpack_from(body, pos)[0]
        if extra_len < 2:
            raise BodyError(f"rows extra data length {extra_len} is below its own 2 bytes")
        extra, _ = _take(body, pos + 2, extra_len - 2, "rows extra data")
        _check_extra_data(extra, kind)
        pos += extra_len
    ncols, pos = lenenc(body, pos)
    nbytes = (ncols + 7) // 8
    raw, pos = _take(body, pos, nbytes, "columns-present bitmap")
    present = int.from_bytes(raw, "little")
    present_after = present
    if kind == "U":
        raw, pos = _take(body, pos, nbytes, "after-image columns bitmap")
        present_after = int.from_bytes(raw, "little")
    if h.type in _MARIA_COMPRESSED_ROWS:
        # MariaDB compresses only the row images, after the column bitmaps.
        body = body[:pos] + _maria_uncompress(body[pos:])
    return ev.Rows(
        kind,
        table_id,
        flags,
        ncols,
        present,
        present_after,
        h.type == EventType.PARTIAL_UPDATE_ROWS,
        body,
        pos,
    )


def _check_extra_data(extra: bytes, kind: str) -> None:
    pos = 0
    while pos < len(extra):
        tag = extra[pos]
        pos += 1
        if tag == _EXTRA_NDB:
            if pos >= len(extra):
                raise BodyError("rows extra data: NDB info without its length")
            n = extra[pos]
            if n < 2 or pos + n > len(extra):
                raise BodyError(f"rows extra data: NDB info length {n} does not fit")
            pos += n
        elif tag == _EXTRA_PART:
            n = 4 if kind == "U" else 2
            if pos + n > len(extra):
                raise BodyError("rows extra data: partition info truncated")
            pos += n
        else:
            raise BodyError(f"rows extra data: unknown tag {tag}")


def _maria_uncompress(data: bytes) -> bytes:
    """MariaDB's compressed event data: a header byte (0x80 | n), n bytes of length, zlib."""
    if not data:
        raise BodyError("compressed event data is empty")
    lenlen = data[0] & 0x07
    if not data[0] & 0x80 or not 1 <= lenlen <= 4 or 1 + lenlen > len(data):
        raise BodyError(f"bad compressed event header {data[0]:#x}")
    size = int.from_bytes(data[1 : 1 + lenlen], "big")
    out = zlib.decompress(data[1 + lenlen :])
    if len(out) != size:
        raise BodyError(f"compressed event expands to {len(out)} bytes, not {size}")
    return out


def _commit_ts(body: bytes, pos: int) -> tuple[int, int, int]:
    """(immediate, original, next pos): 7-byte microsecond timestamps; the top bit of the
    immediate one says an original one follows."""
    if pos + 7 > len(body):
        return 0, 0, pos
    immediate = int.from_bytes(body[pos : pos + 7], "little")
    pos += 7
    original = immediate
    if immediate & (1 << 55):
        immediate &= ~(1 << 55)
        original = immediate
        if pos + 7 <= len(body):
            original = int.from_bytes(body[pos : pos + 7], "little")
            pos += 7
    return immediate, original, pos


def uuid_text(raw: bytes) -> str:
    """A server uuid of 16 bytes as MySQL writes it."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _gtid(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 25:
        raise BodyError("GTID event truncated")
    flags = body[0]
    sid = uuid_text(body[1:17])
    gno = _U64.unpack_from(body, 17)[0]
    last_committed = seq = imm = orig = 0
    pos = 25
    if len(body) >= pos + 17 and body[pos] == 2:  # logical clock timestamps (5.7+)
        last_committed, seq = struct.unpack_from("<qq", body, pos + 1)
        pos += 17
        imm, orig, pos = _commit_ts(body, pos)
    return ev.Gtid(h.type == EventType.ANONYMOUS_GTID, flags, sid, gno, "", last_committed, seq, imm, orig)


def _varlen(body: bytes, pos: int) -> tuple[int, int]:
    """An unsigned integer of the MySQL serialization library: the count of trailing one bits of
    the first byte, plus one, is its length in bytes; the value sits above those bits."""
    if pos >= len(body):
        raise BodyError("serialized integer runs past the event")
    first = body[pos]
    n = 1
    while n < 9 and first >> (n - 1) & 1:
        n += 1
    if pos + n > len(body):
        raise BodyError("serialized integer runs past the event")
    if n == 9:
        return int.from_bytes(body[pos + 1 : pos + 9], "little"), pos + 9
    return int.from_bytes(body[pos : pos + n], "little") >> n, pos + n


def _varlen_signed(body: bytes, pos: int) -> tuple[int, int]:
    value, pos = _varlen(body, pos)
    return (-(value >> 1) - 1 if value & 1 else value >> 1), pos


# Field ids of the tagged GTID event (libs/mysql/binlog/event/control_events.h).
_TAG_FLAGS, _TAG_SID, _TAG_GNO, _TAG_TAG, _TAG_LAST_COMMITTED, _TAG_SEQUENCE = 0, 1, 2, 3, 4, 5
_TAG_IMMEDIATE_TS, _TAG_ORIGINAL_TS = 6, 7
_TAG_UNSIGNED_FIELDS = frozenset({8, 9, 10, 11})  # length, server versions, commit group ticket


def _gtid_tagged(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    """MySQL 8.4+ tagged GTID: a serialization library message (version byte, size, fields)."""
    if not body or body[0] != 2:
        raise BodyError(f"tagged GTID serialization version {body[:1].hex() or 'missing'} is not supported")
    size, pos = _varlen(body, 1)
    last_non_ignorable, pos = _varlen(body, pos)
    if size > len(body) or size < pos:
        raise BodyError(f"tagged GTID declares {size} bytes, the event holds {len(body)}")
    flags = gno = last_committed = seq = immediate = 0
    original: int | None = None
    sid, tag = "", ""
    while pos < size:
        field, pos = _varlen(body, pos)
        if field == _TAG_FLAGS:
            flags, pos = _varlen(body, pos)
        elif field == _TAG_SID:
            raw = bytearray()
            for _ in range(16):
                b, pos = _varlen(body, pos)
                if b > 255:
                    raise BodyError("tagged GTID uuid byte out of range")
                raw.append(b)
            sid = uuid_text(bytes(raw))
        elif field == _TAG_GNO:
            gno, pos = _varlen_signed(body, pos)
        elif field == _TAG_TAG:
            n, pos = _varlen(body, pos)
            raw_tag, pos = _take(body, pos, n, "GTID tag")
            tag = raw_tag.decode("ascii")
        elif field == _TAG_LAST_COMMITTED:
            last_committed, pos = _varlen_signed(body, pos)
        elif field == _TAG_SEQUENCE:
            seq, pos = _varlen_signed(body, pos)
        elif field == _TAG_IMMEDIATE_TS:
            immediate, pos = _varlen(body, pos)
        elif field == _TAG_ORIGINAL_TS:
            original, pos = _varlen(body, pos)
        elif field in _TAG_UNSIGNED_FIELDS:
            _, pos = _varlen(body, pos)
        elif field <= last_non_ignorable:
            raise BodyError(f"tagged GTID has an unknown field {field} that may not be ignored")
        else:
            break  # an ignorable field of a newer server: nothing after it is needed
    if gno < 0 or not sid:
        raise BodyError("tagged GTID without its uuid or with a negative number")
    return ev.Gtid(
        False,
        flags,
        sid,
        gno,
        tag,
        last_committed,
        seq,
        immediate,
        immediate if original is None else original,
    )


def _maria_gtid(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 13:
        raise BodyError("MariaDB GTID event truncated")
    seq_no = _U64.unpack_from(body, 0)[0]
    domain_id = _U32.unpack_from(body, 8)[0]
    flags = body[12]
    commit_id = 0
    if flags & 2:  # FL_GROUP_COMMIT_ID
        if len(body) < 21:
            raise BodyError("MariaDB GTID event truncated before its commit id")
        commit_id = _U64.unpack_from(body, 13)[0]
    return ev.MariaGtid(seq_no, domain_id, flags, commit_id)


_PAYLOAD_END, _PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED = 0, 1, 2, 3
COMPRESSION_ZSTD, COMPRESSION_NONE = 0, 255


def _transaction_payload(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    pos = 0
    size = compression = uncompressed = None
    while True:
        ftype, pos = lenenc(body, pos)
        if ftype == _PAYLOAD_END:
            break
        flen, pos = lenenc(body, pos)
        value_raw, pos = _take(body, pos, flen, "payload header field")
        value, _ = lenenc(value_raw, 0)
        if ftype == _PAYLOAD_SIZE:
            size = value
        elif ftype == _PAYLOAD_COMPRESSION:
            compression = value
        elif ftype == _PAYLOAD_UNCOMPRESSED:
            uncompressed = value
    payload = body[pos:]
    if size is not None and size != len(payload):
        raise BodyError(f"transaction payload is {len(payload)} bytes, its header says {size}")
    if compression == COMPRESSION_ZSTD:
        import zstandard

        try:
            payload = zstandard.ZstdDecompressor().decompress(payload, max_output_size=uncompressed or 0)
        except zstandard.ZstdError as exc:
            raise BodyError(f"transaction payload does not decompress: {exc}") from None
    elif compression not in (None, COMPRESSION_NONE):
        raise BodyError(f"unknown transaction payload compression {compression}")
    if uncompressed is not None and uncompressed != len(payload):
        raise BodyError(
            f"transaction payload expands to {len(payload)} bytes, its header says {uncompressed}"
        )
    return ev.TransactionPayload(
        compression if compression is not None else COMPRESSION_NONE, len(payload), payload
    )


def _incident(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    if len(body) < 2:
        raise BodyError("incident event truncated")
    code = _U16.unpack_from(body, 0)[0]
    message = ""
    if len(body) > 2:
        n = body[2]
        message = body[3 : 3 + n].decode("utf-8", "replace")
    return ev.Incident(code, message)


def _heartbeat(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    return ev.Heartbeat(body.decode("utf-8", "replace"))


def _skip(reason: str) -> Decoder:
    def skip(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
        return ev.Skipped(reason)

    return skip


def _previous_gtids(p: BinlogParser, body: bytes, h: ev.Header) -> ev.Body:
    """The encoded GTID set (``Gtid_set::encode``): 8 bytes of source count, then per source its
    uuid, its interval count and the intervals as [first, end). The 8.4+ tagged format marks
    itself with 1 in the first and last byte of the count (the count in between) and gives each
    source a tag, a serialization-library string after its uuid."""
    if len(body) < 8:
        raise BodyError("previous GTIDs event truncated")
    tagged = body[0] == 1 and body[7] == 1
    count = int.from_bytes(body[1:7], "little") if tagged else _U64.unpack_from(body, 0)[0]
    out = GtidSet()
    pos = 8
    for _ in range(count):
        raw, pos = _take(body, pos, 16, "previous GTIDs uuid")
        tag = ""
        if tagged:
            n, pos = _varlen(body, pos)
            raw_tag, pos = _take(body, pos, n, "previous GTIDs tag")
            tag = raw_tag.decode("ascii", "replace").lower()
        n_ranges = int.from_bytes(_take(body, pos, 8, "previous GTIDs range count")[0], "little")
        pos += 8
        for _ in range(n_ranges):
            span, pos = _take(body, pos, 16, "previous GTIDs range")
            first, end = struct.unpack("<qq", span)
            if first < 1 or end <= first:
                raise BodyError(f"previous GTIDs range [{first}, {end}) is not a transaction range")
            out.add_range(uuid_text(raw), tag, first, end - 1)
    return ev.PreviousGtids(out.text())


_DECODERS: dict[int, Decoder] = {
    EventType.ROTATE: _rotate,
    EventType.STOP: _stop,
    EventType.QUERY: _query,
    EventType.MARIA_QUERY_COMPRESSED: _query,
    EventType.XID: _xid,
    EventType.XA_PREPARE: _xa_prepare,
    EventType.TABLE_MAP: _table_map,
    EventType.GTID: _gtid,
    EventType.ANONYMOUS_GTID: _gtid,
    EventType.GTID_TAGGED: _gtid_tagged,
    EventType.MARIA_GTID: _maria_gtid,
    EventType.TRANSACTION_PAYLOAD: _transaction_payload,
    EventType.INCIDENT: _incident,
    EventType.HEARTBEAT: _heartbeat,
    EventType.HEARTBEAT_V2: _skip("heartbeat"),
    EventType.PREVIOUS_GTIDS: _previous_gtids,
    EventType.ROWS_QUERY: _skip("rows query"),
    EventType.MARIA_ANNOTATE_ROWS: _skip("annotate rows"),
    EventType.MARIA_GTID_LIST: _skip("GTID list"),
    EventType.MARIA_BINLOG_CHECKPOINT: _skip("binlog checkpoint"),
    EventType.INTVAR: _skip("intvar"),
    EventType.RAND: _skip("rand"),
    EventType.USER_VAR: _skip("user var"),
    EventType.IGNORABLE: _skip("ignorable"),
    EventType.TRANSACTION_CONTEXT: _skip("transaction context"),
    EventType.VIEW_CHANGE: _skip("view change"),
    EventType.BEGIN_LOAD_QUERY: _skip("LOAD DATA block"),
    EventType.APPEND_BLOCK: _skip("LOAD DATA block"),
    EventType.EXECUTE_LOAD_QUERY: _query,
    EventType.DELETE_FILE: _skip("LOAD DATA file"),
    **{t: _rows for t in _ROWS_KIND},
}
