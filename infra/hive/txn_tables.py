"""Create the Hive metastore's lock and transaction tables in its Derby database, as Hive's
schematool would (it is not among Spark's jars): Iceberg's Hive catalog locks a table per commit.

    python infra/hive/txn_tables.py CONF_DIR     (before the service starts: Derby is embedded)

Hive's own ``TxnDbUtil.prepDb`` does it, called through py4j (pyspark's) so that a JRE is enough.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyspark
from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway


def main(conf_dir: str) -> None:
    jars = Path(pyspark.__file__).parent / "jars"
    port = launch_gateway(
        jarpath=str(next(jars.glob("py4j-*.jar"))), classpath=f"{conf_dir}:{jars}/*", die_on_exit=True
    )
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port))
    try:
        jvm = gateway.jvm
        jvm.org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(jvm.org.apache.hadoop.hive.conf.HiveConf())
    finally:
        gateway.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
