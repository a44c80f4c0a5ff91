"""Event type codes, column type codes and flags of binlog v4.

Mirrors ``libbinlogevents/include/binlog_event.h`` (MySQL) and ``sql/log_event.h`` (MariaDB).
"""

from __future__ import annotations

from enum import IntEnum

BINLOG_MAGIC = b"\xfebin"
HEADER_LEN = 19
CHECKSUM_LEN = 4

# Header flags.
LOG_EVENT_BINLOG_IN_USE_F = 0x1
LOG_EVENT_IGNORABLE_F = 0x80

# Checksum algorithms in the format description event.
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1
CHECKSUM_UNDEFINED = 255

# Rows event flags.
STMT_END_F = 0x1


class EventType(IntEnum):
    """Every event type code a MySQL or MariaDB server writes."""

    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS_V2 = 30
    UPDATE_ROWS_V2 = 31
    DELETE_ROWS_V2 = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    MARIA_ANNOTATE_ROWS = 160
    MARIA_BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    MARIA_START_ENCRYPTION = 164
    MARIA_QUERY_COMPRESSED = 165
    MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIA_WRITE_ROWS_COMPRESSED = 169
    MARIA_UPDATE_ROWS_COMPRESSED = 170
    MARIA_DELETE_ROWS_COMPRESSED = 171


def event_name(code: int) -> str:
    """A readable name for an event type code, known or not."""
    try:
        return EventType(code).name
    except ValueError:
        return f"UNKNOWN_EVENT_{code}"


class ColumnType(IntEnum):
    """Column type codes as written in table map events."""

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


def column_type_name(code: int) -> str:
    """A readable name for a column type code, known or not."""
    try:
        return ColumnType(code).name
    except ValueError:
        return f"TYPE_{code}"


NUMERIC_TYPES = frozenset(
    {
        ColumnType.TINY,
        ColumnType.SHORT,
        ColumnType.INT24,
        ColumnType.LONG,
        ColumnType.LONGLONG,
        ColumnType.FLOAT,
        ColumnType.DOUBLE,
        ColumnType.NEWDECIMAL,
        ColumnType.DECIMAL,
    }
)
# The columns the table map's signedness bits count. YEAR is an unsigned TINYINT inside the
# server and takes a bit (always set) on MariaDB and on MySQL from 8.0.23 on
# (``has_signedess_information_type``; 8.0.20's ``is_numeric_type`` left it out, 8.0.26's counts
# it: the release between is not known, 8.0.23 is taken). Reading the bits with the wrong list
# shifts the signedness of every integer after a YEAR.
YEAR_SIGNEDNESS_TYPES = NUMERIC_TYPES | {ColumnType.YEAR}
MYSQL_YEAR_SIGNEDNESS_FROM = (8, 0, 23)
# The columns the table map's charset metadata counts (``is_character_type`` of each server's
# log_event.cc), by their real type. MySQL's are the string and BLOB types and VECTOR (9.0);
# MariaDB's also GEOMETRY (a BLOB underneath). Counting with the other flavour's list shifts the
# collation of every character column after a GEOMETRY, or runs past the field.
MYSQL_CHARACTER_TYPES = frozenset(
    {ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.VARCHAR, ColumnType.BLOB, ColumnType.VECTOR}
)
MARIADB_CHARACTER_TYPES = frozenset(
    {ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.VARCHAR, ColumnType.BLOB, ColumnType.GEOMETRY}
)
ENUM_SET_TYPES = frozenset({ColumnType.ENUM, ColumnType.SET})


class OptionalMetadata(IntEnum):
    """Table map optional metadata field types (binlog_row_metadata)."""

    SIGNEDNESS = 1
    DEFAULT_CHARSET = 2
    COLUMN_CHARSET = 3
    COLUMN_NAME = 4
    SET_STR_VALUE = 5
    ENUM_STR_VALUE = 6
    GEOMETRY_TYPE = 7
    SIMPLE_PRIMARY_KEY = 8
    PRIMARY_KEY_WITH_PREFIX = 9
    ENUM_AND_SET_DEFAULT_CHARSET = 10
    ENUM_AND_SET_COLUMN_CHARSET = 11
    COLUMN_VISIBILITY = 12
    VECTOR_DIMENSIONALITY = 13


# information_schema DATA_TYPE names of the spatial types (all GEOMETRY in the binlog).
GEOMETRY_TYPE_NAMES = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        "geomcollection",
    }
)
