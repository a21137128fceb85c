"""Which fragments make one transaction (``resolver.formats.stitch_plan``), from the pure reader's fragments
of real wal2json framing: a transaction cut into a tail, middles and a head, a bad line inside it,
transactions left for a later batch, streams without framing. No Spark: the aggregate
``resolver.batch.stitch.summarize``
takes in Spark is done here over the reader's own items."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from resolver.formats.stitch_plan import CUT_OFF, LATER, MATCHED, UNFRAMED, Part, ReadWindow, plan_stitching
from resolver.formats.wal2json import Count, Event, Fragment, Quarantined, read_lines
from resolver.models import Format

B = '{"action":"B","xid":7,"lsn":"0/10","nextlsn":"0/%X"}'
C = '{"action":"C","xid":7,"lsn":"0/10","nextlsn":"0/%X"}'
INS = (
    '{"action":"I","xid":7,"lsn":"0/11","schema":"s","table":"t",'
    '"columns":[{"name":"id","type":"integer","value":%d}]}'
)
MSG = '{"action":"M","xid":7,"lsn":"0/12","transactional":true,"prefix":"p","content":"x"}'


def _read(files: list[list[str]]) -> list[tuple[int, Any]]:
    return [
        (i, item)
        for i, lines in enumerate(files)
        for item in read_lines(("\n".join(lines)).encode().split(b"\n"), f"f{i}.json", Format.WAL2JSON_V2)
    ]


def _parts(items: list[tuple[int, Any]]) -> list[Part]:
    """What ``resolver.batch.stitch.summarize`` computes in Spark: per file and role, the commit LSN, events,
    lines and change slots; and a ``whole`` part per file with complete transactions."""
    groups: dict[tuple[int, str], list[Fragment]] = defaultdict(list)
    for i, item in items:
        if isinstance(item, Fragment):
            groups[(i, item.role)].append(item)
    parts = [
        Part(
            f,
            role,
            max((x.commit_lsn for x in frs if x.commit_lsn is not None), default=None),
            sum(x.row is not None for x in frs),
            len(frs),
            max(x.slots for x in frs),
        )
        for (f, role), frs in groups.items()
    ]
    whole = {i for i, x in items if isinstance(x, Count) and x.name == "transactions"}
    bad = defaultdict(int)
    for i, x in items:
        if isinstance(x, Quarantined):
            bad[i] += 1
    return [
        *parts,
        *[Part(i, "whole", None, 0, 1, 0) for i in sorted(whole)],
        *[Part(i, "bad", None, 0, n, 0) for i, n in sorted(bad.items())],
    ]


def _stitched(items: list[tuple[int, Any]], plan: Any) -> list[tuple[int | None, int, int]]:
    """(commit LSN, position, id) of the events the plan gives, as ``resolver.batch.stitch.stitch`` does."""
    out = []
    for i, item in items:
        if isinstance(item, Fragment) and item.row is not None:
            status, offset, lsn = plan.status[(i, item.role)]
            if status == MATCHED:
                out.append((lsn, item.row["position"] + offset, int(item.row["column_values"][0])))
            elif status == UNFRAMED:
                out.append((None, 0, int(item.row["column_values"][0])))
    return out


def _whole(lines: list[str]) -> list[tuple[int | None, int, int]]:
    """The same stream read as one file: what the stitched events must equal."""
    return [
        (x.row["commit_lsn"], x.row["position"], int(x.row["column_values"][0]))
        for _, x in _read([lines])
        if isinstance(x, Event)
    ]


STREAM = [B % 0x20, INS % 1, C % 0x20, B % 0x30, *[INS % n for n in range(10, 22)], MSG, C % 0x30, B % 0x40,
          INS % 99, C % 0x40]  # fmt: skip


def test_a_transaction_across_four_files_is_one_transaction_with_its_positions() -> None:
    files = [STREAM[:6], STREAM[6:9], STREAM[9:13], STREAM[13:]]  # B 0x30 in file 0, C 0x30 in file 3
    items = _read(files)
    parts = _parts(items)
    roles = {(p.file_index, p.role) for p in parts if p.role != "whole"}
    assert roles == {(0, "tail"), (1, "middle"), (2, "middle"), (3, "head")}
    plan = plan_stitching(parts, len(files))
    assert {s for s, _, _ in plan.status.values()} == {MATCHED}
    whole_events = [e for e in _whole(STREAM) if e[0] == 0x30]
    assert sorted(_stitched(items, plan)) == whole_events  # same LSN and positions as uncut
    assert (plan.transactions, plan.events, plan.messages, plan.quarantined) == (1, 12, 1, 0)
    assert plan.open_from is None


def test_a_bad_line_inside_a_cut_transaction_keeps_its_slot() -> None:
    stream = [*STREAM[:5], '{"action":"I"', *STREAM[5:]]
    files = [stream[:5], stream[5:8], stream[8:]]
    items = _read(files)
    parts = _parts(items)
    plan = plan_stitching(parts, len(files))
    assert [x for _, x in items if isinstance(x, Quarantined)]
    got = sorted(_stitched(items, plan))
    assert got == [e for e in _whole(stream) if e[0] == 0x30]
    assert len({pos for lsn, pos, _ in got if lsn == 0x30}) == 12


def test_an_open_transaction_is_left_for_a_later_batch_and_names_the_file_it_began_in() -> None:
    files = [STREAM[:3], STREAM[3:6], STREAM[6:9]]  # 0x30 begins in file 1 and has not committed
    parts = _parts(_read(files))
    later = plan_stitching(parts, len(files), ReadWindow(open_end=True))
    assert later.status[(1, "tail")][0] == LATER and later.status[(2, "middle")][0] == LATER
    assert later.open_from == 1 and later.quarantined == 0
    closed = plan_stitching(parts, len(files))  # the end of the input: quarantined, never applied
    assert {closed.status[k][0] for k in ((1, "tail"), (2, "middle"))} == {CUT_OFF}
    assert closed.quarantined == 3 + 3


def test_a_head_whose_begin_came_in_an_earlier_batch_is_left_alone_or_cut_off() -> None:
    files = [STREAM[6:9], STREAM[9:13], STREAM[13:]]  # middle, middle, head (B is in an earlier file)
    parts = _parts(_read(files))
    assert {p.role for p in parts} == {"middle", "head", "whole"}
    started = plan_stitching(parts, len(files), ReadWindow(open_start=True))
    assert {s for s, _, _ in started.status.values()} == {LATER} and started.open_from is None
    closed = plan_stitching(parts, len(files))
    assert {s for s, _, _ in closed.status.values()} == {CUT_OFF}


def test_a_tail_and_a_head_of_different_transactions_are_not_joined() -> None:
    files = [STREAM[:6], STREAM[6:9], [INS % 5, C % 0x99]]  # the head commits another transaction
    parts = _parts(_read(files))
    plan = plan_stitching(parts, len(files))
    assert {s for s, _, _ in plan.status.values()} == {CUT_OFF}


def test_a_stream_without_framing_is_read_record_by_record() -> None:
    files = [[INS % 1, INS % 2], [INS % 3]]  # include-transaction=0: no B or C anywhere
    items = _read(files)
    parts = _parts(items)
    plan = plan_stitching(parts, len(files), ReadWindow(open_start=True, open_end=True))
    assert sorted(_stitched(items, plan)) == [(None, 0, 1), (None, 0, 2), (None, 0, 3)]
    assert plan.events == 3 and plan.quarantined == 0


@st.composite
def _cut_streams(draw: st.DrawFn) -> tuple[list[str], list[int], bool]:
    """A framed stream of transactions (sizes 0-6, messages among the changes, a bad line now and then),
    cut at any lines into any number of files, and whether a stream read in pieces ends open."""
    lines: list[str] = []
    for t in range(draw(st.integers(1, 6))):
        lines.append(B % (0x100 + t))
        for n in range(draw(st.integers(0, 6))):
            kind = draw(st.sampled_from(["ins", "ins", "ins", "msg", "bad"]))
            lines.append({"ins": INS % (100 * t + n), "msg": MSG, "bad": '{"action":"I"'}[kind])
        lines.append(C % (0x100 + t))
    cuts = sorted(draw(st.sets(st.integers(1, len(lines) - 1), max_size=len(lines) - 1)))
    return lines, cuts, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(case=_cut_streams())
def test_any_cut_of_a_stream_gives_the_events_of_the_whole_stream(
    case: tuple[list[str], list[int], bool],
) -> None:
    lines, cuts, open_end = case
    files = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    items = _read(files)
    parts = _parts(items)
    plan = plan_stitching(parts, len(files), ReadWindow(open_end=open_end))
    whole_events = _whole(lines)
    in_files = [(x.row["commit_lsn"], x.row["position"], int(x.row["column_values"][0]))
                for _, x in items if isinstance(x, Event)]  # fmt: skip
    assert sorted(in_files + _stitched(items, plan)) == sorted(
        whole_events
    )  # every event once, same identity
    assert plan.quarantined == 0 and plan.open_from is None  # the stream ends with a commit: nothing open
    whole_count = sum(isinstance(x, Count) and x.name == "transactions" for _, x in _read([lines]))
    read_count = sum(x.value for _, x in items if isinstance(x, Count) and x.name == "transactions")
    assert read_count + plan.transactions == whole_count


@settings(max_examples=200, deadline=None)
@given(case=_cut_streams(), data=st.data())
def test_a_stream_cut_short_leaves_its_open_transaction_for_later_from_the_file_it_began_in(
    case: tuple[list[str], list[int], bool], data: st.DataObject
) -> None:
    lines, cuts, _ = case
    stop = data.draw(st.integers(1, len(lines)))  # the files landed so far end at line ``stop``
    landed = lines[:stop]
    bounds = [(a, min(b, stop)) for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True) if a < stop]
    files = [landed[a:b] for a, b in bounds]
    items = _read(files)
    parts = _parts(items)
    plan = plan_stitching(parts, len(files), ReadWindow(open_end=True))
    begun = [i for i, line in enumerate(landed) if line.startswith('{"action":"B"')]
    ended = sum(line.startswith('{"action":"C"') for line in landed)
    if len(begun) > ended:  # a transaction is open at the end: it waits, from the file of its B
        b = begun[-1]
        assert plan.open_from == next(i for i, (a, e) in enumerate(bounds) if a <= b < e)
    else:
        assert plan.open_from is None
    assert plan.quarantined == 0  # nothing of a stream read in pieces is thrown away
    committed = [e for e in _whole(lines) if e[0] is not None and e[0] < 0x100 + ended]
    got = [(x.row["commit_lsn"], x.row["position"], int(x.row["column_values"][0]))
           for _, x in items if isinstance(x, Event)]  # fmt: skip
    assert sorted(got + _stitched(items, plan)) == sorted(committed)
