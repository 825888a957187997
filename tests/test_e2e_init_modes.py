"""End to end: a triage and a rater-panel experiment made by `relgrade init --mode`, each run
by the user's loop alone: `dvc repro` (stops at the grading owed, naming the commands), the
commands it names, `dvc repro` again, until the key and the report exist.

The graders are command graders reading the chunk text (tests/graders/tiny_grader.py), so
every grade is the fixture's truth; the loop is what is tested, and that no other step (no
`dvc repro packets`, no hand-edited dvc.yaml) is ever needed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e import shipped, tiny

pytestmark = [pytest.mark.slow]

GRADER = Path(__file__).with_name("graders") / "tiny_grader.py"
COMMAND = f"{sys.executable} {GRADER}"


def _bare(root):
    """The tiny experiment's inputs (``tiny.write_inputs``) in a new git + DVC repository
    ``root``: ``git init``, ``dvc init``, DVC's analytics off; no experiment yet."""
    tiny.write_inputs(root)
    shipped.init_repo(root)


def _repo(tmp_path_factory, name):
    """A new folder ``name`` (numbered by ``tmp_path_factory.mktemp``) holding :func:`_bare`'s
    repository: built once per test run (shared by the xdist workers, tests/conftest.py) and
    copied (work tree, git and DVC), so each caller has its own. Returns the folder."""
    from tests.conftest import _built_once

    bare = _built_once(tmp_path_factory, "tiny-inputs", _bare)
    return tiny.copy_repo(bare, tmp_path_factory.mktemp(name))


def _turn(root, exp):
    """One turn of the user's loop: `dvc repro`, then every `relgrade grade run` its Pending
    line names.

    Returns the pending lines of that `dvc repro` (a list of str), empty if it completed."""
    proc = tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml", check=False)
    if proc.returncode == 0:
        return []
    pending = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
    assert pending, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for command in re.findall(r"`(relgrade grade run [^`]*)`", pending[0]):
        tiny.run(root, *command.split(), "--no-progress")
    return pending


def _loop(root, exp, *, rounds=4):
    """`dvc repro`, then every command its Pending line names, until it completes.

    Returns the pending lines seen, in order."""
    seen = []
    for _ in range(rounds):
        pending = _turn(root, exp)
        if not pending:
            return seen
        seen += pending
    raise AssertionError(f"dvc repro did not complete after {rounds} rounds: {seen}")


def _init(root, exp, *args):
    return tiny.run(root, "relgrade", "init", exp, "--corpus", "data/input/chunks.jsonl",
                    "--queries", "data/input/queries.tsv", "--intents", "data/input/intents.tsv",
                    "--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--pool-depth", "3",
                    "--audit-min", "4", "--grader-command", COMMAND, "--auditor-command",
                    COMMAND, *args)


def test_a_triage_experiment_made_by_init_runs_by_the_loop_alone(tmp_path_factory):
    root = _repo(tmp_path_factory, "triage")
    exp = "experiments/screened"
    _init(root, exp, "--mode", "triage", "--triage", f"model-t={COMMAND}")
    tiny.run(root, "relgrade", "pipeline", "check", "--experiment", exp)
    tiny.run(root, "relgrade", "intents", "review", "--experiment", exp, "--reviewer",
             "auditor-b")
    seen = _loop(root, exp)
    # first the model owes every pool pair, then people owe its queue
    assert "need model-t" in seen[0]
    assert any("need grader-a" in line for line in seen[1:])
    record = json.loads((root / exp / "data/key/record.json").read_text())
    key = [json.loads(x) for x in (root / exp / "data/key/key.jsonl").read_text().splitlines()]
    assert record["key_sha256"] and len(key) == record["pairs"]
    assert all(r["grade"] == tiny.truth(r["chunk_id"]) for r in key)
    assert (root / exp / "data/private/triage-queue.tsv").is_file()  # private, DVC-cached
    assert (root / exp / "metrics/report.md").is_file()


def test_a_rater_panel_experiment_made_by_init_runs_by_the_loop_alone(tmp_path_factory):
    root = _repo(tmp_path_factory, "raters")
    exp = "experiments/panel"
    gold = root / "gold.tsv"  # each query's answer and pointer chunks: pooled by every arm
    gold.write_text("query_id\tchunk_id\tgrade\n" + "".join(
        f"{q}\t{q}-answer\t2\n{q}\t{q}-pointer\t1\n" for q, *_ in tiny.TOPICS))
    # four raters, three per pair; --gold-fraction 0.3 draws its gold questions from these
    raters = [a for i in (1, 2, 3, 4) for a in ("--rater", f"rater-{i}={COMMAND}")]
    _init(root, exp, "--mode", "raters", *raters, "--expert", f"expert-e={COMMAND}",
          "--gold", str(gold), "--gold-fraction", "0.3")
    assert yaml.safe_load((root / exp / "params.yaml").read_text())["gold"]["fraction"] == 0.3
    tiny.run(root, "relgrade", "pipeline", "check", "--experiment", exp)
    tiny.run(root, "relgrade", "intents", "review", "--experiment", exp, "--reviewer",
             "auditor-b")
    seen = _loop(root, exp)
    assert any("need rater-1" in line for line in seen)
    key = [json.loads(x) for x in (root / exp / "data/key/key.jsonl").read_text().splitlines()]
    assert key and all(r["grade"] == tiny.truth(r["chunk_id"]) for r in key)
    aggregate = json.loads((root / exp / "metrics/aggregate.json").read_text())
    assert aggregate  # gold accuracy and removals reported
    assert (root / exp / "metrics/report.md").is_file()


def test_init_refuses_a_panel_of_two_and_gold_outside_raters_mode(tmp_path_factory):
    root = _repo(tmp_path_factory, "refused")
    base = ["relgrade", "init", "experiments/y", "--corpus", "data/input/chunks.jsonl",
            "--queries", "data/input/queries.tsv", "--intents", "data/input/intents.tsv",
            "--arm", "bm25=bm25"]
    (root / "gold.tsv").write_text("query_id\tchunk_id\tgrade\nkw01\tkw01-answer\t2\n")
    two = tiny.run(root, *base, "--mode", "raters", "--rater", "r1", "--rater", "r2",
                   "--gold", "gold.tsv", check=False)
    assert two.returncode == 1
    assert "a rater panel needs at least 4 raters" in two.stderr
    single = tiny.run(root, *base, "--gold", "gold.tsv", check=False)
    assert single.returncode == 1
    assert "--rater and --gold go with --mode raters" in single.stderr
    assert not (root / "experiments/y").exists()
