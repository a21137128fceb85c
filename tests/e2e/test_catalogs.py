"""Tables by name (issue 70): a pipeline naming a catalog registers every table of its lake there — each
source table's snapshot and history, bronze, the quarantine — as external Delta tables, on two real
metastores: Spark's own with an embedded Derby database, and a standalone Hive Metastore server (Hive's
Thrift server, ``tests.harness.metastore``) that Spark reaches through ``hive.metastore.uris``. The workload
(PostgreSQL 15 + wal2json) renames a column and widens two in its second batch; by name, every table equals
its path, the catalog shows the new columns, ``resolver as-of`` by catalog name prints what it prints by
lake and source name, and a second lake naming the same schema is refused in one line before it writes
(on the server; the check is the same Spark catalog calls on either).

The ``resolver`` commands run in one child process per metastore (the run, the checks, the second lake's
run): a metastore is a static setting of a Spark session, and the tests' shared session keeps Spark's
in-memory catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_open_lake import EVOLUTION_BEFORE, EVOLUTION_FIRST, EVOLUTION_HINT, EVOLUTION_SECOND
from tests.harness.metastore import HiveMetastore
from tests.harness.postgres import PgDatabase, write_lines
from tests.harness.processes import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

CATALOG = "spark_catalog.cdc"

#: one child with the metastore's settings (a metastore is a static setting of a session): ``resolver run``
#: of the pipeline, as its command runs it; then every name of the schema against the lake's paths, the
#: renamed and widened table's columns by name, as-of by catalog name and by lake; then, if given, the run
#: of a second lake's pipeline naming the same schema (its return code and its error lines)
VERIFY = """
import contextlib, io, json, sys
from resolver import local_session
from resolver.cli.main import main
pipeline, other, lake, lsn = sys.argv[1:5]
settings = dict(a.split("=", 1) for a in sys.argv[5:])
conf = [a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]
out = {"run": main(["run", pipeline, *conf]), "tables": {}}
spark = local_session(**{k.replace(".", "__"): v for k, v in settings.items()})
for row in spark.sql("SHOW TABLES IN spark_catalog.cdc").collect():
    name = row["tableName"]
    detail = spark.sql(f"DESCRIBE DETAIL spark_catalog.cdc.{name}").first()
    by_name = spark.table(f"spark_catalog.cdc.{name}")
    by_path = spark.read.format("delta").load(detail["location"])
    same = by_name.exceptAll(by_path).isEmpty() and by_path.exceptAll(by_name).isEmpty()
    out["tables"][name] = {"location": detail["location"], "same": same, "rows": by_name.count()}
out["columns"] = {r["col_name"]: r["data_type"] for r in spark.sql(
    "DESCRIBE TABLE spark_catalog.cdc.public__evo").collect() if not r["col_name"].startswith("#")}
printed = []
for args in (["--table", "spark_catalog.cdc.public__evo"], ["--lake", lake, "--table", "public.evo"]):
    with contextlib.redirect_stdout(io.StringIO()) as text:
        assert main(["as-of", *args, "--lsn", lsn, *conf]) == 0
    printed.append(text.getvalue().splitlines()[:-1])  # the rows (the count line names the table)
out["as_of"] = printed
if other:
    with contextlib.redirect_stderr(io.StringIO()) as err:
        out["other"] = main(["run", other, *conf])
    out["other_errors"] = [x for x in err.getvalue().splitlines() if x.startswith("resolver: error:")]
print("VERIFY " + json.dumps(out))
"""


def _embedded(root: Path) -> list[str]:
    """Spark's own metastore in the process, an embedded Derby database in ``root``."""
    derby = f"jdbc:derby:;databaseName={root / 'embedded' / 'metastore_db'};create=true"
    settings = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": derby,
        "spark.sql.warehouse.dir": str(root / "warehouse"),
    }
    return [a for k, v in settings.items() for a in ("--conf", f"{k}={v}")]


def _child(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def _pipeline(folder: Path, lake: str) -> Path:
    path = folder / f"{lake}.yaml"
    path.write_text(
        "source: {path: landing, format: wal2json-v2}\n"
        f"lake: {lake}\nschemas: schemas\ncatalog: {CATALOG}\nmax_files_per_batch: 1\n",
        "utf-8",
    )
    return path


@pytest.mark.parametrize("metastore", ["embedded", "server"])
def test_every_table_of_the_lake_is_registered_by_name(
    pg_db: PgDatabase, tmp_path: Path, request: pytest.FixtureRequest, metastore: str
) -> None:
    if metastore == "server":
        server: HiveMetastore = request.getfixturevalue("hive_metastore")
        conf = server.conf()
    else:
        conf = _embedded(tmp_path)
    pg_db.execute(EVOLUTION_BEFORE)
    pg_db.create_slot("cat")
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "public.evo.yaml").write_text(EVOLUTION_HINT, "utf-8")
    (tmp_path / "landing").mkdir()
    for i, statements in enumerate((EVOLUTION_FIRST, EVOLUTION_SECOND)):
        pg_db.execute(statements)
        bad = (
            ['{"action": "I", "schema": "public", "table": "evo", "columns": '] if i == 0 else []
        )  # quarantined
        write_lines(tmp_path / "landing" / f"000{i + 1}.json", pg_db.capture("cat", 2, consume=True) + bad)
    lsn = pg_db.query("SELECT pg_current_wal_lsn()::text")[0][0]
    # one run, two batches: the second renames and widens (the tables are rewritten); on the server, a
    # second lake naming the same schema after it, refused before it writes (the check is the same Spark
    # catalog calls on either metastore)
    pipeline = str(_pipeline(tmp_path, "lake"))
    other = str(_pipeline(tmp_path, "other")) if metastore == "server" else ""
    checked = _child(tmp_path, "-c", VERIFY, pipeline, other, str(tmp_path / "lake"), lsn, *conf[1::2])
    assert checked.returncode == 0, checked.stderr[-3000:]
    got = json.loads(next(line for line in checked.stdout.splitlines() if line.startswith("VERIFY "))[7:])
    assert got["run"] == 0, checked.stderr[-3000:]
    lake = tmp_path / "lake"
    expected = {
        "public__evo": lake / "silver" / "public.evo",
        "public__evo__history": lake / "silver" / "public.evo__history",
        "resolver_bronze": lake / "bronze" / "change_events",
        "resolver_quarantine": lake / "quarantine",
    }
    assert {n: Path(t["location"].removeprefix("file:")) for n, t in got["tables"].items()} == expected
    assert all(t["same"] for t in got["tables"].values()), got["tables"]
    assert got["tables"]["public__evo"]["rows"] == 2 and got["tables"]["public__evo__history"]["rows"] > 2
    columns = got["columns"]
    assert columns["email"] == "string" and "mail" not in columns, columns
    assert columns["n"] == "bigint" and columns["amount"] == "decimal(14,4)", columns
    by_name, by_lake = got["as_of"]
    assert by_name == by_lake and len(by_name) == 3, got["as_of"]  # a header and two rows
    if metastore == "embedded":
        return
    assert got["other"] == 2, checked.stderr[-3000:]
    errors = got["other_errors"]
    assert len(errors) == 1 and "another lake is registered in that schema" in errors[0], errors
    assert not (tmp_path / "other" / "silver").exists() and not (tmp_path / "other" / "bronze").exists()
