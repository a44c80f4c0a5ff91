"""Which binlog history a position belongs to (DESIGN.md section 2).

A position like ``mysql-bin.000042:1234`` names an event only on the server that wrote it, and
only until its binlog is reset or restored. The ledger keeps a ``Mark`` with every position it
records: the server that wrote it and the GTID state there. Before a run reads on from a
recorded position it asks the server for the GTID state at that same position; a different one
(or none) means the server no longer holds that history, and the run stops before recording
anything.

A GTID state is a counter that a reset starts again, so a mark also holds the fingerprint of the
last transaction before its position (``binlog.fingerprint``): a state found without that
transaction is another history too, at the same position or at a promoted replica's.

MariaDB answers for any position (``BINLOG_GTID_POS``) and its GTID events let extract carry the
state along the stream (``gtids.advance``). MySQL reports its executed GTID set only with its
current position (``current``), so its marks are kept where a run snapshots that position, extract
joins the stream's GTIDs to them (``gtids.reached``), and its check is the server uuid and that
the recorded set is still contained in the server's.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass

from loader.binlog import gtids
from loader.binlog.fingerprint import Fingerprint, first_commit_after, read_fingerprint
from loader.binlog.gtids import GtidSet, behind, gtid_domains, gtid_text, same_gtid
from loader.binlog.reader import open_transport
from loader.binlog.spool import stream_bytes
from loader.binlog.transport import Transport
from loader.core.config import SourceConfig
from loader.core.driver import pymysql
from loader.core.positions import Position
from loader.source.connection import Credentials, binary_logs, binlog_status, mysql_status, start_problem

_GTID_INFO = re.compile(r"GTID (\d+)-\d+-\d+")
_MYSQL_GTID_INFO = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'")


@dataclass(frozen=True)
class Mark:
    """What the ledger keeps with a position: the server that wrote it, the GTID state there and
    the fingerprint of the last transaction before it. Any may be None: recorded by an older
    loader (before version 7, or 9 for the fingerprint), or not known for that position."""

    server: str | None = None  # "server_id=1 gtid_domain_id=0" (MariaDB), "server_uuid=..." (MySQL)
    gtid: str | None = None  # MariaDB GTID position ("0-1-8,3-2-5"); MySQL executed GTID set
    txn: str | None = None  # ``Fingerprint.text()`` of the last transaction before the position

    def described(self) -> str:
        """The recorded state for messages: ``GTID 0-1-8 (after GTID 0-1-8 committed ...)``."""
        after = f" (after {Fingerprint.parse(self.txn).describe()})" if self.txn else ""
        return f"GTID {self.gtid or '(empty)'}{after}"


# --- the source's own account: I/O -----------------------------------------------------------


def gtid_of_event(kind: str, info: str) -> str | None:
    """The GTID an event starts, from its row of ``SHOW BINLOG EVENTS``: MariaDB's ``Gtid``
    (``BEGIN GTID 0-1-5``), MySQL's ``Gtid`` and tagged ones (``SET @@SESSION.GTID_NEXT=
    'uuid:5'``); None for any other event and MySQL's anonymous ones."""
    if "gtid" not in kind.lower() or kind == "Previous_gtids":
        return None
    if (m := _MYSQL_GTID_INFO.search(info)) is not None:
        return None if m.group(1).upper() == "ANONYMOUS" else m.group(1)
    if kind == "Gtid" and (m := _GTID_INFO.search(info)) is not None:
        return m.group(0).removeprefix("GTID ")
    return None


class SourceHistory:
    """The history the source server holds, asked on an open connection; ``transport`` opens a
    way to read its binlog events (for the transactions the fingerprints name). ``of`` builds it
    for a configured source."""

    def __init__(
        self,
        conn: pymysql.connections.Connection,
        name: str,
        where: str,
        transport: Callable[[], Transport],
        event_batch_bytes: int | None = None,
    ) -> None:
        self.conn = conn
        self.name = name  # the source's name in the config
        self.where = where  # host:port, for messages
        self._transport = transport
        self._event_batch_bytes = event_batch_bytes  # of SHOW BINLOG EVENTS' rows read at a time
        self._now: tuple[Position, str | None] | None = None  # the last ``current`` answer
        with conn.cursor() as cur:
            cur.execute("SELECT @@version, @@server_id")
            version, server_id = cur.fetchone()
            self.mariadb = "mariadb" in str(version).lower()
            if self.mariadb:
                cur.execute("SELECT @@gtid_domain_id")
                self.server = f"server_id={server_id} gtid_domain_id={cur.fetchone()[0]}"
            else:
                cur.execute("SELECT @@server_uuid")
                self.server = f"server_uuid={cur.fetchone()[0]}"

    @classmethod
    def of(cls, conn: pymysql.connections.Connection, src: SourceConfig, creds: Credentials) -> SourceHistory:
        """The history of the source ``src`` on ``conn``; events are read through the source's
        transport, from a server without registering as a replica (beside a running extract)."""
        return cls(conn, src.name, f"{creds.host}:{creds.port}", lambda: open_transport(src, server_id=0))

    def start_problem(self, start: Position, end: Position) -> str | None:
        """Why the server's log cannot be read from ``start`` up to ``end`` (``source.start_problem``)."""
        return start_problem(self.conn, start, end)

    def current(self) -> Position:
        """The server's current binlog position. MySQL reports its executed GTID set only with
        it (``mysql_status``), so it is kept: ``gtid_at`` this position knows it afterwards."""
        self._now = binlog_status(self.conn) if self.mariadb else mysql_status(self.conn)
        return self._now[0]

    def mark(self, at: Position) -> Mark:
        """This server, its GTID state at ``at`` and the last transaction before it (each None
        when it cannot tell)."""
        last = self.last_transaction(at)
        return Mark(self.server, self.gtid_at(at), last.text() if last else None)

    def transaction_at(self, at: Position) -> Fingerprint | None:
        """The fingerprint of the transaction whose GTID event starts at ``at``, or None."""
        return read_fingerprint(self._transport(), at)

    def first_commit_after(self, at: Position) -> int | None:
        """The commit time (µs, UTC) of the first transaction at or after ``at``; None when
        there is none yet (``fingerprint.first_commit_after``)."""
        return first_commit_after(self._transport(), at)

    def now_us(self) -> int:
        """The server's clock (µs, UTC): the commit times in its log are of that clock, so a
        lag measured on it does not include the skew between two machines' clocks."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT UNIX_TIMESTAMP(NOW(6))")
            return int(cur.fetchone()[0] * 1_000_000)

    def bytes_between(self, start: Position, end: Position) -> int:
        """Bytes of binlog in ``[start, end)``, across the server's files (``SHOW BINARY LOGS``)."""
        return stream_bytes(binary_logs(self.conn) if start.file != end.file else {}, start, end)

    def last_transaction(self, at: Position) -> Fingerprint | None:
        """The last transaction before ``at`` (see ``_gtid_event_before``), or None."""
        found = self._gtid_event_before(at)
        return self.transaction_at(found) if found is not None else None

    def _gtid_event_before(self, before: Position, gtid: str | None = None) -> Position | None:
        """The last GTID event before ``before`` (of ``gtid`` only, when given): in its file, or
        in the file before when there is none there (``SHOW BINLOG EVENTS``)."""
        logs = list(binary_logs(self.conn))
        if before.file not in logs:
            return None
        i = logs.index(before.file)
        for file in reversed(logs[max(0, i - 1) : i + 1]):
            last = None
            with contextlib.closing(self._gtid_events(file)) as events:
                for pos, _, started in events:
                    if file == before.file and pos >= before.pos:
                        break
                    if started is not None and (gtid is None or started == gtid):
                        last = Position(file, pos)
            if last is not None:
                return last
        return None

    def _other_transaction(self, recorded: Mark, logs: dict[str, int]) -> str | None:
        """What the server holds where the recorded mark's last transaction was, when that is
        another transaction; None when it is the same, or when its file is gone (purged: the
        GTID state is then all there is to compare)."""
        if recorded.txn is None:
            return None
        fingerprint = Fingerprint.parse(recorded.txn)
        if fingerprint.at.file not in logs:
            return None
        seen = self.transaction_at(fingerprint.at)
        if seen is not None and seen.same_transaction(fingerprint):
            return None
        return seen.describe() if seen is not None else f"no transaction starting at {fingerprint.at}"

    def gtid_at(self, at: Position) -> str | None:
        """The GTID state at ``at``: MariaDB's for any event boundary it holds, MySQL's only at
        its current position. None: not an event boundary, not held, or not known."""
        if not self.mariadb:
            now, executed = self._now if self._now and self._now[0] == at else binlog_status(self.conn)
            return GtidSet.parse(executed).text() if now == at and executed is not None else None
        with self.conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (at.file, at.pos))
            row = cur.fetchone()
        return None if row is None or row[0] is None else gtid_text(gtid_domains(str(row[0])))

    def problem(self, at: Position, recorded: Mark, what: str) -> str | None:
        """Why the server no longer holds the history ``recorded`` at ``at``, or None.

        ``what`` says what the position is ("the checkpoint", "interval 000004's start"). A mark
        without a GTID (an older loader's) is taken on trust: unknown is never a refusal; one
        without a fingerprint is checked by its GTID state alone.
        """
        if recorded.gtid is None:
            return None
        logs = binary_logs(self.conn)
        if self.mariadb and at.file in logs:
            now = self.gtid_at(at)
            if now is not None and same_gtid(now, recorded.gtid):
                other = self._other_transaction(recorded, logs)
                if other is None:
                    return None
                found = f"GTID position {now}, but after {other}"
            else:
                found = f"GTID position {now or '(empty)'}" if now is not None else "no event boundary"
        elif self.mariadb:
            # Purged past it, or another history: the same one when the server's oldest file
            # begins at or after the recorded state (``source.start_problem`` names the purge).
            oldest = next(iter(logs), None)
            since = self.gtid_at(Position(oldest, 4)) if oldest else self._current_gtid()
            if since is not None and not behind(since, recorded.gtid):
                return None
            found = (
                f"no {at.file}, and its oldest binlog begins at GTID position {since or '(empty)'}, before it"
            )
        else:
            other = None
            if recorded.server == self.server and self._contains(recorded.gtid):
                other = self._other_transaction(recorded, logs)
                if other is None:
                    return None
            found = f"executed GTID set {self._current_gtid() or '(empty)'}"
            found += f", but {other} where the ledger's was" if other else ""
        cause = (
            f"another server answers at {self.where} ({self.server}; the ledger's was {recorded.server})"
            if recorded.server and recorded.server != self.server
            else "its binlog was reset (RESET MASTER), it was restored from a backup, or another server "
            f"with the same id answers at {self.where}"
        )
        return (
            f"source {self.name} no longer holds the binlog history the loader has read: at {what} {at} "
            f"the ledger recorded {recorded.described()}, the server has {found} there: {cause}"
        )

    def follow(self, recorded: Mark) -> tuple[Position, Mark] | None:
        """Where this server's binlog holds exactly the GTID state ``recorded`` (a promoted replica
        logs the old primary's transactions under their own GTIDs and commit times, at its own
        positions), and the mark there on this server: the position to continue from, or None
        when it has no such place.

        The newest binlog file that begins at or before that state is walked (``SHOW BINLOG
        EVENTS``) to the first transaction after it; MariaDB confirms the state there. When the
        mark has a fingerprint, its transaction must be the one of that GTID on this server.
        """
        if recorded.gtid is None:
            return None
        for file in reversed(list(binary_logs(self.conn))):
            begin = self._file_begins(file)
            if begin is not None and gtids.contains(recorded.gtid, begin):
                break
        else:
            return None
        with contextlib.closing(self._gtid_events(file)) as events:
            offset = gtids.place_of(recorded.gtid, begin, events)
        if offset is None:
            return None
        found = Position(file, offset)
        state = recorded.gtid
        if self.mariadb:
            confirmed = self.gtid_at(found)
            if confirmed is None or not same_gtid(confirmed, recorded.gtid):
                return None
            state = confirmed
        if recorded.txn is None:
            return found, Mark(self.server, state)
        # The recorded transaction, with the same commit time, just before that place.
        fingerprint = Fingerprint.parse(recorded.txn)
        at = self._gtid_event_before(found, fingerprint.gtid)
        here = self.transaction_at(at) if at is not None else None
        if here is None or not here.same_transaction(fingerprint):
            return None
        return found, Mark(self.server, state, here.text())

    def _file_begins(self, file: str) -> str | None:
        """The GTID state where the binlog file ``file`` begins (MySQL: its Previous_gtids)."""
        if self.mariadb:
            return self.gtid_at(Position(file, 4))
        with self.conn.cursor() as cur:
            cur.execute("SHOW BINLOG EVENTS IN %s LIMIT 4", (file,))
            for _, _, kind, _, _, info in cur.fetchall():
                if kind == "Previous_gtids":
                    return GtidSet.parse(str(info or "")).text()
        return None

    def _gtid_events(self, file: str) -> Generator[tuple[int, int, str | None], None, None]:
        """The events of ``file`` that may start a GTID, and its last event, in log order, as
        (offset, end offset, the GTID it starts or None): all that ``_gtid_event_before`` and
        ``gtids.place_of`` look at.

        A file of a busy server holds millions of events (1 GB by default): they are read as
        Arrow columns (``source.rows``) and only the rows whose type names a GTID reach Python.
        Left early, the rest of the rows are still read, so the connection stays usable.
        """
        import pyarrow as pa  # here: the loader's commands start ~0.1 s sooner without it
        import pyarrow.compute as pc

        from loader.source.rows import BATCH_BYTES, row_batches

        sql = f"SHOW BINLOG EVENTS IN {self.conn.escape(file)}"
        batches = row_batches(self.conn, sql, 6, self._event_batch_bytes or BATCH_BYTES)
        try:
            last: tuple[int, int, str | None] | None = None  # the last event so far, when no GTID's
            for _, pos, kind, _, end, info in batches:
                kinds = kind.cast(pa.large_string())
                indices = pc.indices_nonzero(pc.match_substring(kinds, "gtid", ignore_case=True))
                picked = indices.to_pylist()  # none in a batch of one large transaction's events
                rows = zip(
                    pos.take(indices).to_pylist(),
                    end.take(indices).to_pylist(),
                    kinds.take(indices).to_pylist(),
                    info.take(indices).to_pylist(),
                    strict=True,
                )
                for p, e, k, i in rows:
                    yield int(p), int(e), gtid_of_event(k, (i or b"").decode("utf-8", "replace"))
                final = len(pos) - 1
                if final >= 0:
                    end_row = (int(pos[final].as_py()), int(end[final].as_py()), None)
                    last = None if picked and picked[-1] == final else end_row
            if last is not None:
                yield last
        finally:
            for _ in batches:  # the rows left unread
                pass

    def _current_gtid(self) -> str:
        with self.conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos" if self.mariadb else "SELECT @@gtid_executed")
            return str(cur.fetchone()[0] or "")

    def _contains(self, gtid_set: str) -> bool:
        """Whether the server has executed every GTID of ``gtid_set`` (MySQL)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT GTID_SUBSET(%s, @@gtid_executed)", (gtid_set,))
            return bool(cur.fetchone()[0])
