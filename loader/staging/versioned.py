"""Versioned JSON records (the ledger's and the manifests): written with the current version,
read from any earlier one through its upgrades, refused with a clear error when newer.

A record without a ``version`` field is version 1 (what loaders wrote before records carried one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from loader.core.errors import LoaderError

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


def encode(fields: Mapping[str, Any], version: int) -> bytes:
    """A record as stable, readable JSON bytes (same fields, same bytes)."""
    data = {**fields, "version": version}
    return (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def decode(
    data: bytes, what: str, version: int, upgrades: Mapping[int, Upgrade], error: type[LoaderError]
) -> dict[str, Any]:
    """The fields of a record at ``version``, upgraded from the version it was written with.

    Args:
        what: names the record in errors (its key in the store).
        upgrades: ``n -> f`` turns the fields of version ``n`` into those of ``n + 1``.

    Raises:
        error: the bytes are not a JSON object, or were written by a newer loader.
    """
    try:
        raw = json.loads(data)
    except ValueError as exc:
        raise error(f"{what} is not JSON ({exc}): restore it from a backup, or remove it") from None
    if not isinstance(raw, dict):
        raise error(f"{what} is not a JSON object: restore it from a backup, or remove it")
    found = raw.pop("version", 1)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise error(f"{what} has version {found!r}, which no loader writes")
    if found > version:
        raise error(
            f"{what} has version {found}, newer than this loader reads ({version}): upgrade the loader"
        )
    for n in range(found, version):
        raw = upgrades[n](raw)
    return raw
