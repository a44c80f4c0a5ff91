"""Which binlog history a position belongs to (DESIGN.md section 2).

A position like ``mysql-bin.000042:1234`` names an event only on the server that wrote it, and
only until its binlog is reset or restored. The ledger keeps a ``Mark`` with every position it
records: the server that wrote it and the GTID state there. Before a run reads on from a
recorded position it asks the server for the GTID state at that same position; a different one
(or none) means the server no longer holds that history, and the run stops before recording
anything.

MariaDB answers for any position (``BINLOG_GTID_POS``) and its GTID events let extract carry the
state along the stream (``gtids.advance``). MySQL reports its executed GTID set only with its
current position (``current``), so its marks are kept where a run snapshots that position, extract
joins the stream's GTIDs to them (``gtids.reached``), and its check is the server uuid and that
the recorded set is still contained in the server's.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator
from dataclasses import dataclass

import pymysql
import pymysql.cursors

from loader import gtids
from loader.gtids import GtidSet, behind, gtid_domains, gtid_text, same_gtid
from loader.positions import Position
from loader.source import binary_logs, binlog_status, start_problem

_GTID_INFO = re.compile(r"GTID (\d+)-\d+-\d+")
_MYSQL_GTID_INFO = re.compile(r"GTID_NEXT\s*=\s*'([^']+)'")
# What on-call does when the source no longer holds the history read so far.
REMEDY = (
    "Point the loader back at the server that holds that history, or re-load every table "
    "(loader initial-load) to start from this one"
)


@dataclass(frozen=True)
class Mark:
    """What the ledger keeps with a position: the server that wrote it, the GTID state there.
    Either may be None: recorded by a loader before version 7, or not known for that position."""

    server: str | None = None  # "server_id=1 gtid_domain_id=0" (MariaDB), "server_uuid=..." (MySQL)
    gtid: str | None = None  # MariaDB GTID position ("0-1-8,3-2-5"); MySQL executed GTID set


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
    """The history the source server holds, asked on an open connection."""

    def __init__(self, conn: pymysql.connections.Connection, name: str, where: str) -> None:
        self.conn = conn
        self.name = name  # the source's name in the config
        self.where = where  # host:port, for messages
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

    def start_problem(self, start: Position, end: Position) -> str | None:
        """Why the server's log cannot be read from ``start`` up to ``end`` (``source.start_problem``)."""
        return start_problem(self.conn, start, end)

    def current(self) -> Position:
        """The server's current binlog position. MySQL reports its executed GTID set only in
        the same answer, so it is kept: ``gtid_at`` this position knows it afterwards."""
        self._now = binlog_status(self.conn)
        return self._now[0]

    def mark(self, at: Position) -> Mark:
        """This server and its GTID state at ``at`` (None when it cannot tell)."""
        return Mark(self.server, self.gtid_at(at))

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
        without a GTID (an older loader's) is taken on trust: unknown is never a refusal.
        """
        if recorded.gtid is None:
            return None
        logs = binary_logs(self.conn)
        if self.mariadb and at.file in logs:
            now = self.gtid_at(at)
            if now is not None and same_gtid(now, recorded.gtid):
                return None
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
            if recorded.server == self.server and self._contains(recorded.gtid):
                return None
            found = f"executed GTID set {self._current_gtid() or '(empty)'}"
        cause = (
            f"another server answers at {self.where} ({self.server}; the ledger's was {recorded.server})"
            if recorded.server and recorded.server != self.server
            else "its binlog was reset (RESET MASTER), it was restored from a backup, or another server "
            f"with the same id answers at {self.where}"
        )
        return (
            f"source {self.name} no longer holds the binlog history the loader has read: at {what} {at} "
            f"the ledger recorded GTID {recorded.gtid or '(empty)'}, the server has {found} there: {cause}"
        )

    def follow(self, recorded: Mark) -> Position | None:
        """Where this server's binlog holds exactly the GTID state ``recorded`` (a promoted replica
        logs the old primary's transactions under their own GTIDs, at its own positions): the
        position to continue from, or None when it has no such place.

        The newest binlog file that begins at or before that state is walked (``SHOW BINLOG
        EVENTS``) to the first transaction after it; MariaDB confirms the state there.
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
        if not self.mariadb:
            return found
        confirmed = self.gtid_at(found)
        return found if confirmed is not None and same_gtid(confirmed, recorded.gtid) else None

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
        """The events of ``file`` as (offset, end offset, the GTID it starts or None)."""
        with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute("SHOW BINLOG EVENTS IN %s", (file,))
            for _, pos, kind, _, end_pos, info in cur:
                yield int(pos), int(end_pos), gtid_of_event(str(kind), str(info or ""))

    def _current_gtid(self) -> str:
        with self.conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos" if self.mariadb else "SELECT @@gtid_executed")
            return str(cur.fetchone()[0] or "")

    def _contains(self, gtid_set: str) -> bool:
        """Whether the server has executed every GTID of ``gtid_set`` (MySQL)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT GTID_SUBSET(%s, @@gtid_executed)", (gtid_set,))
            return bool(cur.fetchone()[0])
