"""The demo's source schema and workload: a few tables of mixed types and a composite key.

The demo and the integration tests both use it, so what the demo shows is what is tested.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from loader.core.driver import pymysql
from loader.core.positions import Position
from loader.source.connection import current_position

DEMO_SCHEMA = "demo"

_DDL = (
    """CREATE TABLE IF NOT EXISTS customers (
        id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200) NULL,
        balance DECIMAL(12,2) NOT NULL DEFAULT 0,
        tier ENUM('free','pro','enterprise') NOT NULL DEFAULT 'free',
        created_at DATETIME(6) NOT NULL,
        notes TEXT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS order_lines (
        order_id BIGINT NOT NULL,
        line_no SMALLINT NOT NULL,
        sku CHAR(12) NOT NULL,
        qty INT NOT NULL,
        price DECIMAL(10,4) NOT NULL,
        shipped_on DATE NULL,
        flags SET('gift','fragile','express') NOT NULL DEFAULT '',
        PRIMARY KEY (order_id, line_no)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    """CREATE TABLE IF NOT EXISTS events (
        id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
        payload JSON NULL,
        happened_at TIMESTAMP(3) NULL,
        raw VARBINARY(64) NULL,
        score DOUBLE NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
)
DEMO_TABLES = ("customers", "order_lines", "events")
_NAMES = ("Zoë", "Łukasz", "Ærøskøbing", "O\u2019Brien", "李雷", "emoji 🚀")


@dataclass(frozen=True)
class WorkloadSummary:
    """What one round of demo writes did, and the binlog range it produced."""

    start: Position
    end: Position
    inserts: int
    updates: int
    deletes: int
    transactions: int


def create_schema(conn: pymysql.connections.Connection, schema: str = DEMO_SCHEMA) -> None:
    """Create the demo schema and tables when they do not exist yet."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{schema}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{schema}`")
        for ddl in _DDL:
            cur.execute(ddl)


def write_changes(
    conn: pymysql.connections.Connection, seed: int = 1, rows: int = 20, schema: str = DEMO_SCHEMA
) -> WorkloadSummary:
    """Write one round of inserts, updates and deletes, each statement group in its own transaction."""
    rnd = random.Random(seed)
    start = current_position(conn)
    ins = upd = dele = txns = 0
    base_time = datetime(2026, 1, 1) + timedelta(days=seed)
    with conn.cursor() as cur:
        cur.execute(f"USE `{schema}`")
        # Some ids are pushed past 2**63 (BIGINT UNSIGNED range); count on the small ones.
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM events WHERE id < 9223372036854775808")
        next_event = int(cur.fetchone()[0]) + 1
        cur.execute("SELECT COALESCE(MAX(order_id), 0) FROM order_lines")
        next_order = int(cur.fetchone()[0]) + 1

        conn.begin()
        for i in range(rows):
            cur.execute(
                "INSERT INTO customers (name, email, balance, tier, created_at, notes) VALUES (%s,%s,%s,%s,%s,%s)",
                (
                    f"Customer {seed}-{i} «{rnd.choice(_NAMES)}»",
                    None if i % 5 == 0 else f"c{seed}.{i}@example.com",
                    f"{rnd.randint(-99999, 99999)}.{rnd.randint(0, 99):02d}",
                    rnd.choice(["free", "pro", "enterprise"]),
                    base_time + timedelta(seconds=i, microseconds=rnd.randint(0, 999999)),
                    None if i % 3 == 0 else ("" if i % 3 == 1 else 'line one\nline "two", with comma'),
                ),
            )
            ins += 1
        conn.commit()
        txns += 1

        conn.begin()
        for o in range(next_order, next_order + max(1, rows // 4)):
            for line in range(1, 4):
                cur.execute(
                    "INSERT INTO order_lines VALUES (%s,%s,%s,%s,%s,%s,%s)",
                    (
                        o,
                        line,
                        f"SKU-{rnd.randint(0, 99999):05d}",
                        rnd.randint(1, 10),
                        f"{rnd.randint(0, 9999)}.{rnd.randint(0, 9999):04d}",
                        None if line == 3 else date(2026, 1, 1) + timedelta(days=rnd.randint(0, 300)),
                        rnd.choice(["", "gift", "gift,express", "fragile"]),
                    ),
                )
                ins += 1
        conn.commit()
        txns += 1

        conn.begin()
        for e in range(next_event, next_event + max(1, rows // 2)):
            cur.execute(
                "INSERT INTO events VALUES (%s,%s,%s,%s,%s)",
                (
                    e + (2**63 if e % 7 == 0 else 0),
                    None if e % 4 == 0 else f'{{"kind": "click", "n": {e}, "tags": ["a", "b"]}}',
                    base_time + timedelta(milliseconds=e),
                    bytes(rnd.randrange(256) for _ in range(e % 16)),
                    rnd.random() * 1e6,
                ),
            )
            ins += 1
        conn.commit()
        txns += 1

        cur.execute("SELECT id FROM customers ORDER BY id DESC LIMIT %s", (rows,))
        ids = [int(r[0]) for r in cur.fetchall()]
        for cid in ids[: max(1, rows // 4)]:
            conn.begin()
            upd += cur.execute(
                "UPDATE customers SET balance = balance + 1.5, tier = 'pro', notes = CONCAT(COALESCE(notes, ''), '!') "
                "WHERE id = %s",
                (cid,),
            )
            conn.commit()
            txns += 1
        conn.begin()
        upd += cur.execute(
            "UPDATE order_lines SET line_no = line_no + 10 WHERE order_id = %s AND line_no = 1", (next_order,)
        )
        dele += cur.execute("DELETE FROM order_lines WHERE order_id = %s AND line_no = 2", (next_order,))
        conn.commit()
        txns += 1

        conn.begin()
        dele += cur.execute("DELETE FROM customers WHERE id IN %s", (tuple(ids[-2:]),))
        conn.commit()
        txns += 1

        conn.begin()
        cur.execute("UPDATE customers SET email = 'rolled.back@example.com' WHERE id = %s", (ids[0],))
        conn.rollback()
    end = current_position(conn)
    return WorkloadSummary(start, end, ins, upd, dele, txns)
