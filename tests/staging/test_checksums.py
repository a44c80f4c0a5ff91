"""Staging files' checksums: CRC-32 as extract writes it, SHA-256 as version-1 manifests hold it,
and the check before materialisation refusing a changed file whichever it is."""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from pathlib import Path

import pytest

from loader.staging import checksums
from loader.staging.manifest import ColumnSpec, FileEntry, Manifest, ManifestError, TableEntry
from loader.staging.stores import LocalStore
from loader.staging.verify import sha256_hex, verified_manifest

DATA = b'op,seqno,row_id,commit_ts,id\nI,1,0,2024-01-01 00:00:00.000000,"1"\n'


def test_the_written_checksum_is_zlibs_crc32_of_the_bytes_however_they_were_written() -> None:
    running = checksums.RunningChecksum()
    for piece in (DATA[:7], DATA[7:30], b"", DATA[30:]):
        running.update(piece)
    assert running.text() == checksums.checksum(DATA) == f"crc32:{zlib.crc32(DATA):08x}"
    assert checksums.checksum(DATA, "sha256") == "sha256:" + hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize("algorithm", ["crc32", "sha256"])
def test_a_checksum_matches_its_bytes_and_no_changed_byte(algorithm: str) -> None:
    recorded = checksums.checksum(DATA, algorithm)
    assert checksums.matches(DATA, recorded)
    assert not checksums.matches(DATA[:-1], recorded)
    assert not checksums.matches(DATA.replace(b'"1"', b'"2"'), recorded)


def test_an_unknown_algorithm_is_a_manifest_error_naming_it() -> None:
    with pytest.raises(ManifestError, match="checksum algorithm 'md5' is not one this loader knows"):
        checksums.matches(DATA, "md5:00")


def _staged(tmp_path: Path, version: int) -> tuple[LocalStore, str]:
    """An interval's file and its manifest as a loader of manifest ``version`` wrote them."""
    store = LocalStore(str(tmp_path))
    store.put("s/t/part-0.csv", DATA)
    entry = FileEntry("s/t/part-0.csv", 0, 1, {"I": 1}, len(DATA), checksums.checksum(DATA))
    manifest = Manifest(
        "7",
        {},
        "b.1:4",
        "b.1:90",
        1,
        1,
        1,
        [TableEntry("s", "t", ["id"], [[ColumnSpec("id", "int")]], [entry])],
    )
    data = json.loads(manifest.to_json())
    if version == 1:
        data["version"] = 1
        file = data["tables"][0]["files"][0]
        del file["checksum"]
        file["sha256"] = hashlib.sha256(DATA).hexdigest()
    raw = json.dumps(data).encode()
    store.put("m/7.json", raw)
    return store, sha256_hex(raw)


def test_a_file_whose_checksum_names_an_unknown_algorithm_is_refused_naming_the_file(tmp_path: Path) -> None:
    store, _ = _staged(tmp_path, 2)
    raw = json.loads(store.get("m/7.json") or b"")
    raw["tables"][0]["files"][0]["checksum"] = "md5:00"
    store.put("m/7.json", json.dumps(raw).encode())
    with pytest.raises(
        ManifestError,
        match=r"interval 7: s\.t: staging file s/t/part-0\.csv: checksum algorithm 'md5' is not",
    ):
        verified_manifest(store, "7", "m/7.json", None, 1)


@pytest.mark.parametrize("version", [1, 2])
def test_a_staged_file_is_checked_with_the_checksum_its_manifest_recorded(
    tmp_path: Path, version: int
) -> None:
    store, manifest_sha256 = _staged(tmp_path, version)
    assert verified_manifest(store, "7", "m/7.json", manifest_sha256, 1).tables[0].files[0].bytes == len(DATA)
    store.put("s/t/part-0.csv", DATA.replace(b'"1"', b'"2"'))  # same size, one byte changed
    with pytest.raises(
        ManifestError,
        match=re.escape("interval 7: s.t: staging file s/t/part-0.csv was changed after extract"),
    ):
        verified_manifest(store, "7", "m/7.json", manifest_sha256, 1)
