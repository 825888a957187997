"""End to end: a rater panel made by `relgrade init --mode raters`, graded until its key
exists, then a new arm. `relgrade arm add` and `relgrade pool plan` price the new pool as the
packets stage deals it, and `relgrade status` says the same per grader once `dvc repro` has
made that pool; when the packets stage refuses the new pool, the status says so and names
the right `dvc repro`.

Four raters with `raters.per_pair: 4` (every rater grades every pair), so what each owes is
counted by hand: every pair new to the pool, whatever the seeded deal. The graders are
command graders (tests/graders/tiny_grader.py).
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_init_modes import COMMAND, _init, _loop, _repo

pytestmark = [pytest.mark.slow]

EXP = "experiments/rat"
RATERS = ("r1", "r2", "r3", "r4")


def _keyed(root):
    """A rater panel (r1–r4, every rater on every pair; expert ex; gold: each query's answer
    and pointer, gold.fraction 0.1) in the tiny repository ``root``, graded by the user's
    loop until its key is frozen."""
    gold = root / "gold.tsv"
    gold.write_text("query_id\tchunk_id\tgrade\n" + "".join(
        f"{q}\t{q}-answer\t2\n{q}\t{q}-pointer\t1\n" for q, *_ in tiny.TOPICS))
    raters = [a for r in RATERS for a in ("--rater", f"{r}={COMMAND}")]
    _init(root, EXP, "--mode", "raters", *raters, "--expert", f"ex={COMMAND}",
          "--gold", str(gold), "--gold-fraction", "0.1")
    params = root / EXP / "params.yaml"
    p = yaml.safe_load(params.read_text())
    p["raters"]["per_pair"] = 4
    params.write_text(yaml.safe_dump(p, sort_keys=False))
    tiny.run(root, "relgrade", "intents", "review", "--experiment", EXP, "--reviewer",
             "auditor-b")
    _loop(root, EXP)
    assert (root / EXP / "data/key/record.json").is_file()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """The graded panel, built once; each test copies it."""
    from tests.conftest import _built_once

    def build(folder):
        tiny.copy_repo(_repo(tmp_path_factory, "rat-inputs"), folder)
        _keyed(folder)

    return _built_once(tmp_path_factory, "rater-panel-keyed", build)


def _pool(root):
    import pandas as pd

    pool = pd.read_parquet(root / EXP / "data/pool/pool.parquet")
    return set(zip(pool["query_id"].astype(str), pool["chunk_id"].astype(str)))


def _rev(root, pairs_of):
    """A run file rev.trec ranking, per query, the chunks ``pairs_of(query_id)`` gives."""
    lines = [f"{q} Q0 {c} {rank} {10 - rank} rev"
             for q, *_ in tiny.TOPICS for rank, c in enumerate(pairs_of(q), start=1)]
    (root / "rev.trec").write_text("\n".join(lines) + "\n")


def _graders(text):
    """Per grader, (spent, pending) from cost lines (`  NAME (person): S spent, P pending`)."""
    return {m[0]: (int(m[1]), int(m[2])) for m in
            re.findall(r"^  (\S+) \((?:person|model)\): (\d+) spent.*?, (\d+) pending",
                       text, flags=re.M)}


def _lines(root, grader):
    """The judgments ``grader``'s round-1 grade file holds (its non-blank lines)."""
    f = root / EXP / "data/grades" / grader / "round-1.jsonl"
    return sum(1 for x in f.read_text().splitlines() if x.strip()) if f.exists() else 0


def test_arm_add_pool_plan_and_status_give_each_grader_the_same_spent_and_pending(
        keyed, tmp_path_factory):
    root = tiny.copy_repo(keyed, tmp_path_factory.mktemp("rprice"))
    before = _pool(root)
    # per query: its answer (pooled already) and the first miss of the next query's topic
    # (pooled by no arm): one new pair per query
    names = [q for q, *_ in tiny.TOPICS]
    nxt = {q: names[(i + 1) % len(names)] for i, q in enumerate(names)}
    _rev(root, lambda q: [f"{q}-answer", f"{nxt[q]}-miss1"])
    new = {(q, f"{nxt[q]}-miss1") for q in names}
    assert not new & before and all((q, f"{q}-answer") in before for q in names)
    added = tiny.run(root, "relgrade", "arm", "add", "rev", "--run", "rev.trec",
                     "--experiment", EXP).stdout
    # the plan pools every arm's run on disk: make rev's as the error it names says
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:retrieve@rev")
    plan = tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP).stdout
    # hand counts: the pool had 42 pairs, every rater graded all of them (42 lines each) and
    # now owes the 12 new ones; the auditor graded the 14 pairs of its 4 audited queries and
    # owes their new pair each (4); the expert had nothing to adjudicate (the raters agree)
    # and is listed all the same
    assert {g: _lines(root, g) for g in (*RATERS, "auditor-b", "ex")} == {
        "r1": 42, "r2": 42, "r3": 42, "r4": 42, "auditor-b": 14, "ex": 0}
    expected = {"r1": (42, 12), "r2": (42, 12), "r3": (42, 12), "r4": (42, 12),
                "auditor-b": (14, 4), "ex": (0, 0)}
    assert _graders(added) == expected
    assert "judging cost: 182 judgments spent (182 model calls), 52 pending" in added
    assert _graders(plan) == expected
    # dvc repro makes the new pool and stops at the raters' pending work; status then says
    # the same per grader
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert _pool(root) == before | new
    shown = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    assert _graders(shown) == expected


def test_status_after_the_packets_stage_refused_names_the_missing_assignment_and_its_repro(
        keyed, tmp_path_factory):
    root = tiny.copy_repo(keyed, tmp_path_factory.mktemp("rprice-gold"))
    before = _pool(root)
    names = [q for q, *_ in tiny.TOPICS]
    nxt = {q: names[(i + 1) % len(names)] for i, q in enumerate(names)}
    after = {q: names[(i + 2) % len(names)] for i, q in enumerate(names)}
    _rev(root, lambda q: [f"{nxt[q]}-miss1", f"{nxt[q]}-miss2", f"{after[q]}-miss1"])
    assert not {(q, f"{nxt[q]}-miss1") for q in names} & before
    # half the pool gold: 21 of today's 42 pairs (the gold file has 24 of them), but 39 of
    # the 42 + 36 = 78 pairs with rev's three new pairs per query: too few
    params = root / EXP / "params.yaml"
    p = yaml.safe_load(params.read_text())
    p["gold"]["fraction"] = 0.5
    params.write_text(yaml.safe_dump(p, sort_keys=False))
    added = tiny.run(root, "relgrade", "arm", "add", "rev", "--run", "rev.trec",
                     "--experiment", EXP)
    refusal = (f"{EXP}/params.yaml: gold.fraction: too few gold pairs for the share asked "
               "(found 24 gold pairs in the pool, 39 needed for a share of 0.5 of its 78 "
               "pairs)")
    assert refusal in added.stderr
    repro = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert repro.returncode != 0 and refusal in repro.stderr
    assert not (root / EXP / "data/private/assignment.parquet").exists()
    shown = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    print(shown)
    assert "file is invalid" not in shown
    line = next(x for x in shown.splitlines() if x.startswith("assignment: missing"))
    assert refusal in line
    assert line.endswith(f"Run: dvc repro {EXP}/dvc.yaml:packets")
    # the rest of the status is there: each grader's spent, the raters' pending not counted
    assert _graders(shown) == {"r1": (42, 0), "r2": (42, 0), "r3": (42, 0), "r4": (42, 0),
                               "auditor-b": (14, 12), "ex": (0, 0)}
    plan = tiny.run(root, "relgrade", "pool", "plan", "--experiment", EXP, check=False)
    assert plan.returncode == 1 and refusal in plan.stderr
