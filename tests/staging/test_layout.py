"""Where the staging layout puts things, and how any MySQL name becomes one safe path component."""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_to_bytes

import pytest

from loader.staging import layout
from loader.staging.layout import interval_id, safe_component

AWKWARD = [
    ".",
    "..",
    "a.b",
    "a/b",
    "../../etc",
    "with space",
    "it's",
    'say "hi"',
    "back\\slash",
    "~home",
    "100%",
    "заказы",
    "注文",
    "émoji 🎉",
]


def test_letters_digits_underscore_and_dash_are_kept() -> None:
    assert safe_component("Orders_2024-eu") == "Orders_2024-eu"


@pytest.mark.parametrize("name", AWKWARD)
def test_any_name_becomes_one_component_that_maps_back(name: str) -> None:
    component = safe_component(name)
    assert re.fullmatch(r"[A-Za-z0-9_%-]+", component), component  # no '/', no '.', ASCII only
    assert component not in (".", "..")
    assert unquote(component) == name


def test_different_names_never_share_a_component() -> None:
    names = [*AWKWARD, "a%2Eb", "a%252Eb", "a b", "a+b", "a%20b", "A.b", "a~b", "a%7Eb", "%E6%B3%A8"]
    components = [safe_component(n) for n in names]
    assert len(set(components)) == len(names)
    assert safe_component("a.b") != safe_component("a%2Eb")


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(ValueError, match="empty name"):
        safe_component("")


def test_interval_ids_sort_in_numeric_order() -> None:
    numbers = [1, 9, 10, 11, 99, 100, 12345, 9_999_999_999]
    ids = [interval_id(n) for n in numbers]
    assert sorted(ids) == ids
    assert interval_id(9) < interval_id(10)
    assert interval_id(42) == "0000000042"


def test_files_manifests_and_ledger_sit_under_the_source_folder() -> None:
    interval = interval_id(3)
    assert layout.table_dir("demo", "shop", "orders", interval) == "demo/shop/orders/0000000003"
    assert layout.manifest_key("demo", interval) == "demo/_intervals/0000000003.json"
    assert layout.manifests_prefix("demo") == "demo/_intervals"
    assert layout.ledger_prefix("demo") == "demo/_ledger"
    assert layout.part_name(0, gzip=True) == "part-00000.csv.gz"
    assert layout.part_name(12, gzip=False) == "part-00012.csv"


def test_dotted_and_slashed_names_stay_in_their_own_folders() -> None:
    path = layout.table_dir("my.src", "../up", "a/b", interval_id(3))
    assert path == "my%2Esrc/%2E%2E%2Fup/a%2Fb/0000000003"
    assert layout.manifest_key("my.src", interval_id(3)) == "my%2Esrc/_intervals/0000000003.json"


@pytest.mark.parametrize("schema", ["_ledger", "_intervals", "tables", "_ledger/x", "%5Fledger"])
def test_a_schema_named_like_the_ledger_folder_stays_out_of_it(schema: str) -> None:
    for table in ("intervals", "_ledger", "checkpoint.json", "0000000001"):
        path = layout.table_dir("demo", schema, table, interval_id(1))
        assert path.split("/")[1] not in ("_ledger", "_intervals")
        assert not path.startswith(layout.ledger_prefix("demo") + "/")
        assert not path.startswith(layout.manifests_prefix("demo") + "/")


LONG = [
    "注" * 64,
    "注" * 63 + "文",
    "文" + "注" * 63,
    "a" * 64,
    "a" * 200,
    "a" * 201,
    "é" * 64,
    "." * 64,
    "x" + "." * 63,
    "🎉" * 64,
    "a" * 180 + "注" * 10,
    "a" * 181 + "注" * 10,
    "a" * 182 + "注" * 10,
]


@pytest.mark.parametrize("name", LONG)
def test_a_long_name_fits_in_a_file_name(name: str) -> None:
    component = safe_component(name)
    assert len(component.encode()) <= layout.MAX_COMPONENT <= 255
    assert re.fullmatch(r"[A-Za-z0-9_%~-]+", component), component
    assert re.search(r"%(?![0-9A-F]{2})", component) is None, "a %XX was cut"


def test_a_64_character_unicode_name_fits_in_a_file_name() -> None:
    assert len(safe_component("注" * 64).encode()) <= 255


def test_long_names_stay_distinct_and_short_ones_keep_their_encoding() -> None:
    names = [*LONG, *AWKWARD, "a" * 199 + "~", "a" * 66 + "%7E"]
    components = [safe_component(n) for n in names]
    assert len(set(components)) == len(names)
    for name, component in zip(names, components, strict=True):
        if layout.SHORTENED_MARK not in component:
            assert unquote(component) == name
        else:  # the encoding's beginning, then the hash
            kept, digest = component.split(layout.SHORTENED_MARK)
            assert name.encode().startswith(unquote_to_bytes(kept))
            assert re.fullmatch(r"[0-9a-f]{16}", digest)
    # The shortened form depends on the whole name, not only on the part that is kept.
    assert safe_component("注" * 63 + "文") != safe_component("注" * 64)
    assert safe_component("a" * 200) == "a" * 200
    assert safe_component("a" * 201) != "a" * 201
