"""The benchmark's own parts: the workload generator keeps its promises, and every baseline still gives
our result on a tiny input (so ``python -m bench`` cannot time something that rotted). No timing here."""

from __future__ import annotations

import pytest

from bench.workload import Spec, generate


def _events(txns: list) -> list:
    return [(t.lsn, i, c) for t in txns for i, c in enumerate(t.changes)]


def test_generator_counts_faults_and_is_seeded() -> None:
    spec = Spec(
        target_rows=5000, batch_events=2000, batches=3, key_range=0.01, duplicate_fraction=0.05,
        out_of_order_fraction=0.1, late_fraction=0.1, seed=3,
    )  # fmt: skip
    work = generate(spec)
    assert generate(spec).batches[1].txns == work.batches[1].txns  # seeded
    assert generate(Spec(**{**spec.__dict__, "seed": 4})).batches[1].txns != work.batches[1].txns
    seen: set[tuple[int, int]] = set()
    for b, batch in enumerate(work.batches):
        delivered = _events(batch.txns)
        distinct = {(lsn, pos) for lsn, pos, _ in delivered}
        assert len(distinct) == batch.events
        assert len(delivered) - len(distinct) == batch.duplicates
        assert 0.05 <= batch.duplicates / batch.events < 0.06
        assert not distinct & seen  # every event is delivered in exactly one batch
        seen |= distinct
        in_order = sorted({t.lsn: t for t in batch.txns}.values(), key=lambda t: t.lsn)
        assert [t.lsn for t in dict.fromkeys(batch.txns)] != [t.lsn for t in in_order]  # out of order
        assert batch.out_of_order == int(0.1 * len(in_order))
        if b == 0:
            assert batch.late == 0
            continue
        # late: older than the newest change an earlier batch delivered for the same key
        newest: dict[int, int] = {}
        for earlier in work.batches[:b]:
            for t in earlier.txns:
                for c in t.changes:
                    for k in {c.key, c.old_key} - {None}:
                        newest[k] = max(newest.get(k, 0), t.lsn)
        late = {
            (t.lsn, i)
            for t in batch.txns
            for i, c in enumerate(t.changes)
            if any(newest.get(k, 0) > t.lsn for k in {c.key, c.old_key} - {None})
        }
        assert len(late) == batch.late
        assert 0.1 <= batch.late / batch.events < 0.12
    assert work.batches[-1].events == spec.batch_events  # held-back events make up part of a batch's size


def test_generator_mix_and_one_per_key() -> None:
    batch = generate(Spec(target_rows=20_000, batch_events=5000, one_per_key=True, seed=1)).batches[0]
    changes = [c for t in batch.txns for c in t.changes]
    ops = {op: sum(c.op == op for c in changes) / len(changes) for op in "IUD"}
    assert abs(ops["I"] - 0.2) < 0.03 and abs(ops["U"] - 0.7) < 0.03 and abs(ops["D"] - 0.1) < 0.03
    keys = [c.key for c in changes]
    assert len(keys) == len(set(keys))
    assert all(c.old_key == c.key for c in changes if c.op != "I")
    assert all(c.key >= 20_000 for c in changes if c.op == "I")  # inserts take new keys


def test_generator_chains_are_chained() -> None:
    work = generate(Spec(target_rows=1000, batch_events=300, chain_length=100, seed=2))
    assert len(work.chains) == 3 and all(len(c) == 101 for c in work.chains)
    moves = [(t.lsn, c.old_key, c.key) for t in work.batches[0].txns for c in t.changes]
    assert all(op == "U" for t in work.batches[0].txns for op in (c.op for c in t.changes))
    by_old = {old: (lsn, new) for lsn, old, new in moves}
    for chain in work.chains:
        assert chain[0] < 1000 and all(k >= 1000 for k in chain[1:])
        lsns = [by_old[k][0] for k in chain[:-1]]
        assert [by_old[k][1] for k in chain[:-1]] == chain[1:]  # each move starts where the last one ended
        assert lsns == sorted(lsns)
    first = [lsn for lsn, old, _ in moves if old == work.chains[0][0]][0]
    second = [lsn for lsn, old, _ in moves if old == work.chains[1][0]][0]
    assert first != second  # chains interleave rather than run one after another


@pytest.mark.spark
def test_baselines_agree_with_ours(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench.checks import check_baselines

    checks = {c.name: c for c in check_baselines(spark, str(tmp_path))}
    for name in (
        "direct seed == resolver",
        "delta docs SCD1",
        "seed 002 loop",
        "seed 000 two-step merge",
        "delta docs SCD2",
        "seed 002 loop, chains",
    ):
        assert checks[name].ok, f"{name}: {checks[name].why}"
    assert not checks["seed 002 loop as published, chains"].ok  # intermediate keys survive: why we fixed it
    mack = checks["mack type_2_scd_upsert"]
    assert mack.ok or "fails here" in mack.why or "not installed" in mack.why


def test_debezium_input_is_the_wal2json_events_and_reads_without_quarantine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``bench.parse_speed``'s Debezium file: every line is an event or a delete's tombstone, nothing is
    quarantined, and the events are the wal2json file's, in the same order. No Spark."""
    import datetime as dt
    import filecmp

    from bench import debezium_input, wal2json_input
    from resolver.formats.wal2json import Count, Event, read_lines
    from resolver.models import Format

    def read(path: str, fmt: Format) -> tuple[list[dict], list]:
        with open(path, "rb") as fh:
            items = list(read_lines(fh, path, fmt))
        return [i.row for i in items if type(i) is Event], [i for i in items if type(i) is not Event]

    def same(e: dict) -> tuple:
        values = list(e.get("column_values") or [])
        for i, name in enumerate(e.get("column_names") or []):
            if name == "created_at" and values[i] is not None:  # wal2json's and Debezium's spelling
                values[i] = dt.datetime.fromisoformat(values[i])
        keep = ("table", "operation", "xid", "change_lsn", "commit_time", "column_names", "old_key_names",
                "old_key_values", "primary_key")  # fmt: skip
        return *(e.get(k) for k in keep), values

    w2j = wal2json_input.generate(str(tmp_path), "in.json", 600, seed=7)
    dbz = debezium_input.generate(str(tmp_path), "in.jsonl", w2j)
    (tmp_path / "again").mkdir()
    again = debezium_input.generate(str(tmp_path / "again"), "in.jsonl", w2j)
    assert filecmp.cmp(dbz.path, again.path, shallow=False)  # deterministic
    assert dbz.events == 600 and min(dbz.ops.values()) > 0

    events, others = read(dbz.path, Format.DEBEZIUM_JSON)
    assert all(type(o) is Count and o.name == "tombstones" for o in others)  # nothing quarantined
    assert len(events) == 600 and len(others) == dbz.ops["D"] == dbz.expected["tombstones"]
    lines = sorted([e["source_line"] for e in events] + [o.line for o in others])
    assert lines == list(range(1, dbz.lines + 1))
    typed = {e["table"]: e["column_types"] for e in events if e["operation"] == "insert"}
    assert typed == {  # column.propagate.source.type: every column has its PostgreSQL type
        "public.customers": "int8 text text numeric(12,2) float8 text[] jsonb bytea text timestamptz".split(),
        "public.orders": "int8 int4 numeric text".split(),
    }
    order = [(e["commit_lsn"], e["position"]) for e in events]
    assert order == sorted(order) and len(set(order)) == 600
    by_xid: dict[int, set[int]] = {}
    for e in events:
        by_xid.setdefault(e["xid"], set()).add(e["commit_lsn"])
    assert all(len(commits) == 1 for commits in by_xid.values())  # one commit LSN per transaction

    wal2json_events, _ = read(w2j.path, Format.WAL2JSON_V2)
    assert [same(e) for e in events] == [same(e) for e in wal2json_events]

    halves = [read(p, Format.DEBEZIUM_JSON)[0] for p in dbz.parts]  # cut at a transaction boundary
    assert b"".join(open(p, "rb").read() for p in dbz.parts) == open(dbz.path, "rb").read()
    assert {e["xid"] for e in halves[0]}.isdisjoint(e["xid"] for e in halves[1])
    assert sum(map(len, halves)) == 600 and 250 <= len(halves[0]) <= 350


def test_steps_load_refuses_no_files_before_starting_spark(capsys) -> None:  # type: ignore[no-untyped-def]
    from bench.steps import main

    with pytest.raises(SystemExit) as stopped:
        main(["--load", "2"])
    assert stopped.value.code == 2
    assert "--load needs files" in capsys.readouterr().err
