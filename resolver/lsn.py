"""PostgreSQL log sequence numbers (LSNs): the text PostgreSQL prints (``16/B374D848``) and the 64-bit integer
the lake keeps. No Spark."""

from __future__ import annotations

__all__ = ["format_lsn", "parse_lsn"]


def parse_lsn(lsn: str) -> int:
    """``'16/B374D848'`` -> 64-bit integer."""
    hi, _, lo = lsn.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def format_lsn(value: int) -> str:
    """64-bit integer -> ``'16/B374D848'``."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"
