"""The jars a session's packages resolved to are reused only while every one is on disk, only for the same
packages and Spark, and never for a session that resolves with settings of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver.spark.package_jars import remembered_jars, reusable

DELTA = "io.delta:delta-spark_4.2_2.13:4.4.0"


class _Session:
    """What ``remember_jars`` reads of a started session: its ``spark.jars``."""

    def __init__(self, jars: str) -> None:
        self.sparkContext = self
        self._jars = jars

    def getConf(self) -> _Session:  # noqa: N802  (Spark's name)
        return self

    def get(self, key: str, default: str) -> str:
        return self._jars if key == "spark.jars" else default


@pytest.fixture
def jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    files = [tmp_path / "ivy" / f"{name}.jar" for name in ("delta-spark", "delta-storage")]
    for file in files:
        file.parent.mkdir(exist_ok=True)
        file.write_bytes(b"PK")
    return files


def _remember(packages: str, version: str, jars: str) -> None:
    from resolver.spark.package_jars import remember_jars

    remember_jars(packages, version, _Session(jars))  # type: ignore[arg-type]


def test_the_jars_are_reused_for_the_same_packages_and_spark_while_they_exist(jars: list[Path]) -> None:
    assert remembered_jars(DELTA, "4.2.0") is None
    uris = ",".join(f"file://{j}" for j in jars)
    _remember(DELTA, "4.2.0", uris)
    assert remembered_jars(DELTA, "4.2.0") == uris
    assert remembered_jars(DELTA, "4.0.1") is None
    assert remembered_jars(f"{DELTA},org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0", "4.2.0") is None
    jars[1].unlink()
    assert remembered_jars(DELTA, "4.2.0") is None


def test_jars_that_are_not_local_files_are_not_remembered(jars: list[Path]) -> None:
    _remember(DELTA, "4.2.0", f"file://{jars[0]},hdfs://nn/jars/delta-storage.jar")
    assert remembered_jars(DELTA, "4.2.0") is None
    _remember(DELTA, "4.2.0", "")
    assert remembered_jars(DELTA, "4.2.0") is None


def test_a_session_resolving_with_settings_of_its_own_always_asks_ivy() -> None:
    assert reusable({"spark.sql.shuffle.partitions": "4"})
    for key in ("spark.jars", "spark.jars.repositories", "spark.jars.ivy", "spark.jars.ivySettings"):
        assert not reusable({key: "x"}), key
    assert reusable({"spark.jars": ""})
