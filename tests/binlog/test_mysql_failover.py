"""A MySQL source's failover, live: the loader reads a primary while it is written, the primary is
lost, its replica (GTID auto-positioning, its own binlog file numbers) is promoted, and the loader
continues on it where the replica's GTID history reaches what was read, the warehouse equal to the
source after each run; a tagged GTID (MySQL 8.4) is carried as any other; a reset of the promoted
server's binlog stops the next run before anything is recorded."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from loader.app import steps
from loader.binlog.fingerprint import Fingerprint
from loader.binlog.gtids import GtidSet
from loader.core.config import Config
from loader.core.errors import HistoryError
from loader.state.ledger import Ledger
from loader.warehouse.initial_load import run_initial_load
from tests import writer
from tests.conftest import (
    MySQL,
    assert_equal_to_source,
    delta,
    fresh_schema,
    mysql_caught_up,
    quiet,
    random_seed,
    schema_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCHEMA = "my_failover"


def _uuid(db: MySQL) -> str:
    [(uuid,)] = db.rows("SELECT @@server_uuid")
    return str(uuid)


def test_a_promoted_mysql_replica_is_followed_by_gtid_and_a_reset_binlog_is_refused(
    replicated_mysql: tuple[MySQL, MySQL], tmp_path: Path, spark_config: Config, spark: Any
) -> None:
    primary, replica = replicated_mysql
    fresh_schema(primary, SCHEMA, "t (id INT PRIMARY KEY, v INT, s VARCHAR(40))", *writer.TABLES)
    primary.execute(
        f"INSERT INTO {SCHEMA}.t VALUES " + ", ".join(f"({n}, {n}, 'loaded')" for n in range(1, 51))
    )
    cfg = schema_config(primary, tmp_path, spark_config, SCHEMA)
    run_initial_load(spark, cfg, progress=quiet)

    # Transactions on the primary (some rolled back) while delta runs go on.
    busy = writer.Writer(primary, SCHEMA, random_seed())
    busy.start()
    try:
        for _ in range(2):
            delta(spark, cfg)
    finally:
        busy.finish()
    assert busy.transactions > 0
    # Changes the loader has not read yet reach the replica, then the primary is gone.
    primary.execute(f"UPDATE {SCHEMA}.t SET s = 'last on the primary' WHERE id <= 10")
    mysql_caught_up(primary, replica)
    ledger = Ledger.of(cfg)
    checkpoint = ledger.checkpoint()
    assert checkpoint is not None and checkpoint.server == f"server_uuid={_uuid(primary)}"
    primary.stop()
    replica.as_root("STOP REPLICA; RESET REPLICA ALL")
    replica.execute(f"UPDATE {SCHEMA}.t SET s = 'promoted' WHERE id BETWEEN 5 AND 15")

    # The same source at the promoted replica's address: followed where its GTIDs reach the checkpoint's.
    promoted = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, port=replica.port))
    refusing = dataclasses.replace(promoted, source=dataclasses.replace(promoted.source, failover="stop"))
    with pytest.raises(HistoryError, match=r'\(source.failover = "stop": a server whose GTID history'):
        delta(spark, refusing)
    assert ledger.checkpoint() == checkpoint
    delta(spark, promoted)
    followed = next(i for i in ledger.intervals() if i.followed_from)
    assert followed.followed_from == f"{checkpoint.position} of {checkpoint.server} (GTID {checkpoint.gtid})"
    assert followed.start.file == "mysql-bin.000003"  # the replica's own position for it
    assert (followed.epoch, followed.server) == (1, f"server_uuid={_uuid(replica)}")
    assert GtidSet.parse(followed.start_gtid or "") == GtidSet.parse(checkpoint.gtid or "")
    # The replica logged the primary's last transaction with its GTID and commit time: the
    # same transaction, at the replica's own position.
    assert checkpoint.txn is not None and followed.start_txn is not None
    primary_last, replica_last = Fingerprint.parse(checkpoint.txn), Fingerprint.parse(followed.start_txn)
    assert replica_last.same_transaction(primary_last) and replica_last.at != primary_last.at
    assert_equal_to_source(spark, promoted)
    said = steps.status(promoted).text()
    assert f"followed: interval {followed.id} continues on server_uuid=" in said, said

    # A tagged GTID (MySQL 8.4 and later) is a GTID like any other.
    replica.as_root(
        f"SET gtid_next = 'AUTOMATIC:failover'; INSERT INTO {SCHEMA}.t VALUES (9998, 1, 'tagged'); "
        "SET gtid_next = 'AUTOMATIC'"
    )
    replica.execute(
        f"DELETE FROM {SCHEMA}.t WHERE id BETWEEN 20 AND 25",
        f"INSERT INTO {SCHEMA}.t VALUES (9999, 1, 'new primary')",
    )
    delta(spark, promoted)
    last = ledger.intervals()[-1]
    assert last.epoch == 1 and ":failover:" in (last.end_gtid or ""), last.end_gtid
    assert_equal_to_source(spark, promoted)

    # The promoted server's binlog and GTIDs reset: what was read is no longer its history.
    replica.as_root(
        f"RESET BINARY LOGS AND GTIDS; INSERT INTO {SCHEMA}.t VALUES (10000, 1, 'after the reset')"
    )
    before, intervals = ledger.checkpoint(), ledger.intervals()
    with pytest.raises(HistoryError, match=f"source {cfg.source.name} no longer holds the binlog history"):
        delta(spark, promoted)
    assert ledger.checkpoint() == before and ledger.intervals() == intervals
