"""The typed config: the example file, environment overrides, and errors that list accepted values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loader.core.config import load_config
from loader.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "loader.example.toml"


def test_example_config_loads_with_paths_resolved_against_its_folder() -> None:
    cfg = load_config(EXAMPLE, env={})
    assert cfg.source.port == 33061
    assert cfg.source.transport == "server"
    assert cfg.tables.include == ("demo.*",)
    assert cfg.staging.uri == "file://" + str(ROOT / ".demo" / "staging")
    assert cfg.warehouse.dir == str(ROOT / ".demo" / "warehouse")
    assert cfg.spark.master == "local[2]"
    assert cfg.spark.conf["spark.sql.shuffle.partitions"] == "4"


def test_config_file_comes_from_loader_config_variable() -> None:
    cfg = load_config(None, env={"LOADER_CONFIG": str(EXAMPLE)})
    assert cfg.warehouse.database == "demo_wh"


def test_environment_overrides_are_typed() -> None:
    cfg = load_config(
        EXAMPLE,
        env={
            "LOADER__SOURCE__PORT": "3307",
            "LOADER__TABLES__INCLUDE": '["shop.*", "crm.customers"]',
            "LOADER__STAGING__URI": "s3://bucket/prefix",
            "LOADER__STAGING__GZIP": "true",
        },
    )
    assert cfg.source.port == 3307
    assert cfg.tables.include == ("shop.*", "crm.customers")
    assert cfg.staging.uri == "s3://bucket/prefix"
    assert cfg.staging.scheme == "s3"
    assert cfg.staging.gzip is True


def test_password_comes_from_the_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SECRET", "s3cr3t")
    cfg = load_config(EXAMPLE, env={"LOADER__SOURCE__PASSWORD_ENV": "MY_SECRET"})
    assert cfg.source.password() == "s3cr3t"
    assert "s3cr3t" not in repr(cfg)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"LOADER__SOURCE__TRANSPORT": "kafka"}, "accepted values: server, files"),
        ({"LOADER__WAREHOUSE__CATALOG": "glue"}, "accepted values: derby, hive"),
        (
            {"LOADER__TABLES__SCHEMA_CHANGES": "review"},
            "tables.schema_changes = 'review' is not accepted; accepted values: evolve, stop",
        ),
        ({"LOADER__STAGING__URI": "gs://b/p"}, "accepted values: file, s3, hdfs"),
        (
            {"LOADER__SOURCE__FAILOVER": "always"},
            "source.failover = 'always' is not accepted; accepted values: follow, stop",
        ),
        (
            {"LOADER__SOURCE__DECODER": "cython"},
            "source.decoder = 'cython' is not accepted; accepted values: native, python",
        ),
        ({"LOADER__SOURCE__PORT": "many"}, "source.port must be an integer"),
        (
            {"LOADER__SOURCE__SCHEDULE": "often"},
            "source.schedule = 'often' is not accepted; accepted values: minutes",
        ),
        ({"LOADER__SOURCE__COLOUR": "red"}, "accepted fields: name, transport, host"),
        ({"LOADER__SOURCE__TRANSPORT": "files"}, "source.binlog_dir is required"),
        ({"LOADER__WAREHOUSE__CATALOG": "hive"}, "metastore_uri"),
        ({"LOADER__TABLES__INCLUDE": '["customers"]'}, "must look like schema.table"),
        ({"LOADER__WAREHOUSE__PARTITION_ROWS_BY_TABLE": '{ "demo.t" = "many" }'}, "must be an integer"),
        ({"LOADER__WAREHOUSE__BUCKETS_BY_TABLE": '{ "demo.t" = 0 }'}, "must be >= 1"),
        ({"LOADER__WAREHOUSE__SWAP_BATCH": "0"}, "swap_batch must be >= 1"),
        ({"LOADER__SPARK__MERGE_TABLES_AT_ONCE": "0"}, "spark.merge_tables_at_once must be >= 1"),
        (
            {"LOADER__LOAD__ENGINE": "duckdb"},
            "load.engine = 'duckdb' is not accepted; accepted values: arrow, spark",
        ),
        (
            {"LOADER__SOURCE__ALERT_LAG_SECONDS": "-1"},
            "source.alert_lag_seconds must be >= 0 \\(0: no alert\\), got -1",
        ),
        ({"LOADER__WAREHOUSE__BUCKETS_BY_TABLE": '{ "t" = 4 }'}, "must look like schema.table"),
        (
            {"LOADER__TABLES__ROUTES": '{ "orders" = "shop.orders" }'},
            "tables.routes pattern 'orders' must look",
        ),
        (
            {"LOADER__TABLES__ROUTES": '{ "shop_01.orders" = "Shop.Orders" }'},
            "tables.routes 'shop_01.orders' = 'Shop.Orders': the shared table must be named schema.table in",
        ),
        (
            {
                "LOADER__TABLES__ROUTES": '{ "shop_*.orders" = "shop.orders" }',
                "LOADER__WAREHOUSE__FORMAT": "hive",
            },
            "tables.routes need warehouse.format = 'iceberg'",
        ),
    ],
)
def test_invalid_values_fail_naming_field_and_accepted_values(override: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")) as info:
        load_config(EXAMPLE, env=override)
    assert str(EXAMPLE) in str(info.value)


def test_partitioning_can_be_set_per_table() -> None:
    cfg = load_config(
        EXAMPLE,
        env={
            "LOADER__WAREHOUSE__PARTITION_ROWS_BY_TABLE": '{ "demo.events*" = 1000, "demo.*" = 5000 }',
            "LOADER__WAREHOUSE__BUCKETS_BY_TABLE": '{ "demo.lines" = 64 }',
        },
    )
    assert cfg.warehouse.partitioning("demo", "events_2026") == (1000, 16)
    assert cfg.warehouse.partitioning("demo", "lines") == (5000, 64)
    assert cfg.warehouse.partitioning("other", "t") == (1_000_000, 16)


def test_the_warehouse_mode_is_set_for_all_tables_and_per_table_pattern() -> None:
    cfg = load_config(
        EXAMPLE,
        env={
            "LOADER__TABLES__MODE": "soft_delete",
            "LOADER__TABLES__MODES": '{ "demo.customers" = "history", "demo.*" = "mirror" }',
        },
    )
    assert cfg.tables.mode_of("demo", "customers") == "history"  # the first match wins
    assert cfg.tables.mode_of("demo", "orders") == "mirror"
    assert cfg.tables.mode_of("crm", "orders") == "soft_delete"
    assert load_config(EXAMPLE).tables.mode_of("demo", "orders") == "mirror"
    for env, message in [
        (
            {"LOADER__TABLES__MODE": "scd2"},
            "tables.mode = 'scd2' is not accepted; accepted values: mirror, soft_delete, history",
        ),
        (
            {"LOADER__TABLES__MODES": '{ "demo.t" = "audit" }'},
            "tables.modes['demo.t'] = 'audit' is not accepted",
        ),
        ({"LOADER__TABLES__MODES": '{ "t" = "history" }'}, "table pattern 't' must look like schema.table"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(EXAMPLE, env=env)


def test_unknown_section_and_bad_toml_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[sauce]\nhost = 'x'\n")
    with pytest.raises(ConfigError, match=r"unknown section \[sauce\]; accepted sections: source, tables"):
        load_config(bad, env={})
    # [sources] makes a deployment of several sources: a typo of [source] is told so.
    bad.write_text("[sources]\nhost = 'x'\n")
    with pytest.raises(ConfigError, match=r"one source's own settings go in \[source\]"):
        load_config(bad, env={})
    bad.write_text("[source\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad, env={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml", env={})


def test_the_warehouse_may_live_on_hdfs_or_s3_with_its_catalog_on_local_disk() -> None:
    local = load_config(EXAMPLE, env={"LOADER__WAREHOUSE__DIR": "file://wh"})
    assert local.warehouse.dir == str(ROOT / "wh")
    assert local.warehouse.metastore_dir == str(ROOT / "wh" / "metastore")
    assert local.warehouse.spark_dir() == (ROOT / "wh").as_uri()
    for uri, spark_dir in (
        ("hdfs://nn:8020/wh/", "hdfs://nn:8020/wh"),
        ("s3://bucket/wh", "s3a://bucket/wh"),
    ):
        cfg = load_config(
            EXAMPLE, env={"LOADER__WAREHOUSE__DIR": uri, "LOADER__WAREHOUSE__METASTORE_DIR": "ms"}
        )
        assert cfg.warehouse.spark_dir() == spark_dir
        assert cfg.warehouse.metastore_dir == str(ROOT / "ms")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"LOADER__WAREHOUSE__DIR": "s3://b/wh"},
            "the embedded Derby catalog needs a local warehouse.metastore_dir",
        ),
        ({"LOADER__WAREHOUSE__DIR": "gs://b/wh"}, "warehouse.dir scheme = 'gs' is not accepted"),
    ],
)
def test_a_warehouse_that_cannot_work_is_refused(override: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(EXAMPLE, env=override)


def test_without_the_fetched_jars_only_jobs_that_need_them_are_refused(tmp_path: Path) -> None:
    # As a loader installed from its wheel, away from the checkout make setup fetched into.
    from loader.warehouse import session

    env = {"LOADER__SPARK__JARS": str(tmp_path / "none")}
    with pytest.raises(ConfigError, match=r"the jar .*none does not exist: .*make setup"):
        session.spark_jars(load_config(EXAMPLE, env=env))

    empty = tmp_path / "jars"
    empty.mkdir()
    with pytest.raises(ConfigError, match="Iceberg tables needs the pinned ones"):
        session.spark_jars(load_config(EXAMPLE, env={"LOADER__SPARK__JARS": str(empty)}))
    # Hive-format tables on local storage need no jar.
    env = {"LOADER__SPARK__JARS": str(empty), "LOADER__WAREHOUSE__FORMAT": "hive"}
    assert session.spark_jars(load_config(EXAMPLE, env=env)) == []
    with pytest.raises(ConfigError, match="reading the source over JDBC needs the pinned ones"):
        session.spark_jars(load_config(EXAMPLE, env=env), jdbc=True)
    s3 = {**env, "LOADER__STAGING__URI": "s3://bucket/staging"}
    with pytest.raises(ConfigError, match=r"S3 storage \(s3a\) needs the pinned ones"):
        session.spark_jars(load_config(EXAMPLE, env=s3))

    (empty / "driver.jar").write_bytes(b"")
    assert session.spark_jars(load_config(EXAMPLE, env=env), jdbc=True) == [str(empty / "driver.jar")]


def test_a_jar_folder_fetched_before_the_iceberg_pins_is_refused_naming_the_jar(tmp_path: Path) -> None:
    from loader.warehouse import session

    old = tmp_path / "jars"
    old.mkdir()
    (old / "hadoop-aws-3.4.1.jar").write_bytes(b"")
    env = {"LOADER__SPARK__JARS": str(old), "LOADER__WAREHOUSE__FORMAT": "iceberg"}
    with pytest.raises(ConfigError, match=r"Iceberg tables needs the iceberg-spark-runtime jar.*make setup"):
        session.spark_jars(load_config(EXAMPLE, env=env))
    (old / "iceberg-spark-runtime-4.1_2.13-1.10.0.jar").write_bytes(b"")
    with pytest.raises(
        ConfigError, match=r"embedded Iceberg catalog \(a SQLite file\) needs the sqlite-jdbc jar"
    ):
        session.spark_jars(load_config(EXAMPLE, env=env))
    (old / "sqlite-jdbc-3.50.3.0.jar").write_bytes(b"")
    assert len(session.spark_jars(load_config(EXAMPLE, env=env))) == 3
    # Hive-format tables need neither.
    hive = load_config(EXAMPLE, env={"LOADER__SPARK__JARS": str(old), "LOADER__WAREHOUSE__FORMAT": "hive"})
    assert len(session.spark_jars(hive)) == 3


def test_maintenance_settings_are_checked_and_give_the_dag_its_schedule(tmp_path: Path) -> None:
    cfg = load_config(EXAMPLE)
    assert (cfg.maintenance.schedule, cfg.maintenance.expire_after_hours, cfg.maintenance.retain_last) == (
        "@daily",
        168,
        10,
    )
    with pytest.raises(ConfigError, match=r"maintenance.min_input_files and retain_last must be >= 1"):
        load_config(EXAMPLE, env={"LOADER__MAINTENANCE__RETAIN_LAST": "0"})
    with pytest.raises(ConfigError, match="unknown field"):
        load_config(EXAMPLE, env={"LOADER__MAINTENANCE__EVERY": "1"})


def test_the_maintenance_dag_takes_its_schedule_from_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loader.app.airflow import dag_sources

    def maintenance_schedule() -> str | None:
        (source,) = dag_sources()
        return source.maintenance_schedule

    config = tmp_path / "loader.toml"
    monkeypatch.setenv("LOADER_CONFIG", str(config))
    config.write_text('[maintenance]\nschedule = "0 3 * * 0"\n')
    assert maintenance_schedule() == "0 3 * * 0"
    config.write_text('[maintenance]\nschedule = "none"\n')
    assert maintenance_schedule() is None
    config.write_text("[maintenance]\nretain_last = 0\n")  # the task will say what is wrong
    assert maintenance_schedule() == "@daily"


def test_an_iceberg_format_version_other_than_2_or_3_is_refused() -> None:
    with pytest.raises(
        ConfigError, match="iceberg_format_version = 1 is not accepted; accepted values: 2, 3"
    ):
        load_config(EXAMPLE, env={"LOADER__WAREHOUSE__ICEBERG_FORMAT_VERSION": "1"})
    assert (
        load_config(
            EXAMPLE, env={"LOADER__WAREHOUSE__ICEBERG_FORMAT_VERSION": "2"}
        ).warehouse.iceberg_format_version
        == 2
    )


def test_an_iceberg_catalog_server_needs_a_uri_of_its_kind() -> None:
    with pytest.raises(
        ConfigError, match="iceberg_catalog = 'glue' is not accepted; accepted values: '', jdbc, rest"
    ):
        load_config(EXAMPLE, env={"LOADER__WAREHOUSE__ICEBERG_CATALOG": "glue"})
    with pytest.raises(
        ConfigError, match="iceberg_catalog_uri must start with jdbc: when iceberg_catalog = 'jdbc', got ''"
    ):
        load_config(EXAMPLE, env={"LOADER__WAREHOUSE__ICEBERG_CATALOG": "jdbc"})
    with pytest.raises(
        ConfigError, match="must start with http:// or https:// when iceberg_catalog = 'rest'"
    ):
        load_config(
            EXAMPLE,
            env={
                "LOADER__WAREHOUSE__ICEBERG_CATALOG": "rest",
                "LOADER__WAREHOUSE__ICEBERG_CATALOG_URI": "polaris:8181",
            },
        )


def _deployment(tmp_path: Path, sources: dict[str, str], shared: str = "") -> Path:
    """``tmp_path/loader.toml``, a deployment whose ``sources`` folder holds these files."""
    folder = tmp_path / "sources"
    folder.mkdir()
    for name, text in sources.items():
        (folder / name).write_text(text)
    path = tmp_path / "loader.toml"
    path.write_text(
        '[sources]\ndir = "sources"\n[source]\nuser = "cdc"\nport = 3310\n[staging]\nuri = "staging"\n'
        '[warehouse]\ndatabase = "wh"\nformat = "hive"\n' + shared
    )
    return path


SHOP = '[source]\nhost = "db1"\n[tables]\ninclude = ["shop.*"]\n'
CRM = '[source]\nname = "crm_main"\nhost = "db2"\nport = 3307\n[warehouse]\ndatabase = "crm_wh"\n'


def test_a_deployment_gives_each_source_its_own_file_over_the_shared_settings(tmp_path: Path) -> None:
    from loader.core.config import load_deployment

    path = _deployment(tmp_path, {"shop_01.toml": SHOP, "crm.toml": CRM, "notes.txt": "not a source"})
    shop = load_config(path, env={}, source="shop_01")  # named after its file
    assert (shop.source.name, shop.source.host, shop.source.port, shop.source.user) == (
        "shop_01",
        "db1",
        3310,
        "cdc",
    )
    assert shop.tables.include == ("shop.*",)
    assert shop.staging.uri == "file://" + str(tmp_path / "staging")  # against the deployment's folder
    assert (shop.warehouse.database, shop.warehouse.format) == ("wh", "hive")
    assert (shop.path, shop.source_file) == (str(path), str(tmp_path / "sources" / "shop_01.toml"))
    crm = load_config(path, env={"LOADER_SOURCE": "crm_main", "LOADER__SOURCE__PORT": "3400"})
    assert (crm.source.name, crm.source.port, crm.warehouse.database) == ("crm_main", 3400, "crm_wh")
    assert crm.tables.include == ("*.*",)
    deployment = load_deployment(path, env={})
    assert sorted(deployment.sources) == ["crm_main", "shop_01"] and deployment.broken == {}

    with pytest.raises(ConfigError) as unnamed:
        load_config(path, env={})
    assert str(unnamed.value) == (
        f"{path} is a deployment of sources crm_main, shop_01: choose one with --source NAME (or LOADER_SOURCE)"
    )
    with pytest.raises(
        ConfigError, match="no source 'shop_02' in its sources folder; its sources: crm_main, shop_01"
    ):
        load_config(path, env={}, source="shop_02")


def test_a_broken_source_file_stops_only_that_source_naming_its_file_and_field(tmp_path: Path) -> None:
    from loader.core.config import load_deployment

    files = {
        "shop_01.toml": SHOP,
        "crm.toml": CRM,
        "bad_port.toml": '[source]\nport = "x"\n',
        "again.toml": '[source]\nname = "shop_01"\n',  # shop_01.toml's name
        "own_staging.toml": '[staging]\nuri = "elsewhere"\n',
        "own_format.toml": '[warehouse]\nformat = "iceberg"\n',
        "not_toml.toml": "[source\n",
    }
    path = _deployment(tmp_path, files)
    folder = tmp_path / "sources"
    deployment = load_deployment(path, env={})
    assert list(deployment.sources) == ["crm_main"]
    taken = (
        f"source name 'shop_01' is taken by {folder / 'again.toml'} and {folder / 'shop_01.toml'}: each "
        "source needs its own name (source.name, or the file name)"
    )
    assert deployment.broken == {
        str(folder / "again.toml"): taken,
        str(folder / "bad_port.toml"): f"{folder / 'bad_port.toml'}: source.port must be an integer, got 'x'",
        str(
            folder / "not_toml.toml"
        ): f"config file {folder / 'not_toml.toml'} is not valid TOML: Expected ']' "
        "at the end of a table declaration (at line 1, column 8)",
        str(folder / "own_format.toml"): f"{folder / 'own_format.toml'}: warehouse.format is shared by every "
        f"source: set it in {path}; a source file may set warehouse.database",
        str(
            folder / "own_staging.toml"
        ): f"{folder / 'own_staging.toml'}: section [staging] is shared by every "
        f"source: set it in {path}; a source file holds [source], [tables], [load], [warehouse]",
        str(folder / "shop_01.toml"): taken,
    }
    with pytest.raises(ConfigError) as chosen:
        load_config(path, env={}, source="bad_port")
    assert str(chosen.value) == deployment.broken[str(folder / "bad_port.toml")]


def test_a_deployments_own_errors_name_its_file(tmp_path: Path) -> None:
    from loader.core.config import load_deployment

    path = _deployment(tmp_path, {"shop_01.toml": SHOP}, shared="[spark]\nmaster = 2\n")
    with pytest.raises(ConfigError, match=f"^{path}: spark.master must be a string, got 2$"):
        load_deployment(path, env={})
    with pytest.raises(ConfigError, match=f"^{path}: spark.master must be a string"):
        load_config(path, env={}, source="shop_01")
    path.write_text('[sources]\ndir = "elsewhere"\n')
    with pytest.raises(ConfigError, match=f"^{path}: sources.dir {tmp_path / 'elsewhere'} is not a folder$"):
        load_deployment(path, env={})
    path.write_text('[sources]\nfolder = "sources"\n')
    with pytest.raises(ConfigError, match=r'and takes one field, dir = "<folder of source files>"'):
        load_deployment(path, env={})
    path.write_text('[sources]\ndir = "sources"\n')
    with pytest.raises(ConfigError, match="LOADER__SOURCE__NAME cannot rename the sources of the deployment"):
        load_config(path, env={"LOADER__SOURCE__NAME": "x"}, source="shop_01")


def test_a_single_source_file_is_its_own_deployment(tmp_path: Path) -> None:
    from loader.core.config import load_deployment

    assert load_config(EXAMPLE, env={}, source="demo").source.name == "demo"
    with pytest.raises(ConfigError, match=f"^{EXAMPLE}: its one source is 'demo', not 'shop'"):
        load_config(EXAMPLE, env={"LOADER_SOURCE": "shop"})
    deployment = load_deployment(EXAMPLE, env={})
    assert list(deployment.sources) == ["demo"] and deployment.sources["demo"].source_file == ""


def test_routes_name_each_routed_table_after_its_shared_table_and_refuse_two_of_one_source() -> None:
    from loader.core.naming import warehouse_tables

    cfg = load_config(
        EXAMPLE, env={"LOADER__TABLES__ROUTES": '{ "shop_*.orders" = "shop.orders", "x.*" = "x.all" }'}
    )
    assert cfg.tables.route("shop_07", "orders") == ("shop", "orders")
    assert cfg.tables.route("shop_07", "lines") is None
    assert cfg.tables.warehouse_name("shop_07", "orders") == "shop__orders"
    assert cfg.tables.warehouse_name("shop_07", "lines") == "shop_07__lines"
    assert warehouse_tables([("shop_07", "orders"), ("shop_07", "lines")], cfg.tables.route) == {
        ("shop_07", "orders"): "shop__orders",
        ("shop_07", "lines"): "shop_07__lines",
    }
    # Two tables of one source cannot share a table: their rows would have the same _source.
    with pytest.raises(
        ConfigError, match=r"source tables `shop_01`.`orders` and `shop_02`.`orders` would both be"
    ):
        warehouse_tables([("shop_01", "orders"), ("shop_02", "orders")], cfg.tables.route)
    with pytest.raises(ConfigError, match="would both be the warehouse table shop__orders"):
        warehouse_tables([("shop_01", "orders"), ("shop", "orders")], cfg.tables.route)
    # One Airflow asset per shared table, whichever source changed it.
    from loader.app.airflow import asset_for

    database = cfg.warehouse.database
    assert asset_for(cfg, "shop_07", "orders").uri == f"loader://shared/{database}/shop__orders"
    assert asset_for(cfg, "shop_07", "lines").uri == f"loader://demo/{database}/shop_07__lines"
