"""Check an interval's staging before it is applied: the manifest is the one extract wrote, it
agrees with itself and with the ledger, and every file it names is there with the size and
checksum extract recorded.

A staging file truncated, edited or removed after extract, or a manifest with a table taken
out, would otherwise be applied as if nothing happened and the warehouse would silently lose
rows. The remedy is always the same: extract the interval again, which rewrites its files and
manifest from the binlog.
"""

from __future__ import annotations

import hashlib

from loader.core.errors import ManifestError
from loader.staging import checksums
from loader.staging.manifest import Manifest
from loader.staging.stores import Store


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verified_manifest(
    store: Store, interval_id: str, key: str, manifest_sha256: str | None, changes: int | None
) -> Manifest:
    """The manifest of interval ``interval_id`` at ``key``, once it and its files check out.

    Args:
        manifest_sha256: the manifest's checksum the ledger recorded at extract (None for an
            interval extracted before the ledger recorded it: then only the files are checked).
        changes: the change rows the ledger recorded at extract.

    Raises:
        ManifestError: naming the interval, the file and what differs, with the remedy.
    """
    remedy = f"extract the interval again from the binlog: loader extract --interval {interval_id}"

    def refuse(what: str) -> ManifestError:
        return ManifestError(f"interval {interval_id}: {what}; nothing was applied. {remedy}")

    data = store.get(key)
    if data is None:
        raise refuse(f"its manifest {key} is missing")
    if manifest_sha256 is not None and sha256_hex(data) != manifest_sha256:
        raise refuse(f"its manifest {key} is not the one extract wrote (checksum differs)")
    manifest = Manifest.from_json(data, key)
    if manifest.interval_id != interval_id:
        raise refuse(f"its manifest {key} describes interval {manifest.interval_id}")
    rows = 0
    for table in manifest.tables:
        for entry in table.files:
            if sum(entry.ops.values()) != entry.rows:
                raise refuse(f"manifest {key}: {entry.path} counts {entry.rows} rows but {entry.ops} by op")
            rows += entry.rows
            staged = store.get(entry.path)
            if staged is None:
                raise refuse(f"{table.schema}.{table.table}: staging file {entry.path} is missing")
            if len(staged) != entry.bytes:
                raise refuse(
                    f"{table.schema}.{table.table}: staging file {entry.path} has {len(staged):,} bytes, "
                    f"extract wrote {entry.bytes:,}"
                )
            try:
                same = checksums.matches(staged, entry.checksum)
            except ManifestError as exc:
                raise refuse(f"{table.schema}.{table.table}: staging file {entry.path}: {exc}") from None
            if not same:
                raise refuse(
                    f"{table.schema}.{table.table}: staging file {entry.path} was changed after extract "
                    "(checksum differs)"
                )
    if changes is not None and rows != changes:
        raise refuse(f"its manifest {key} holds {rows:,} change rows, extract recorded {changes:,}")
    return manifest
