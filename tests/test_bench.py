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
