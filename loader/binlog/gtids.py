"""GTID states as text, for both flavours (DESIGN.md section 2): pure functions, no I/O.

MariaDB's GTID *position* (``0-1-8,3-2-5``) keeps the last GTID of each replication domain;
MySQL's GTID *set* (``3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,...``, 8.4+ also with tags:
``uuid:1-13:mytag:1-2``) keeps every transaction number each server (and tag) executed.
The ledger stores either as the text the server would print; these functions read, extend and
compare them.
"""

from __future__ import annotations

from collections.abc import Iterable

from loader.core.errors import GtidError

# --- MariaDB GTID positions ---------------------------------------------------------------


def gtid_domains(text: str) -> dict[int, str]:
    """A MariaDB GTID position (``0-1-8,3-2-5``: the last GTID of each domain) by domain."""
    out: dict[int, str] = {}
    for part in text.replace(" ", "").replace("\n", "").split(","):
        if part:
            out[int(part.split("-", 1)[0])] = part
    return out


def gtid_text(domains: dict[int, str]) -> str:
    """The canonical text of a GTID position: one GTID per domain, by domain."""
    return ",".join(domains[d] for d in sorted(domains))


def advance(position: str, gtids: Iterable[str]) -> str:
    """The GTID position after the MariaDB GTIDs ``gtids`` (``domain-server-seq``, in log order)."""
    domains = gtid_domains(position)
    for gtid in gtids:
        domains[int(gtid.split("-", 1)[0])] = gtid
    return gtid_text(domains)


def behind(current: str, recorded: str) -> bool:
    """Whether the MariaDB GTID position ``current`` lacks a domain of ``recorded`` or is at an
    earlier sequence number in one: that server has not (or no longer) written what was read."""
    now = gtid_domains(current)
    return any(
        d not in now or int(now[d].rsplit("-", 1)[1]) < int(gtid.rsplit("-", 1)[1])
        for d, gtid in gtid_domains(recorded).items()
    )


# --- MySQL GTID sets ----------------------------------------------------------------------


class GtidSet:
    """A MySQL GTID set: for each source uuid and tag ("" when untagged), the executed
    transaction numbers as sorted, disjoint, inclusive ranges."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: dict[tuple[str, str], list[list[int]]] = {}

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """Read the server's text (``uuid:1-5:7,uuid2:tag:1-3``; whitespace and newlines ignored).

        Raises:
            GtidError: on anything that is not a GTID set.
        """
        out = cls()
        for part in "".join(text.split()).split(","):
            if not part:
                continue
            sid, *rest = part.split(":")
            if len(sid.replace("-", "")) != 32 or not rest:
                raise GtidError(f"{part!r} is not a GTID set entry (uuid:ranges)")
            tag = ""
            for token in rest:
                if token[:1].isdigit():
                    first, _, last = token.partition("-")
                    if not first.isdigit() or (last and not last.isdigit()):
                        raise GtidError(f"{token!r} in {part!r} is not a transaction range")
                    out.add_range(sid, tag, int(first), int(last or first))
                elif token:
                    tag = token.lower()
                else:
                    raise GtidError(f"{part!r} has an empty range or tag")
        return out

    def add_range(self, sid: str, tag: str, first: int, last: int) -> None:
        """Add the transaction numbers ``first`` to ``last`` (inclusive) of ``sid`` and ``tag``."""
        if first < 1 or last < first:
            raise GtidError(f"{sid}:{first}-{last} is not a transaction range")
        spans = self.ranges.setdefault((sid.lower(), tag), [])
        if spans and spans[-1][0] <= first <= spans[-1][1] + 1:  # the next in order: the usual case
            spans[-1][1] = max(spans[-1][1], last)
            return
        spans.append([first, last])
        spans.sort()
        merged: list[list[int]] = []
        for span in spans:
            if merged and span[0] <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], span[1])
            else:
                merged.append(span)
        spans[:] = merged

    def add(self, gtid: str) -> None:
        """Add one GTID as ``Gtid.text()`` prints it (``uuid:n`` or ``uuid:tag:n``)."""
        sid, *rest = gtid.split(":")
        if not rest or not rest[-1].isdigit():
            raise GtidError(f"{gtid!r} is not a MySQL GTID")
        number = int(rest[-1])
        self.add_range(sid, rest[0].lower() if len(rest) == 2 else "", number, number)

    def update(self, other: GtidSet) -> None:
        """Add every transaction of ``other``."""
        for (sid, tag), spans in other.ranges.items():
            for first, last in spans:
                self.add_range(sid, tag, first, last)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return hash(self.text())

    def text(self) -> str:
        """The server's text: by uuid; under each its untagged ranges, then each tag's."""
        parts = []
        for sid in sorted({sid for sid, _ in self.ranges}):
            tokens = []
            for tag in sorted(t for s, t in self.ranges if s == sid):
                if tag:
                    tokens.append(tag)
                tokens += [f"{a}" if a == b else f"{a}-{b}" for a, b in self.ranges[(sid, tag)]]
            parts.append(":".join([sid, *tokens]))
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"GtidSet({self.text()!r})"


# --- either flavour -----------------------------------------------------------------------


def is_mysql(text: str) -> bool:
    """Whether a non-empty GTID text is a MySQL GTID set (its entries hold ``uuid:``)."""
    return ":" in text


def same_gtid(a: str, b: str) -> bool:
    """Whether two GTID texts name the same state: MariaDB positions in any domain order, MySQL
    sets whatever their ranges' spelling (``1-3:4`` is ``1-4``)."""
    if is_mysql(a) or is_mysql(b):
        try:
            return GtidSet.parse(a) == GtidSet.parse(b)
        except GtidError:
            return False
    return gtid_domains(a) == gtid_domains(b)


def reached(start: str, maria: Iterable[str], mysql: GtidSet) -> str:
    """The GTID state after a stream read from ``start``: MariaDB's ``maria`` GTIDs (log order)
    advance a position, MySQL's ``mysql`` set joins a set. Empty stream: ``start`` unchanged."""
    maria = list(maria)
    if mysql or (start and is_mysql(start)):
        out = GtidSet.parse(start)
        out.update(mysql)
        return out.text()
    return advance(start, maria) if maria else start


def contains(state: str, other: str) -> bool:
    """Whether the GTID state ``state`` includes every transaction of ``other``."""
    if is_mysql(state) or is_mysql(other):
        mine, theirs = GtidSet.parse(state), GtidSet.parse(other)
        union = GtidSet.parse(state)
        union.update(theirs)
        return union == mine
    return not behind(state, other)


def place_of(target: str, begin: str, events: Iterable[tuple[int, int, str | None]]) -> int | None:
    """Where in one binlog file the GTID state is exactly ``target``: the offset of the first
    transaction after it, or the end of the file's last event when the file ends there; None
    when no place in the file has that state.

    ``begin`` is the state where the file begins; ``events`` are its events in log order as
    (offset, end offset, the GTID it starts or None).
    """
    last_end: int | None = None
    if is_mysql(target) or is_mysql(begin):
        goal, now = GtidSet.parse(target), GtidSet.parse(begin)
        for pos, end, gtid in events:
            if gtid is not None:
                if now == goal:
                    return pos
                now.add(gtid)
            last_end = end
        return last_end if now == goal else None
    goal_domains, domains = gtid_domains(target), gtid_domains(begin)
    for pos, end, gtid in events:
        if gtid is not None:
            if domains == goal_domains:
                return pos
            domains[int(gtid.split("-", 1)[0])] = gtid
        last_end = end
    return last_end if domains == goal_domains else None
