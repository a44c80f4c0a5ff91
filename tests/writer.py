"""A writer of random small transactions on a test server, running beside the runs under test."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from tests.conftest import MariaDB

# The tables it writes to, for ``fresh_schema``: a single key and a composite one.
TABLES = [
    "k (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20))",
    "c (a VARCHAR(8) NOT NULL, b INT NOT NULL, v BIGINT, PRIMARY KEY (a, b))",
]


class Writer(threading.Thread):
    """Random small transactions on both tables until stopped; ``paused`` holds it between two."""

    def __init__(self, mariadb: MariaDB, schema: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.conn = mariadb.connect(database=schema)
        self.conn.autocommit(False)
        self.random = random.Random(seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.transactions = 0
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                with self.lock:
                    self._transaction()
                time.sleep(self.random.uniform(0.002, 0.02))
        except BaseException as exc:  # the test fails with it
            self.failed = exc

    def _transaction(self) -> None:
        r = self.random
        with self.conn.cursor() as cur:
            for _ in range(r.randint(1, 4)):
                key = r.randint(1, 60)
                a, b = r.choice("xyzw"), r.randint(1, 15)
                cur.execute(
                    r.choice(
                        [
                            f"INSERT INTO k VALUES ({key}, {r.randint(0, 999)}, 's{key}') "
                            "ON DUPLICATE KEY UPDATE v = v + 1, s = CONCAT(s, '+')",
                            f"UPDATE k SET v = (v * 2) % 100000 WHERE id BETWEEN {key} AND {key + r.randint(0, 8)}",
                            f"DELETE FROM k WHERE id = {key}",
                            f"INSERT INTO c VALUES ('{a}', {b}, {r.randint(0, 10**12)}) "
                            "ON DUPLICATE KEY UPDATE v = v - 1",
                            f"DELETE FROM c WHERE a = '{a}' AND b = {b}",
                        ]
                    )
                )
        if r.random() < 0.05:
            self.conn.rollback()
        else:
            self.conn.commit()
            self.transactions += 1

    def paused(self) -> Any:
        return self.lock

    def finish(self) -> None:
        self.stop.set()
        self.join()
        self.conn.close()
        if self.failed is not None:
            raise AssertionError(f"the writer failed: {self.failed!r}")
