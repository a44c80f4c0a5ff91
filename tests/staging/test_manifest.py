"""The interval manifest: a faithful, deterministic JSON round trip, and clear errors for bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loader.staging.manifest import (
    ColumnSpec,
    FileEntry,
    Manifest,
    ManifestError,
    TableEntry,
)


def orders(table: str = "orders") -> TableEntry:
    return TableEntry(
        schema="shop",
        table=table,
        primary_key=["id"],
        layouts=[[ColumnSpec("id", "int"), ColumnSpec("note", "varchar(20)")], [ColumnSpec("id", "int")]],
        files=[
            FileEntry(
                "demo/shop/orders/0000000007/part-00000.csv.gz", 0, 5, {"I": 3, "U": 2}, 512, "crc32:0a1b2c3d"
            ),
            FileEntry(
                "demo/shop/orders/0000000007/part-00001.csv.gz", 1, 2, {"U": 1, "D": 1}, 128, "crc32:4e5f6071"
            ),
        ],
        statements=[{"position": "binlog.000001:900", "query": "ALTER TABLE orders ADD note varchar(20)"}],
    )


def manifest(source: dict[str, str] | None = None, table: str = "orders") -> Manifest:
    return Manifest(
        interval_id="0000000007",
        source=source if source is not None else {"name": "demo", "server_uuid": "3e11fa47-71ca"},
        start="binlog.000001:4",
        end="binlog.000002:120",
        seqno_min=(1 << 32) + 300,
        seqno_max=(2 << 32) + 120,
        transactions=3,
        tables=[orders(table), TableEntry("shop", "empty", ["a", "b"])],
    )


def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(manifest().to_json())
    return data


def test_a_manifest_read_back_equals_the_one_written() -> None:
    written = manifest()
    assert Manifest.from_json(written.to_json()) == written


def test_the_same_manifest_always_gives_the_same_bytes() -> None:
    data = manifest({"name": "demo", "server_uuid": "u"}).to_json()
    assert manifest({"server_uuid": "u", "name": "demo"}).to_json() == data  # key order does not matter
    assert Manifest.from_json(data).to_json() == data


def test_a_version_1_manifest_reads_with_its_files_sha256_named_as_their_checksum() -> None:
    data = raw()
    data["version"] = 1
    for entry in data["tables"][0]["files"]:
        entry["sha256"] = "ab" * 32
        del entry["checksum"]
    read = Manifest.from_json(json.dumps(data).encode())
    assert [f.checksum for f in read.tables[0].files] == ["sha256:" + "ab" * 32] * 2
    assert json.loads(read.to_json())["version"] == 2


def test_a_non_ascii_table_name_survives_as_utf8() -> None:
    data = manifest(table="注文 заказы").to_json()
    assert "注文 заказы".encode() in data
    assert Manifest.from_json(data).tables[0].table == "注文 заказы"


@pytest.mark.parametrize("version", [3, 0, None])
def test_a_manifest_of_another_version_is_refused_naming_the_version(version: int | None) -> None:
    data = raw()
    data["version"] = version
    with pytest.raises(ManifestError, match=f"manifest has version {version}, (newer|which no loader)"):
        Manifest.from_json(json.dumps(data).encode())


@pytest.mark.parametrize("missing", ["end", "seqno_max", "tables", "files", "checksum", "mysql_type"])
def test_a_missing_field_is_a_manifest_error(missing: str) -> None:
    data = raw()
    table = data["tables"][0]
    for record in (data, table, table["files"][0], table["layouts"][0][0]):
        record.pop(missing, None)
    with pytest.raises(ManifestError, match="manifest cannot be read"):
        Manifest.from_json(json.dumps(data).encode())


@pytest.mark.parametrize("data", [b"", b"{", b"not json", b"\xff\xfe\x00garbage"])
def test_bytes_that_are_not_json_are_a_manifest_error(data: bytes) -> None:
    with pytest.raises(ManifestError, match="manifest is not JSON"):
        Manifest.from_json(data)


@pytest.mark.parametrize("data", [b"[]", b"null"])
def test_json_that_is_not_an_object_is_a_manifest_error(data: bytes) -> None:
    with pytest.raises(ManifestError, match="manifest is not a JSON object"):
        Manifest.from_json(data)


def test_a_tables_ops_are_the_sums_over_its_files() -> None:
    assert orders().ops == {"I": 3, "U": 3, "D": 1}
    assert TableEntry("shop", "empty", ["id"]).ops == {}
