"""Where things are in a staging root (DESIGN.md section 3), with names made safe for any path.

    <source>/<schema>/<table>/<interval_id>/part-00000.csv[.gz]
    <source>/_intervals/<interval_id>.json           the manifest, written last
    <source>/_ledger/...                             the ledger

Schema and table names may hold anything MySQL allows (dots, slashes, quotes, spaces, unicode):
each path component is percent-encoded so it never escapes its folder, never reads as ``.``
or ``..``, and maps back to exactly one name.
"""

from __future__ import annotations

from urllib.parse import quote

INTERVAL_DIGITS = 10


def safe_component(name: str) -> str:
    """A name as one path component: letters, digits, ``_`` and ``-`` stay, the rest is %XX."""
    if not name:
        raise ValueError("an empty name cannot be a path component")
    return quote(name, safe="").replace(".", "%2E").replace("~", "%7E")


def interval_id(number: int) -> str:
    """Interval ids are zero-padded so that they sort in log order."""
    return f"{number:0{INTERVAL_DIGITS}d}"


def table_dir(source: str, schema: str, table: str, interval: str) -> str:
    """The folder of one table's files in one interval."""
    return f"{safe_component(source)}/{safe_component(schema)}/{safe_component(table)}/{interval}"


def part_name(number: int, gzip: bool) -> str:
    return f"part-{number:05d}.csv" + (".gz" if gzip else "")


def manifest_key(source: str, interval: str) -> str:
    return f"{safe_component(source)}/_intervals/{interval}.json"


def manifests_prefix(source: str) -> str:
    return f"{safe_component(source)}/_intervals"


def ledger_prefix(source: str) -> str:
    return f"{safe_component(source)}/_ledger"
