"""``python -m resolver …`` in a child process, for tests that kill, stop or race real runs: its progress
lines (stderr) read as they come, so a test can wait for one, then signal the process or start another."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Resolver:
    """``python -m resolver ARGS`` in a child process, its stderr read line by line by a thread."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "resolver", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._out: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=lambda: self._out.extend(self.proc.stdout or ()), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip())
        self.lines.put(None)

    def until(self, wanted: str, timeout: float = 600) -> str:
        """The first progress line (``resolver: …``) from now on that contains ``wanted``."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"the process ended before {wanted!r}:\n" + "\n".join(self.seen))
            self.seen.append(line)
            if line.startswith("resolver: ") and wanted in line:
                return line

    def applied_until(self, files: int) -> None:
        """Wait for (micro-)batches that applied ``files`` files in all."""
        done = 0
        while done < files:
            line = self.until("file(s) applied")
            done += int(line.split(": ")[-1].split()[0])

    def stop(self, sig: int, timeout: float = 300) -> tuple[int, str]:
        """Send ``sig`` and wait for the process to end: its exit status and what it printed on stdout."""
        self.proc.send_signal(sig)
        return self.finish(timeout)

    def finish(self, timeout: float = 300) -> tuple[int, str]:
        """Wait for the process to end (killed after ``timeout`` seconds): its exit status and what it printed
        on stdout; every stderr line is in ``seen`` then."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=30)
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        return self.proc.returncode, "".join(self._out)
