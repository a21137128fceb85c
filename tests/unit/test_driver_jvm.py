"""How a ``resolver`` command's driver JVM starts (``resolver.spark.driver_jvm``): short work by the input's
size, the class archive made once and mapped after, the user's own JVM options left alone, and a short
command into a small lake interpreted (``resolver.cli.spark_options``). No JVM: the options are strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver.spark import driver_jvm
from resolver.spark.driver_jvm import SHORT_INPUT_BYTES, DriverJvm, input_bytes, java_options, small_lake


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own, and no options of the tests' harness in the environment."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv("RESOLVER_CLASS_ARCHIVE", raising=False)
    driver_jvm._making.clear()  # noqa: SLF001
    return tmp_path / "cache"


def test_a_small_input_is_short_work_and_a_large_or_remote_one_is_not(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    (small / "0001.json").write_bytes(b"x" * 1000)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(SHORT_INPUT_BYTES + 1)
    assert input_bytes([str(small)]) == 1000
    assert DriverJvm.for_input([str(small)]).short
    assert not DriverJvm.for_input([str(small), str(big)]).short
    assert not DriverJvm.for_input(["s3a://bucket/landing/"]).short
    assert not DriverJvm.for_input([str(tmp_path / "missing")]).short


def test_short_work_runs_c1_only_with_the_serial_collector() -> None:
    options = java_options(DriverJvm(short=True, share=False), {}, "")
    assert options == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    assert java_options(DriverJvm(short=False, share=False), {}, "") == []


def test_the_first_command_makes_the_archive_and_later_drivers_map_it(_cache: Path) -> None:
    making = java_options(DriverJvm(short=True, dump=True), {}, "")
    dump = next(o for o in making if o.startswith("-XX:ArchiveClassesAtExit="))
    staged = Path(dump.split("=", 1)[1])
    assert staged.parent.parent == _cache / "resolver" / "jvm" and "-Xlog:cds=off" in making
    # a library session (no dump) maps an archive that exists, and makes none
    assert not any("Archive" in o for o in java_options(DriverJvm(short=True), {}, ""))
    staged.write_bytes(b"archive")  # what the JVM writes as it exits; finish_driver moves it in place
    staged.replace(staged.with_name("classes.jsa"))
    mapped = java_options(DriverJvm(short=True, dump=True), {}, "")
    assert f"-XX:SharedArchiveFile={staged.with_name('classes.jsa')}" in mapped
    # another package set, or other options, is another class path: another archive
    other = java_options(DriverJvm(short=False, dump=True), {}, "org.apache.hadoop:hadoop-aws:3.4.1")
    assert not any(o.startswith("-XX:SharedArchiveFile=") for o in other)


def test_the_users_own_jvm_options_get_nothing_added(monkeypatch: pytest.MonkeyPatch) -> None:
    given = {"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}
    assert java_options(DriverJvm(short=True, dump=True), given, "") == []
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:SharedArchiveFile=/elsewhere.jsa")
    assert java_options(DriverJvm(short=True, dump=True), {}, "") == []
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    monkeypatch.setenv("RESOLVER_CLASS_ARCHIVE", "off")
    assert java_options(DriverJvm(short=True, dump=True), {}, "") == [
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
    ]


def test_a_new_or_small_lake_is_small_and_a_large_one_is_not(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert small_lake(str(lake))  # new
    table = lake / "silver" / "public.t"
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"x" * 1000)
    assert small_lake(str(lake))
    with open(table / "part-1.parquet", "wb") as fh:
        fh.truncate(driver_jvm.SMALL_LAKE_BYTES)
    assert not small_lake(str(lake))
    assert not small_lake("s3a://bucket/lake")


def test_the_archive_of_an_environment_that_is_gone_is_removed(_cache: Path, tmp_path: Path) -> None:
    """A CI run's throw-away environment leaves its archive behind; the next archive made removes it (and
    keeps one whose environment is still there)."""
    root = _cache / "resolver" / "jvm"
    gone, kept = root / "gone", root / "kept"
    for folder, prefix in ((gone, tmp_path / "no-such-venv"), (kept, tmp_path)):
        folder.mkdir(parents=True)
        (folder / "classes.jsa").write_bytes(b"archive")
        (folder / "prefix.txt").write_text(str(prefix))
    java_options(DriverJvm(short=True, dump=True), {}, "")  # no archive of its own yet: it makes one
    assert not gone.exists() and kept.exists()


def test_options_alone_record_nothing_and_a_jvm_the_command_did_not_launch_is_left_running(
    _cache: Path,
) -> None:
    """Asking for a command's options launches nothing: a later command in the same process (a caller's
    session, the tests' shared one) must not have its JVM stopped by ``finish_driver`` (it was, in CI)."""
    start = driver_jvm.driver_start(DriverJvm(short=True, dump=True), {}, "")
    assert start.makes is not None and not driver_jvm._making  # noqa: SLF001
    driver_jvm.finish_driver()  # nothing launched: nothing to stop
    start.makes.staged.write_bytes(b"archive")
    driver_jvm.launched(start, object())  # a JVM that is not this process's gateway
    driver_jvm.finish_driver()
    assert not driver_jvm._making and not start.makes.staged.exists() and not start.makes.path.exists()  # noqa: SLF001
