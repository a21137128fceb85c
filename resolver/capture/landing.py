"""Where ``resolver capture`` lands its files: a local folder, or a prefix of an S3 bucket (``s3://`` or
``s3a://bucket/prefix``, the URI a pipeline's ``source.path`` gives ``resolver run``). Either way a file
appears whole or not at all, under its final name only once its content is durable:

- **a folder**: written under a hidden name (``.<name>.tmp``) in the folder, flushed to disk, renamed, the
  folder's entry flushed;
- **a bucket**: written to a local temporary file, then stored with a single put (an S3 object is visible
  whole once its upload succeeded, and durable then); the temporary file is removed.

Names are relative (``shop-00000000016B3F80.json``, ``_capture/shop.json``). The bucket is reached with
boto3 (the ``[capture]`` extra), configured as boto3 is: the ``AWS_*`` environment variables (an
``AWS_ENDPOINT_URL`` for an S3-compatible server), ``~/.aws``, or the instance's role. No Spark.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Protocol

from resolver.errors import ConfigError
from resolver.paths import is_uri

__all__ = [
    "Landing",
    "LandingBucket",
    "LandingFolder",
    "OpenPart",
    "check_location",
    "landing_at",
    "sync_folder",
]

_SCHEMES = ("s3://", "s3a://")


class OpenPart(Protocol):
    """A landing file being written: lines go to ``out``; ``publish`` makes it visible under a name."""

    out: IO[str]

    def publish(self, name: str) -> str:
        """Close the file, make it durable and visible as ``name``; returns where it is."""
        ...


class Landing(Protocol):
    """The operations a capture needs of its landing place."""

    def location(self, name: str) -> str:
        """Where ``name`` is (a path or a URI), as summaries print it."""
        ...

    def read(self, name: str) -> str | None:
        """The text of ``name``; ``None`` when there is no such file."""
        ...

    def write(self, name: str, lines: Iterable[str]) -> str:
        """``lines`` into ``name``, whole or not at all, durable once this returns; returns its location."""
        ...

    def open_part(self, working: str) -> OpenPart:
        """A file to be written line by line, then published (``OpenPart.publish``); until then it is
        invisible (in a folder: ``.<working>.tmp`` in the working name's folder, which the next part of that
        working name overwrites)."""
        ...

    def move(self, source: str, target: str) -> None:
        """Give ``source`` the name ``target`` (nothing when ``source`` is gone: moved before)."""
        ...

    def delete(self, name: str) -> None:
        """Remove ``name`` if it exists."""
        ...

    def delete_under(self, prefix: str) -> None:
        """Remove every file whose name starts with ``prefix/``."""
        ...

    def names(self, pattern: str) -> list[str]:
        """The names of the landing place's top level matching the shell pattern ``pattern``, sorted."""
        ...


def check_location(location: str) -> None:
    """One line for a landing place capture cannot write to (a URI of another store)."""
    if is_uri(location) and not location.startswith(_SCHEMES):
        raise ConfigError(
            f"landing {location!r}: expected a local folder or an S3 URI (s3://bucket/prefix or "
            "s3a://bucket/prefix)"
        )


def landing_at(location: str) -> Landing:
    """The landing place ``location`` names (``check_location``)."""
    check_location(location)
    return LandingBucket(location) if location.startswith(_SCHEMES) else LandingFolder(location)


def sync_folder(folder: Path) -> None:
    """Flush a folder's entries (files created, renamed or moved into it) to disk."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


class _FolderPart:
    def __init__(self, root: Path, working: str) -> None:
        beside = root / working  # the hidden file is made in the folder its working name is in
        self.root, self.tmp = root, beside.with_name(f".{beside.name}.tmp")
        self.tmp.parent.mkdir(parents=True, exist_ok=True)
        self.out: IO[str] = open(self.tmp, "w", encoding="utf-8")  # noqa: SIM115 (closed by publish)

    def publish(self, name: str) -> str:
        with self.out as out:
            out.flush()
            os.fsync(out.fileno())
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.tmp, path)
        sync_folder(path.parent)
        return str(path)


class LandingFolder:
    """A local folder (made when first written)."""

    def __init__(self, folder: str) -> None:
        self.root = Path(folder)

    def location(self, name: str) -> str:
        return str(self.root / name)

    def read(self, name: str) -> str | None:
        path = self.root / name
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write(self, name: str, lines: Iterable[str]) -> str:
        part = _FolderPart(self.root, name)
        for line in lines:
            part.out.write(line + "\n")
        return part.publish(name)

    def open_part(self, working: str) -> OpenPart:
        return _FolderPart(self.root, working)

    def move(self, source: str, target: str) -> None:
        if (self.root / source).exists():
            (self.root / target).parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.root / source, self.root / target)
            sync_folder((self.root / target).parent)

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)

    def delete_under(self, prefix: str) -> None:
        shutil.rmtree(self.root / prefix, ignore_errors=True)

    def names(self, pattern: str) -> list[str]:
        return sorted(p.name for p in self.root.glob(pattern) if p.is_file())


class _BucketPart:
    def __init__(self, bucket: LandingBucket) -> None:
        self.bucket = bucket
        handle, self.tmp = tempfile.mkstemp(prefix="resolver-capture-", suffix=".json")
        self.out: IO[str] = os.fdopen(handle, "w", encoding="utf-8")

    def publish(self, name: str) -> str:
        try:
            with self.out:
                pass
            self.bucket.client.upload_file(self.tmp, self.bucket.bucket, self.bucket.key(name))
        finally:
            os.unlink(self.tmp)
        return self.bucket.location(name)


class LandingBucket:
    """A prefix of an S3 bucket (``s3://bucket/prefix`` or ``s3a://…``), through boto3."""

    def __init__(self, uri: str) -> None:
        scheme, rest = uri.split("://", 1)
        self.bucket, _, prefix = rest.partition("/")
        if not self.bucket:
            raise ConfigError(f"landing {uri!r}: no bucket: expected {scheme}://bucket/prefix")
        self.prefix = prefix.strip("/")
        self.uri = f"{scheme}://{self.bucket}/{self.prefix}".rstrip("/")
        try:
            import boto3
        except ImportError:
            raise ConfigError(
                f"landing {uri!r}: boto3 is not installed: expected it to land files in S3 "
                "(pip install 'pg-change-resolver[capture]')"
            ) from None
        self.client: Any = boto3.client("s3")

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def location(self, name: str) -> str:
        return f"{self.uri}/{name}"

    def read(self, name: str) -> str | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
        except self.client.exceptions.NoSuchKey:
            return None
        return str(body.read().decode("utf-8"))

    def write(self, name: str, lines: Iterable[str]) -> str:
        text = "".join(line + "\n" for line in lines)
        self.client.put_object(Bucket=self.bucket, Key=self.key(name), Body=text.encode("utf-8"))
        return self.location(name)

    def open_part(self, working: str) -> OpenPart:
        return _BucketPart(self)

    def move(self, source: str, target: str) -> None:
        listed = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.key(source), MaxKeys=1)
        if not any(item["Key"] == self.key(source) for item in listed.get("Contents", [])):
            return  # moved before
        copy = {"Bucket": self.bucket, "Key": self.key(source)}
        self.client.copy_object(Bucket=self.bucket, Key=self.key(target), CopySource=copy)
        self.delete(source)

    def delete(self, name: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self.key(name))

    def delete_under(self, prefix: str) -> None:
        for key in self._keys(self.key(prefix) + "/"):
            self.client.delete_object(Bucket=self.bucket, Key=key)

    def names(self, pattern: str) -> list[str]:
        top = self.key("")
        found = (k[len(top) :] for k in self._keys(top))
        return sorted(n for n in found if "/" not in n and fnmatch.fnmatchcase(n, pattern))

    def _keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]
