"""Where things are in a staging root (DESIGN.md section 3), with names made safe for any path.

    <source>/<schema>/<table>/<interval_id>/part-00000.csv[.gz]
    <source>/_intervals/<interval_id>.json           the manifest, written last
    <source>/_ledger/...                             the ledger

A name's leading ``_`` is encoded (``%5F``), so no schema folder is ever the loader's own
``_intervals`` or ``_ledger`` (a schema called ``_ledger`` is ``<source>/%5Fledger/``). Intervals
staged before this rule stay readable: a manifest holds each file's full path.

Schema and table names may hold anything MySQL allows (dots, slashes, quotes, spaces, unicode):
each path component is percent-encoded (letters, digits, ``-`` and a ``_`` that does not lead
stay) so it never
escapes its folder, never reads as ``.`` or ``..``, and no two names share one. An encoding
longer than ``MAX_COMPONENT`` bytes (64 CJK letters are 576) is cut, at a whole ``%XX``, to its
first ``MAX_COMPONENT - 17`` characters and ends with ``~`` and 16 hex digits of the name's
SHA-256, so every component fits a file name (255 bytes) with room for the rest of an S3 key.
Plain encodings never hold ``~`` (and decode back to their name), so a shortened component never
equals another name's encoding.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

INTERVAL_DIGITS = 10
MAX_COMPONENT = 200
SHORTENED_MARK = "~"
SHORTENED_HASH_DIGITS = 16


def safe_component(name: str) -> str:
    """A name as one path component of at most ``MAX_COMPONENT`` ASCII characters: letters,
    digits, ``-`` and ``_`` (but a leading one) stay, the rest is %XX; a longer encoding is
    shortened (module docstring)."""
    if not name:
        raise ValueError("an empty name cannot be a path component")
    encoded = quote(name, safe="").replace(".", "%2E").replace("~", "%7E")
    if encoded.startswith("_"):  # the loader's own folders start with one
        encoded = "%5F" + encoded[1:]
    if len(encoded) <= MAX_COMPONENT:
        return encoded
    cut = MAX_COMPONENT - len(SHORTENED_MARK) - SHORTENED_HASH_DIGITS
    if "%" in encoded[cut - 2 : cut]:  # do not split a %XX
        cut = encoded.rindex("%", cut - 2, cut)
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{encoded[:cut]}{SHORTENED_MARK}{digest[:SHORTENED_HASH_DIGITS]}"


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


def kind(key: str) -> str:
    """What a key holds, in words: ``ledger interval``, ``ledger checkpoint``, ``lease``,
    ``manifest``, ``staged file``..."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[1] == "_ledger":
        folder = parts[2]
        if folder == "lease":
            return "lease"
        if len(parts) == 3:
            return f"ledger {folder.removesuffix('.json')}"
        return f"ledger {folder.removesuffix('s')}"
    if len(parts) >= 2 and parts[1] == "_intervals":
        return "manifest"
    return "staged file"
