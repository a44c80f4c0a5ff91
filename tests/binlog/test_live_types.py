"""Every column type family written to the private MariaDB and MySQL, read back from the binlog
over both transports, and compared value by value with what SELECT returns."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from loader.binlog.files import BinlogFiles
from loader.binlog.reader import read_transactions
from loader.binlog.schema import InformationSchema
from loader.binlog.server import BinlogServer
from loader.binlog.transactions import Transaction
from loader.core.errors import DecodeError, SourceError
from loader.core.positions import Position
from loader.core.tables import TableSelector
from loader.extract.files import batch_csv, commit_ts_text, csv_kind
from loader.source.connection import Credentials, current_position
from loader.staging import csvformat
from tests.conftest import MariaDB

pytestmark = pytest.mark.integration

SCHEMA = "types_test"
BIG_BLOB = bytes(range(256)) * 300  # 76,800 bytes: past the 64 KB of a BLOB's 2-byte length

TABLES = {
    "ints": """(
        id INT PRIMARY KEY, t TINYINT, tu TINYINT UNSIGNED, s SMALLINT, su SMALLINT UNSIGNED,
        m MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, b BIGINT, bu BIGINT UNSIGNED,
        y YEAR, bit1 BIT(1), bit13 BIT(13), bit64 BIT(64))""",
    "nums": """(
        id INT PRIMARY KEY, f FLOAT, d DOUBLE, d52 DECIMAL(5,2), d6530 DECIMAL(65,30),
        d180 DECIMAL(18,0), d1010 DECIMAL(10,10), d389 DECIMAL(38,9))""",
    "temporal": """(
        id INT PRIMARY KEY, dt DATE, t0 TIME, t3 TIME(3), t6 TIME(6), dt0 DATETIME, dt1 DATETIME(1),
        dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts3 TIMESTAMP(3) NULL, ts6 TIMESTAMP(6) NULL,
        t1 TIME(1), t2 TIME(2), t4 TIME(4), t5 TIME(5), dt2 DATETIME(2), dt5 DATETIME(5),
        ts1 TIMESTAMP(1) NULL, ts4 TIMESTAMP(4) NULL)""",
    "strs": """(
        id INT PRIMARY KEY, c CHAR(10), v VARCHAR(300), v1 VARCHAR(10) CHARACTER SET latin1,
        u3 VARCHAR(20) CHARACTER SET utf8mb3, vb VARBINARY(20), bn BINARY(8), txt TEXT,
        mt MEDIUMTEXT, tb TINYBLOB, lb LONGBLOB, e ENUM('a','b','ç'), st SET('x','y','z'), j JSON,
        g GEOMETRY NULL, after_g VARCHAR(10)) DEFAULT CHARSET=utf8mb4""",
    # Charsets of one byte per character, UTF-16 and UTF-32 (padded CHAR included).
    "charsets": """(
        id INT PRIMARY KEY, l2 VARCHAR(20) CHARACTER SET latin2, cy VARCHAR(20) CHARACTER SET cp1251,
        k VARCHAR(20) CHARACTER SET koi8r, gr VARCHAR(20) CHARACTER SET greek,
        th VARCHAR(20) CHARACTER SET tis620, u2 VARCHAR(20) CHARACTER SET ucs2,
        u16 VARCHAR(20) CHARACTER SET utf16, u16le TEXT CHARACTER SET utf16le,
        u32 CHAR(10) CHARACTER SET utf32)""",
    # A YEAR among integers: the signedness bits count it on MariaDB and on MySQL 8.0.23 and later.
    "yearmid": """(
        id INT PRIMARY KEY, yr YEAR, qty INT UNSIGNED, d INT, tiny TINYINT UNSIGNED, yr2 YEAR,
        su SMALLINT UNSIGNED, s SMALLINT, bu BIGINT UNSIGNED)""",
}

ROWS: dict[str, list[tuple[Any, ...]]] = {
    "ints": [
        (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -(2**63), 0, 1901, 0, 0, 0),
        (
            2,
            127,
            255,
            32767,
            65535,
            8388607,
            16777215,
            2147483647,
            4294967295,
            2**63 - 1,
            2**64 - 1,
            2155,
            1,
            8191,
            2**64 - 1,
        ),
        (3, 0, 1, -1, 1, -1, 1, -1, 1, -1, 1, 2000, 1, 4096, 2**63),
        (4, *([None] * 14)),
    ],
    "nums": [
        (
            1,
            1.5,
            1.7976931348623157e308,
            Decimal("999.99"),
            Decimal("-" + "9" * 35 + "." + "9" * 30),
            Decimal("999999999999999999"),
            Decimal("0.0000000001"),
            Decimal("-12345678901234567890123456789.123456789"),
        ),
        (
            2,
            -1024.125,
            -2.2250738585072014e-308,
            Decimal("-999.99"),
            Decimal("0.000000000000000000000000000001"),
            Decimal("-999999999999999999"),
            Decimal("-0.9999999999"),
            Decimal("0.000000001"),
        ),
        (3, 0.0, 0.1, Decimal("0.00"), Decimal("0E-30"), Decimal("0"), Decimal("0E-10"), Decimal("1")),
        (4, *([None] * 7)),
    ],
    "temporal": [
        (
            1,
            "1000-01-01",
            "-838:59:59",
            "-838:59:59.000",
            "-838:59:59.000000",
            "1000-01-01 00:00:00",
            "1000-01-01 00:00:00.0",
            "1000-01-01 00:00:00.000000",
            "1970-01-01 00:00:01",
            "1970-01-01 00:00:01.000",
            "1970-01-01 00:00:01.000001",
        ),
        (
            2,
            "9999-12-31",
            "838:59:59",
            "838:59:59.999",
            "838:59:59.999999",
            "9999-12-31 23:59:59",
            "9999-12-31 23:59:59.9",
            "9999-12-31 23:59:59.999999",
            "2038-01-19 03:14:07",
            "2038-01-19 03:14:07.999",
            "2038-01-19 03:14:07.999999",
        ),
        (
            3,
            "0000-00-00",
            "00:00:00",
            "-00:00:00.500",
            "-00:00:01.000001",
            "0000-00-00 00:00:00",
            "2024-02-29 12:34:56.7",
            "2024-02-29 12:34:56.000007",
            "0000-00-00 00:00:00",
            "2024-02-29 12:34:56.123",
            "2024-02-29 12:34:56.123456",
        ),
        (4, *([None] * 10)),
    ],
    "strs": [
        (1, "", "", "", "", b"", b"", "", "", b"", b"", "a", "", "[]", None, "é"),
        (
            2,
            "ñandú🚀",
            "x" * 300,
            "café€",
            "日本語",
            b"\x00\x01\xff",
            b"\x01\x00\x00",
            "línea 1\nlínea 2\r\n",
            "'quoted' \"double\" \\back\\ ,comma",
            bytes(range(255)),
            BIG_BLOB,
            "ç",
            "x,z",
            '{"k": [1, 2.5, "ü"], "n": null}',
            "POINT(1 2)",
            "",
        ),
        (
            3,
            "\\N",
            "null",
            "NULL",
            "\t",
            b"\\N",
            b"\x00" * 8,
            "😀" * 1000,
            "x" * 70000,
            b"\x00",
            b"",
            "b",
            "x,y,z",
            '"text"',
            "LINESTRING(0 0,1 1,2 5)",
            "🚀 after",
        ),
        (4, *([None] * 15)),
    ],
}

# More fractional precisions, negative times in particular (columns t1 .. ts4).
_MORE_TEMPORAL: dict[int, tuple[Any, ...]] = {
    1: (
        "-838:59:59.0",
        "-00:00:00.01",
        "-00:00:00.0001",
        "-00:00:00.00001",
        "1000-01-01 00:00:00.01",
        "1000-01-01 00:00:00.00001",
        "1970-01-01 00:00:01.9",
        "1970-01-01 00:00:01.0001",
    ),
    2: (
        "838:59:59.9",
        "838:59:59.99",
        "838:59:59.9999",
        "838:59:59.99999",
        "9999-12-31 23:59:59.99",
        "9999-12-31 23:59:59.99999",
        "2038-01-19 03:14:07.9",
        "2038-01-19 03:14:07.9999",
    ),
    3: (
        "-01:00:00.5",
        "-12:34:56.78",
        "-00:00:01.2345",
        "-100:00:00.12345",
        "2024-02-29 12:34:56.78",
        "2024-02-29 12:34:56.12345",
        "2024-02-29 12:34:56.1",
        "2024-02-29 12:34:56.1234",
    ),
    4: (None,) * 8,
}
ROWS["temporal"] = [row + _MORE_TEMPORAL[row[0]] for row in ROWS["temporal"]]
ROWS["charsets"] = [
    (
        1,
        "Zażółć gęślą",
        "Привет мир",
        "Съешь же",
        "Καλημέρα",
        "สวัสดี",
        "日本語 ĉ",
        "😀 utf16 ☃",
        "é€ le",
        "😀𝄞 x",
    ),
    (2, "", "", "", "", "", "", "", "", ""),
    (3, 'a "q", b', "ё\tЁ", "Ж", "ά", "ก\n", "\\", "x", "\x00", "y"),
    (4, *([None] * 9)),
]
ROWS["yearmid"] = [
    (1, 2024, 4294967295, -5, 255, 1999, 65535, -1, 2**64 - 1),
    (2, 1901, 0, 2147483647, 0, 2155, 0, 32767, 0),
    (3, 2000, 1, -2147483648, 128, 0, 32768, -32768, 2**63),
    (4, *([None] * 8)),
]

UPDATES = {
    "ints": "UPDATE ints SET t = t + 1, bu = 18446744073709551614, bit64 = 1 WHERE id = 1",
    "nums": "UPDATE nums SET d52 = -d52, f = 2.5 WHERE id IN (1, 2)",
    "temporal": "UPDATE temporal SET t6 = '12:00:00.5', ts6 = '2001-02-03 04:05:06.070809' WHERE id = 3",
    "strs": "UPDATE strs SET v = CONCAT(v, '!'), lb = REPEAT('z', 100000), e = 'b' WHERE id IN (2, 3)",
    "charsets": "UPDATE charsets SET l2 = CONCAT(l2, 'ą'), u16 = CONCAT(u16, '🙂') WHERE id IN (1, 3)",
    "yearmid": "UPDATE yearmid SET tiny = 254, d = -6, qty = 4294967294 WHERE id IN (1, 3)",
}

SELECT_AS_TEXT = {"dt", "dt0", "dt1", "dt2", "dt5", "dt6", "ts0", "ts1", "ts3", "ts4", "ts6"} | {
    f"t{n}" for n in range(7)
}


def _select(conn: Any, table: str) -> dict[int, tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {SCHEMA}.{table} LIMIT 0")
        names = [d[0] for d in cur.description]
        cols = ", ".join(
            f"CAST({n} AS CHAR)" if n in SELECT_AS_TEXT else (f"ST_AsBinary({n})" if n == "g" else n)
            for n in names
        )
        cur.execute(f"SELECT {cols} FROM {SCHEMA}.{table} ORDER BY id")
        return {row[0]: row for row in cur.fetchall()}


def _normal(table: str, name: str, value: Any) -> Any:
    """A decoded value in the form SELECT returned it in."""
    if value is None:
        return None
    if name.startswith("bit"):
        return value
    if name == "f":
        # SELECT prints a FLOAT with 6 significant digits; the binlog holds the exact float32.
        return float(f"{value:.6g}")
    if isinstance(value, Decimal):
        return format(value, "f")
    if name == "g":
        return value[4:]  # the stored value is SRID + WKB; ST_AsBinary gives the WKB
    return value


def _selected(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name.startswith("bit"):
        return int.from_bytes(value, "big")
    if isinstance(value, Decimal):
        return format(value, "f")
    return value


# The server's flavour matters here: MySQL's table maps count other columns' signedness and
# charsets than MariaDB's, and its JSON is binary.
@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def workload(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    server: MariaDB = request.getfixturevalue(request.param)
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00', sql_mode = ''")
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(f"USE {SCHEMA}")
        for name, ddl in TABLES.items():
            cur.execute(f"CREATE TABLE {name} {ddl}")
        start = current_position(conn)
        snapshots: dict[str, list[dict[int, tuple[Any, ...]]]] = {t: [] for t in TABLES}
        conn.begin()
        for table, rows in ROWS.items():
            for row in rows:
                marks = ", ".join(
                    "ST_GeomFromText(%s)" if n == 14 and table == "strs" else "%s" for n in range(len(row))
                )
                cur.execute(f"INSERT INTO {table} VALUES ({marks})", row)
        conn.commit()
        for table in TABLES:
            snapshots[table].append(_select(conn, table))
        for table, sql in UPDATES.items():
            conn.begin()
            cur.execute(sql)
            conn.commit()
            snapshots[table].append(_select(conn, table))
        conn.begin()
        for table in TABLES:
            cur.execute(f"DELETE FROM {table} WHERE id IN (3, 4)")
        conn.commit()
        end = current_position(conn)
    conn.close()
    yield {"start": start, "end": end, "snapshots": snapshots, "server": server}


def _read(
    server: MariaDB, transport: str, start: Position, end: Position, native: bool = False
) -> list[Transaction]:
    creds = Credentials(server.host, server.port, "loader", server.password)
    t = BinlogServer(creds, server_id=4242) if transport == "server" else BinlogFiles(server.binlog_dir)
    schema_conn = server.connect(user="loader")
    try:
        selected = TableSelector((f"{SCHEMA}.*",))
        return list(read_transactions(t, start, end, selected, InformationSchema(schema_conn), native=native))
    finally:
        schema_conn.close()


@pytest.mark.parametrize("transport", ["files", "server"])
def test_every_value_equals_select(workload: dict[str, Any], transport: str) -> None:
    server: MariaDB = workload["server"]
    txs = [tx for tx in _read(server, transport, workload["start"], workload["end"]) if tx.batches]
    assert len(txs) == 1 + len(UPDATES) + 1
    snaps = workload["snapshots"]
    inserted, deleted = txs[0], txs[-1]
    updates = txs[1:-1]

    def check(table: str, image: tuple[Any, ...], expected: tuple[Any, ...], names: tuple[str, ...]) -> None:
        for name, got, want in zip(names, image, expected, strict=True):
            assert _normal(table, name, got) == _selected(name, want), f"{table}.{name} (id {image[0]})"

    for batch in inserted.batches:
        table = batch.table.table
        assert batch.op == "I"
        for _, after in batch.rows:
            assert after is not None
            check(table, after, snaps[table][0][after[0]], batch.table.names)
    for tx, table in zip(updates, UPDATES, strict=True):
        for batch in tx.batches:
            assert (batch.op, batch.table.table) == ("U", table)
            for before, after in batch.rows:
                assert before is not None and after is not None
                check(table, before, snaps[table][0][before[0]], batch.table.names)
                check(table, after, snaps[table][1][after[0]], batch.table.names)
    deleted_ids: dict[str, list[int]] = {}
    for batch in deleted.batches:
        table = batch.table.table
        assert batch.op == "D"
        for before, _ in batch.rows:
            assert before is not None
            check(table, before, snaps[table][-1][before[0]], batch.table.names)
            deleted_ids.setdefault(table, []).append(before[0])
    assert deleted_ids == {t: [3, 4] for t in TABLES}


def test_both_transports_yield_the_same_transactions(workload: dict[str, Any]) -> None:
    server: MariaDB = workload["server"]

    def summary(txs: list[Transaction]) -> list[Any]:
        return [
            (tx.start, tx.end, tx.seqno, tx.gtid, [(b.table.qualified, b.op, b.rows) for b in tx.batches])
            for tx in txs
        ]

    files = _read(server, "files", workload["start"], workload["end"])
    server = _read(server, "server", workload["start"], workload["end"])
    assert summary(files) == summary(server)
    assert files[-1].end == workload["end"]


def test_the_native_decoder_stages_the_python_decoders_bytes(workload: dict[str, Any]) -> None:
    server: MariaDB = workload["server"]
    python = _read(server, "server", workload["start"], workload["end"])
    native = _read(server, "server", workload["start"], workload["end"], native=True)
    took: set[str] = set()
    assert len(python) == len(native)
    for p, n in zip(python, native, strict=True):
        assert (p.seqno, p.change_count) == (n.seqno, n.change_count)
        commit = commit_ts_text(p.commit_ts)
        for pb, nb in zip(p.batches, n.batches, strict=True):
            encode = csvformat.row_encoder([csv_kind(c) for c in pb.table.columns])
            assert batch_csv(nb, encode, n.seqno, commit) == batch_csv(pb, encode, p.seqno, commit)
            if nb.encoded is not None:
                took.add(nb.table.table)
    # Every table (MariaDB's JSON is a text column): none left to the Python path.
    assert took == set(TABLES)


def test_row_ids_and_seqnos(workload: dict[str, Any]) -> None:
    server: MariaDB = workload["server"]
    txs = [tx for tx in _read(server, "files", workload["start"], workload["end"]) if tx.batches]
    for tx in txs:
        assert tx.seqno == (tx.end.lognum << 32) + tx.end.pos
        # An update's row_id is its D's; its I takes the next one.
        ids = [j for b in tx.batches for i in b.row_ids() for j in ((i, i + 1) if b.op == "U" else (i,))]
        assert ids == list(range(tx.change_count))
    update = txs[1].batches[0]
    assert update.op == "U" and list(update.row_ids()) == [0]  # D gets 0, I gets 1
    assert txs[1].change_count == 2


def test_rolled_back_and_uncommitted_changes_produce_nothing(mariadb: MariaDB) -> None:
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS rb_test")
        cur.execute("CREATE TABLE IF NOT EXISTS rb_test.inno (id INT PRIMARY KEY) ENGINE=InnoDB")
        cur.execute("CREATE TABLE IF NOT EXISTS rb_test.my (id INT PRIMARY KEY) ENGINE=MyISAM")
        start = current_position(conn)
        conn.begin()
        cur.execute("INSERT INTO rb_test.inno VALUES (1)")
        cur.execute("INSERT INTO rb_test.my VALUES (1)")
        conn.rollback()
        cur.execute("INSERT INTO rb_test.inno VALUES (2)")
        end = current_position(conn)
    conn.close()
    txs = _read_filtered(mariadb, start, end, "rb_test.inno")
    rows = [after for tx in txs for b in tx.batches for _, after in b.rows]
    assert rows == [(2,)]


def _read_filtered(mariadb: MariaDB, start: Position, end: Position, pattern: str) -> list[Transaction]:
    schema_conn = mariadb.connect(user="loader")
    try:
        return list(
            read_transactions(
                BinlogFiles(mariadb.binlog_dir),
                start,
                end,
                TableSelector((pattern,)),
                InformationSchema(schema_conn),
            )
        )
    finally:
        schema_conn.close()


def test_mariadb_pre_10_1_temporals_take_their_precision_from_the_schema(mariadb: MariaDB) -> None:
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL mysql56_temporal_format = OFF")
        try:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute("CREATE DATABASE IF NOT EXISTS hires_test")
            cur.execute("DROP TABLE IF EXISTS hires_test.t")
            cur.execute(
                "CREATE TABLE hires_test.t (id INT PRIMARY KEY, ts TIMESTAMP(3) NULL, dt DATETIME(6), tm TIME(4), tm1 TIME(1))"
            )
        finally:
            cur.execute("SET GLOBAL mysql56_temporal_format = ON")
        start = current_position(conn)
        values = (1, "2021-02-03 04:05:06.789", "2021-02-03 04:05:06.123456", "-12:34:56.7891", "-00:00:01.5")
        cur.execute("INSERT INTO hires_test.t VALUES (%s, %s, %s, %s, %s)", values)
        end = current_position(conn)
    conn.close()
    txs = _read_filtered(mariadb, start, end, "hires_test.*")
    assert [after for tx in txs for b in tx.batches for _, after in b.rows] == [values]
    with pytest.raises(DecodeError, match="source schema is needed"):
        list(read_transactions(BinlogFiles(mariadb.binlog_dir), start, end))


def test_purged_file_and_bad_positions_are_refused(workload: dict[str, Any]) -> None:
    server: MariaDB = workload["server"]
    creds = Credentials(server.host, server.port, "loader", server.password)
    missing = Position("mysql-bin.000999", 4)
    with pytest.raises(SourceError, match=r"mysql-bin\.000999"):
        list(read_transactions(BinlogFiles(server.binlog_dir), missing, None))
    with pytest.raises(SourceError, match=r"mysql-bin\.000999"):
        list(read_transactions(BinlogServer(creds, 4243), missing, None))
    inside = Position(workload["start"].file, workload["start"].pos + 3)
    with pytest.raises(DecodeError, match="not an event boundary"):
        list(read_transactions(BinlogFiles(server.binlog_dir), inside, None))
    with pytest.raises(SourceError, match=str(inside.pos)):
        list(read_transactions(BinlogServer(creds, 4244), inside, workload["end"]))


def test_end_inside_a_transaction_is_refused(workload: dict[str, Any]) -> None:
    server: MariaDB = workload["server"]
    txs = _read(server, "files", workload["start"], workload["end"])
    big = next(tx for tx in txs if tx.batches)
    middle = big.batches[1].position
    with pytest.raises(DecodeError, match="inside the transaction"):
        list(read_transactions(BinlogFiles(server.binlog_dir), workload["start"], middle))


def test_mariadb_compressed_events(mariadb: MariaDB) -> None:
    conn = mariadb.connect()
    rows = [(i, "compressible text " * 20 + str(i)) for i in range(50)]
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS zip_test")
        cur.execute("CREATE TABLE IF NOT EXISTS zip_test.t (id INT PRIMARY KEY, v TEXT)")
        cur.execute("DELETE FROM zip_test.t")
        cur.execute("SET GLOBAL log_bin_compress = ON")
        cur.execute("SET GLOBAL log_bin_compress_min_len = 10")
        try:
            # A new connection takes the global setting.
            writer = mariadb.connect()
            with writer.cursor() as w:
                start = current_position(writer)
                w.executemany("INSERT INTO zip_test.t VALUES (%s, %s)", rows)
                w.execute("UPDATE zip_test.t SET v = 'short' WHERE id < 10")
                w.execute("DELETE FROM zip_test.t WHERE id >= 40")
                w.execute("CREATE TABLE IF NOT EXISTS zip_test.t2 (id INT PRIMARY KEY, note VARCHAR(100))")
                end = current_position(writer)
            writer.close()
        finally:
            cur.execute("SET GLOBAL log_bin_compress = OFF")
    conn.close()
    # The events really are compressed ones.
    raw = (mariadb.binlog_dir / end.file).read_bytes()[start.pos : end.pos]
    assert bytes([166]) in raw  # MARIA_WRITE_ROWS_COMPRESSED_V1
    for transport in ("files", "server"):
        txs = (
            _read_filtered(mariadb, start, end, "zip_test.t")
            if transport == "files"
            else [
                tx
                for tx in read_transactions(
                    BinlogServer(Credentials(mariadb.host, mariadb.port, "loader", mariadb.password), 4245),
                    start,
                    end,
                    TableSelector(("zip_test.t",)),
                )
            ]
        )
        changes = [(b.op, before, after) for tx in txs for b in tx.batches for before, after in b.rows]
        assert [c for c in changes if c[0] == "I"] == [("I", None, r) for r in rows]
        assert [c[2] for c in changes if c[0] == "U"] == [(i, "short") for i in range(10)]
        assert [c[1] for c in changes if c[0] == "D"] == [r for r in rows if r[0] >= 40]
        # The DDL is a compressed query event.
        assert any("CREATE TABLE IF NOT EXISTS zip_test.t2" in st.query for tx in txs for st in tx.statements)
