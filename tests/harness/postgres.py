"""Throw-away PostgreSQL server with wal2json, for tests and for regenerating the samples.

``with PgServer() as pg:`` runs initdb in a temporary directory (as the OS user ``postgres`` when the
current user is root), starts the server on a free loopback port with ``wal_level=logical`` and removes
everything on exit, also on failure.  ``pg.execute/query/capture/...`` work on the database ``postgres``;
``pg.create_database(name)`` returns a :class:`PgDatabase` with the same methods for another database
(slots are per database).  Every connection is autocommit and first runs ``SET`` for each of
``SESSION_SETTINGS`` (ISO dates, UTC, hex bytea; wal2json spec section 5.4), so values are deterministic.
Needs psycopg 3 (``pip install "psycopg[binary]>=3.1"``), imported lazily.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.harness.service import Service

if TYPE_CHECKING:
    import psycopg

DEFAULT_BINDIR = Path("/usr/lib/postgresql/15/bin")
SESSION_SETTINGS: dict[str, str] = {
    "DateStyle": "ISO",
    "TimeZone": "UTC",
    "extra_float_digits": "1",
    "bytea_output": "hex",
    "IntervalStyle": "postgres",
}
#: Sent with every capture unless ``defaults=False``; format 2 also gets ``V2_DEFAULT_OPTIONS``.
DEFAULT_CAPTURE_OPTIONS: dict[str, str] = {
    "include-xids": "1",
    "include-timestamp": "1",
    "include-lsn": "1",
    "include-pk": "1",
    "include-types": "1",
}
V2_DEFAULT_OPTIONS: dict[str, str] = {"include-transaction": "1"}
#: ``autovacuum`` is off: an autoanalyze is a transaction of its own (catalog rows only) that wal2json
#: emits as an empty frame (B/C, or ``"change":[]``) at a moment the test does not choose; a workload's
#: stream must hold the workload's transactions only (CI once met one after the last commit).
SERVER_SETTINGS: dict[str, str] = {
    "wal_level": "logical",
    "autovacuum": "off",
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    "fsync": "off",
    "listen_addresses": "127.0.0.1",
}
_DOLLAR = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")


class PgHarnessError(RuntimeError):
    """The test server could not be set up, started or stopped."""


def _pg_config(bindir: Path | None, flag: str) -> Path | None:
    """``pg_config flag`` (the pg_config in bindir if there is one, else the one on PATH)."""
    exe = bindir / "pg_config" if bindir and (bindir / "pg_config").exists() else shutil.which("pg_config")
    if exe is None:
        return None
    done = subprocess.run([str(exe), flag], capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def find_bindir() -> Path:
    """``pg_config --bindir`` when it holds the server binaries, else /usr/lib/postgresql/15/bin."""
    found = _pg_config(None, "--bindir")
    return found if found is not None and (found / "initdb").exists() else DEFAULT_BINDIR


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def split_sql(script: str) -> list[str]:
    """Split a script like psql does: on ``;`` outside quotes, dollar quotes and comments."""
    out: list[str] = []
    start = i = 0
    code = False  # has the current statement anything besides blanks and comments?
    n = len(script)
    while i < n:
        c = script[i]
        if script.startswith("--", i):
            j = script.find("\n", i)
            i = n if j < 0 else j + 1
        elif script.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                step = script.startswith(("/*", "*/"), i)
                depth += script.startswith("/*", i) - script.startswith("*/", i)
                i += 2 if step else 1
        elif c in "'\"":
            escapes = c == "'" and script[i - 1 : i] in ("e", "E") and not script[i - 2 : i - 1].isalnum()
            i += 1
            while i < n and script[i] != c:
                i += 2 if escapes and script[i] == "\\" else 1
            i, code = i + 1, True  # a doubled quote closes and reopens: same result
        elif c == "$" and (m := _DOLLAR.match(script, i)):
            j = script.find(m.group(0), m.end())
            i, code = (n if j < 0 else j + len(m.group(0))), True
        elif c == ";":
            if code:
                out.append(script[start:i].strip())
            i, start, code = i + 1, i + 1, False
        else:
            i, code = i + 1, code or not c.isspace()
    if code:
        out.append(script[start:].strip())
    return out


def write_lines(path: str | os.PathLike[str], rows: Iterable[str | bytes]) -> None:
    """Write each row followed by ``\\n`` (UTF-8, no newline translation), as pg_recvlogical does."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as fh:
        for row in rows:
            fh.write((row.encode("utf-8") if isinstance(row, str) else row) + b"\n")


def _connect(dsn: str) -> psycopg.Connection[Any]:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PgHarnessError('psycopg 3 is required: pip install "psycopg[binary]>=3.1"') from exc
    conn = psycopg.connect(dsn, autocommit=True)
    for name, value in SESSION_SETTINGS.items():
        conn.execute(f"SET {name} = '{value}'".encode())
    return conn


def capture_options(fmt: int, defaults: bool = True, **options: object) -> list[str]:
    """The flat name/value list for the plugin: include_xids=0 -> "include-xids", "0"; None drops one."""
    merged: dict[str, str | None] = {"format-version": str(fmt)}
    if defaults:
        merged.update(DEFAULT_CAPTURE_OPTIONS)
        merged.update(V2_DEFAULT_OPTIONS if fmt == 2 else {})
    for key, value in options.items():
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        merged[key.replace("_", "-")] = None if value is None else text
    return [item for key, value in merged.items() if value is not None for item in (key, value)]


class PgDatabase:
    """One database of a running server."""

    def __init__(self, dsn: str, name: str) -> None:
        self._dsn = dsn
        self.name = name

    @property
    def dsn(self) -> str:
        return self._dsn

    def execute(self, sql: str) -> None:
        """Run a script statement by statement, like psql: autocommit unless the script says BEGIN."""
        with _connect(self.dsn) as conn:
            for statement in split_sql(sql):
                conn.execute(statement.encode("utf-8"))  # bytes: no client-side placeholder parsing

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with _connect(self.dsn) as conn:
            return list(conn.execute(sql.encode("utf-8"), params).fetchall())

    def create_slot(self, slot: str, plugin: str = "wal2json") -> None:
        self.query("SELECT pg_create_logical_replication_slot(%s, %s)", (slot, plugin))

    def drop_slot(self, slot: str) -> None:
        self.query("SELECT pg_drop_replication_slot(%s)", (slot,))

    def capture(
        self, slot: str, fmt: int = 2, *, defaults: bool = True, consume: bool = False, **options: object
    ) -> list[str]:
        """``data`` rows of pg_logical_slot_peek_changes (get_changes if consume); see capture_options."""
        func = "pg_logical_slot_get_changes" if consume else "pg_logical_slot_peek_changes"
        rows = self.query(
            f"SELECT data FROM {func}(%s, NULL, NULL, VARIADIC %s::text[])",
            (slot, capture_options(fmt, defaults, **options)),
        )
        return [str(row[0]) for row in rows]


class PgServer(PgDatabase, Service):
    """A private PostgreSQL cluster; as a PgDatabase it stands for its database ``postgres``. ``settings``
    override ``SERVER_SETTINGS`` (``{"wal_level": "replica"}``: a server logical decoding refuses)."""

    def __init__(
        self, bindir: str | os.PathLike[str] | None = None, settings: dict[str, str] | None = None
    ) -> None:
        super().__init__("", "postgres")
        self.settings = {**SERVER_SETTINGS, **(settings or {})}
        self.bindir = Path(bindir) if bindir is not None else find_bindir()
        self.port = 0
        self.root: Path | None = None
        self.data = self.log = Path("/nonexistent")  # data directory and server log, set by start()
        self.start_seconds = self.stop_seconds = 0.0
        self._as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        if self.root is None:
            raise PgHarnessError("the PostgreSQL test server is not running")
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def database(self, dbname: str) -> PgDatabase:
        return PgDatabase(self.dsn_for(dbname), dbname)

    def create_database(self, dbname: str) -> PgDatabase:
        self.execute(f"CREATE DATABASE {_ident(dbname)}")
        return self.database(dbname)

    def drop_database(self, dbname: str) -> None:
        """Drop a database with its inactive replication slots (they would block DROP) and sessions."""
        self.query(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE database = %s AND NOT active",
            (dbname,),
        )
        self.execute(f"DROP DATABASE IF EXISTS {_ident(dbname)} WITH (FORCE)")

    def start(self) -> None:
        self._check_prerequisites()
        began = time.monotonic()
        self.root = Path(tempfile.mkdtemp(prefix="pgharness-", dir=self._tmp_parent()))
        self.data, self.log = self.root / "data", self.root / "server.log"
        try:
            (self.root / "sock").mkdir()
            if self._as_postgres:  # initdb refuses to run as root; the server needs to own the directory
                user = pwd.getpwnam("postgres")
                for path in (self.root, self.root / "sock"):
                    os.chown(path, user.pw_uid, user.pw_gid)
            self._run(
                "initdb",
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
            for attempt in range(3):  # the free port can be taken before the server binds it
                self.port = free_port()
                settings = {
                    **self.settings,
                    "port": str(self.port),
                    "unix_socket_directories": str(self.root / "sock"),
                }
                with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
                    conf.write("".join(f"{k} = '{v}'\n" for k, v in settings.items()))
                done = self._run(
                    "pg_ctl",
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.log),
                    "-w",
                    "-t",
                    "60",
                    "start",
                    check=False,
                )
                if done.returncode == 0:
                    break
                if attempt == 2 or "already in use" not in self._log_tail():
                    raise PgHarnessError(
                        f"pg_ctl start failed:\n{done.stdout}{done.stderr}\n"
                        f"server log ({self.log}):\n{self._log_tail()}"
                    )
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory; safe to call twice."""
        if self.root is None:
            return
        began = time.monotonic()
        try:
            if (self.data / "postmaster.pid").exists():
                done = self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)
                if done.returncode != 0:
                    self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        finally:
            self._remove_root()
            self.stop_seconds = time.monotonic() - began

    def _check_prerequisites(self) -> None:
        if not (self.bindir / "initdb").exists() or not (self.bindir / "pg_ctl").exists():
            raise PgHarnessError(
                f"PostgreSQL server binaries not found: expected {self.bindir}/initdb and "
                f"{self.bindir}/pg_ctl; install the Debian package "
                f"postgresql-{self.bindir.parent.name}"
            )
        libdir = _pg_config(self.bindir, "--pkglibdir") or self.bindir.parent / "lib"
        if not (libdir / "wal2json.so").exists():
            raise PgHarnessError(
                f"wal2json is not installed: expected {libdir / 'wal2json.so'}; install the "
                f"Debian package postgresql-{self.bindir.parent.name}-wal2json"
            )
        if self._as_postgres and (
            "postgres" not in {u.pw_name for u in pwd.getpwall()} or shutil.which("runuser") is None
        ):
            raise PgHarnessError(
                "running as root needs the OS user 'postgres' and runuser (util-linux): "
                "initdb and postgres refuse to run as root"
            )

    def _tmp_parent(self) -> str:
        """The temp parent; as root it must be traversable by 'postgres' (a private TMPDIR is not)."""
        parent = Path(tempfile.gettempdir()).resolve()
        if self._as_postgres and any(p.stat().st_mode & 0o001 == 0 for p in (parent, *parent.parents)):
            return "/tmp"
        return str(parent)

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / tool), *args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | {"LC_ALL": "C"}
        done = subprocess.run(
            cmd, cwd=self.root, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        if check and done.returncode != 0:
            raise PgHarnessError(
                f"{tool} failed with exit code {done.returncode}: {' '.join(cmd)}\n{done.stdout}{done.stderr}"
            )
        return done

    def _log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def _remove_root(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
