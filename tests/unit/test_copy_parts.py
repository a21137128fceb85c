"""A snapshot chunk's lines cut into landing files (``resolver.capture.copy``): about the limit each, cut only
between lines, every line once and in order, whatever sizes the copy hands them over in."""

from __future__ import annotations

from pathlib import Path

import pytest

from resolver.capture.copy import _Parts
from resolver.capture.landing import LandingFolder

LINES = [f'{{"action":"I","n":{i},"pad":"{"x" * (i % 37)}"}}\n' for i in range(400)]


@pytest.mark.parametrize("block", [1, 7, 400], ids=["line-by-line", "blocks-of-7", "all-at-once"])
def test_files_are_cut_between_lines_at_about_the_limit(tmp_path: Path, block: int) -> None:
    landing = LandingFolder(str(tmp_path))
    parts = _Parts(landing, "slot-snapshot-1-00000", 1000)
    for start in range(0, len(LINES), block):
        parts.write("".join(LINES[start : start + block]))
    names = parts.close()
    assert names == [f"slot-snapshot-1-00000-{k:04d}.json" for k in range(len(names))]
    texts = [(tmp_path / name).read_text(encoding="utf-8") for name in names]
    assert "".join(texts) == "".join(LINES)
    assert all(t.endswith("\n") for t in texts)
    longest = max(len(line) for line in LINES)
    assert all(1000 <= len(t) < 1000 + longest for t in texts[:-1]), [len(t) for t in texts]
    assert 0 < len(texts[-1]) < 1000 + longest
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == names  # no working file left


def test_a_chunk_of_no_rows_still_lands_one_file(tmp_path: Path) -> None:
    parts = _Parts(LandingFolder(str(tmp_path)), "s-00003", 1000)
    assert parts.close() == ["s-00003-0000.json"]
    assert (tmp_path / "s-00003-0000.json").read_text(encoding="utf-8") == ""
