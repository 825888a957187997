"""End to end: a drifted query log flagged by `relgrade drift`, a refresh slice drawn by the
sample stage, and the old and the new query set side by side in the report.

experiments/crowd-sim (the committed experiment whose query set the sample stage draws from
a simulated log) is copied into a temporary git + dvc repository, as in test_e2e_crowd.py,
and run to its first key and report. A current log is then written from the committed one
with every query of the tail (by the sampler's cut of that log) issued 2.7 times as often:
the tail's share of the traffic grows by 20 points. From there on the test types what the
commands print: the `relgrade queries refresh` of drift's DRIFT line, the `dvc repro` of
refresh's "next:" line, and the commands each Pending line names (the intents are written
by the simulation's sim/make_intents.py, the random arm's run by tools/random_run.py).
"""

from __future__ import annotations

import json
import math
import re
import shlex

import pandas as pd
import pytest

from relgrade import query_sampling as querylog
from tests.e2e import shipped, tiny

pytestmark = [pytest.mark.slow]

EXP = "experiments/crowd-sim"
LOG = "logs/2027-q1.tsv"


def _pending_commands(stderr: str) -> list[str]:
    """The `relgrade ...` commands a Pending line names (the `dvc repro` after them aside)."""
    line = next(x for x in stderr.splitlines() if x.startswith("Pending: "))
    return [c for c in re.findall(r"`([^`]+)`", line) if c.startswith("relgrade ")]


def _until_done(root, repro: list[str], log: list, status: list | None = None) -> None:
    """`dvc repro` as printed, doing what each Pending line names, until it succeeds (with
    `relgrade status` at each stop appended to ``status``)."""
    for _ in range(8):
        done = tiny.run(root, *repro, check=False)
        log.append(done)
        if done.returncode == 0:
            return
        assert "Pending: " in done.stderr, done.stdout + done.stderr
        line = next(x for x in done.stderr.splitlines() if x.startswith("Pending: "))
        if status is not None:
            status.append(tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout)
        if line.startswith("Pending: intents:"):
            tiny.run(root, "python", f"{EXP}/sim/make_intents.py")  # the edit it asks for
        for command in _pending_commands(done.stderr):
            tiny.run(root, *shlex.split(command), *(["--no-progress"]
                                                    if " grade run " in command else []))
    raise AssertionError("dvc repro never finished:\n" + log[-1].stderr)


def _shifted_log(root) -> tuple[dict, dict]:
    """The committed log with the tail's counts times 2.7 (rounded): counts by query."""
    before = pd.read_csv(root / EXP / "data/input/query-log.tsv", sep="\t")
    cut = querylog.strata(before)
    tail = set(cut.loc[cut["stratum"] == "tail", "query"])
    after = {q: (round(c * 27 / 10) if querylog.normalize_query(q) in tail else int(c))
             for q, c in zip(before["query"], before["count"])}
    (root / "logs").mkdir()
    (root / LOG).write_text("query\tcount\n" + "".join(f"{q}\t{c}\n" for q, c in after.items()))
    return dict(zip(cut["query"], cut["stratum"])), after


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory, crowd_sim_reported):
    # the copy (tests.e2e.shipped) with sample -> pool run, given a clone's top (the pool is
    # the same with it or without), and the loop taken with it to the first key and report:
    # the full `dvc repro` stopped at the expert's adjudication, the `relgrade grade run` its
    # Pending line names, run as printed, and the full `dvc repro` again, which completes;
    # shared with test_e2e_crowd.py (tests/conftest.py)
    root = tiny.copy_repo(crowd_sim_reported / "repo", tmp_path_factory.mktemp("refresh"))
    assert shipped.crowd_second(crowd_sim_reported).returncode == 0
    before = {"set": pd.read_csv(root / EXP / "data/input/queries.sampled.tsv", sep="\t"),
              "record": json.loads((root / EXP / "data/key/record.json").read_text())}
    strata, counts = _shifted_log(root)
    drift = tiny.run(root, "relgrade", "drift", "--experiment", EXP, "--log", LOG)
    (root / "ab.jsonl").write_text(json.dumps({"control": "bm25", "treatment": "tfidf",
                                               "metric": "CTR", "delta": 0.02, "low": -0.01,
                                               "high": 0.05}) + "\n")
    reconciled = tiny.run(root, "relgrade", "reconcile", "--experiment", EXP, "--ab",
                          "ab.jsonl", "--query-log", LOG, "--json")
    flagged = next(x for x in drift.stdout.splitlines() if x.startswith("DRIFT: "))
    refresh = tiny.run(root, *shlex.split(flagged.rsplit(": ", 1)[1]))
    nxt = next(x for x in refresh.stdout.splitlines() if x.startswith("next: "))
    repro = shlex.split(nxt[len("next: "):].split(" (", 1)[0])
    second, status = [], []
    # the random arm is an external run over the query set: its owner runs it again over
    # the refreshed set, as refresh's output says
    note = next(x for x in refresh.stdout.splitlines() if x.startswith("note: "))
    assert note == ("note: the runs of arms of kind file must cover the refreshed set: random "
                    f"(run them again after `dvc repro {EXP}/dvc.yaml:queries`)")
    tiny.run(root, *shlex.split(re.search(r"`([^`]+)`", note).group(1)))
    tiny.run(root, "python", "tools/random_run.py", EXP, "random")
    _until_done(root, repro, second, status)
    return {"status": status, "root": root, "exp": root / EXP, "before": before, "strata": strata,
            "counts": counts, "drift": drift, "refresh": refresh, "reconciled": reconciled, "second": second,
            "repro": repro}


def test_reconcile_prints_the_drift_distance_relgrade_drift_prints(refreshed):
    # one definition: the same set and log give the same total variation and interval
    drift = json.loads((refreshed["exp"] / "data/queries/drift.json").read_text())
    check = json.loads(refreshed["reconciled"].stdout)["checks"]["drift"]
    assert check["distance"] == drift["total_variation"]
    assert check["distance_interval"] == drift["interval"]
    tv = f"{drift['total_variation']:.3f}"
    assert f"total variation {tv} " in refreshed["drift"].stdout
    assert f"(total variation, as relgrade drift) {tv} " in check["text"]


def test_drift_flags_a_tail_grown_by_twenty_points(refreshed):
    strata, counts = refreshed["strata"], refreshed["counts"]
    # by hand: the committed log has head 1221, torso 712, tail 463 of 2396 issued (the
    # sampler's cut, docs/query-sampling.md); the set's weights add up to the same strata
    traffic = {s: sum(c for q, c in counts.items() if strata[querylog.normalize_query(q)] == s)
               for s in querylog.STRATA}
    assert traffic["head"] == 1221 and traffic["torso"] == 712
    total = sum(traffic.values())
    now = {s: traffic[s] / total for s in querylog.STRATA}
    was = {"head": 1221 / 2396, "torso": 712 / 2396, "tail": 463 / 2396}
    assert now["tail"] - was["tail"] == pytest.approx(0.20, abs=0.005)
    out = json.loads((refreshed["exp"] / "data/queries/drift.json").read_text())
    shares = {r["bucket"]: r for r in out["shares"]}
    for s in querylog.STRATA:
        assert shares[s]["set"] == pytest.approx(was[s], abs=1e-12)
        assert shares[s]["log"] == pytest.approx(now[s], abs=1e-12)
    assert shares["new"]["log"] == 0.0
    tv = sum(abs(now[s] - was[s]) for s in querylog.STRATA) / 2
    assert out["total_variation"] == pytest.approx(tv, abs=1e-12)
    assert out["flagged"] is True and out["threshold"] == 0.1
    low, high = out["interval"]
    assert low < tv < high and high - low < 0.05
    # the recommended slice: ceil(TV * 12) of 12 queries
    assert out["slice_queries"] == math.ceil(tv * 12) == 3
    stdout = refreshed["drift"].stdout
    assert f"tail     19.3%  {100 * now['tail']:.1f}%" in stdout
    assert (f"DRIFT: {100 * tv:.1f}% of the traffic changed stratum, above drift.max_shift 0.1: "
            f"refresh 3 of 12 queries: relgrade queries refresh --experiment {EXP} --log {LOG} "
            "--share 0.25") in stdout


def test_the_refresh_replaces_a_quarter_of_the_set_and_keeps_the_rest(refreshed):
    exp, before = refreshed["exp"], refreshed["before"]["set"]
    after = pd.read_csv(exp / "data/input/queries.sampled.tsv", sep="\t")
    manifest = json.loads((exp / "data/queries/sample.json").read_text())
    block = manifest["refresh"]
    assert (block["share"], block["slice"], block["replaced"], block["kept"]) == (0.25, 3, 3, 9)
    assert len(after) == 12
    kept = set(before["query_id"]) & set(after["query_id"])
    assert len(kept) == 9
    assert sorted(set(before["query_id"]) - kept) == block["retired"]
    assert sorted(set(after["query_id"]) - kept) == block["added"]
    # the added queries come from the current log and were not in the set
    log = pd.read_csv(refreshed["root"] / LOG, sep="\t")
    assert set(after.loc[after["query_id"].isin(block["added"]), "query"]) <= set(log["query"])
    # the set weighted against the current log: the weights add up to its traffic
    assert after["weight"].sum() == pytest.approx(log["count"].sum())
    assert manifest["log"] == "data/input/2027-q1.tsv"
    previous = pd.read_csv(exp / "data/input/queries.previous.tsv", sep="\t")
    pd.testing.assert_frame_equal(previous, before)
    for line in ("refresh: 3 of 12 queries replaced from logs/2027-q1.tsv (share 0.25); 9 kept",
                 f"  retired: {', '.join(block['retired'])}",
                 f"next: dvc repro {EXP}/dvc.yaml"):
        assert line in refreshed["refresh"].stdout
    # the refresh left the pipeline rendered: its check passes
    tiny.run(refreshed["root"], "relgrade", "pipeline", "check", "--experiment", EXP)


def test_new_queries_are_pending_work_never_an_error(refreshed):
    second = refreshed["second"]
    block = json.loads((refreshed["exp"] / "data/queries/sample.json").read_text())["refresh"]
    stops = [next(x for x in d.stderr.splitlines() if x.startswith("Pending: "))
             for d in second[:-1]]
    assert all("Error" not in d.stderr for d in second)
    assert any(s.startswith(
        f"Pending: intents: 3 queries added by the query-set refresh need an intent "
        f"({', '.join(block['added'])}); the lines of 3 retired queries go "
        f"({', '.join(block['retired'])}): edit {EXP}/data/input/intents.tsv, then run `relgrade "
        f"intents review --experiment {EXP} --reviewer auditor-b`") for s in stops)
    assert any(s.startswith("Pending: grading: ") for s in stops)
    # status names the intents owed while they are owed, and prices the grading owed
    at_intents = refreshed["status"][[s.startswith("Pending: intents:") for s in stops].index(True)]
    assert (f"refresh: 3 of 12 queries replaced from data/input/2027-q1.tsv (share 0.25); added "
            f"{', '.join(block['added'])}; intents owed for {', '.join(block['added'])}; the "
            f"intents of retired {', '.join(block['retired'])} go: edit the intent table, then "
            f"run `relgrade intents review --experiment {EXP} --reviewer auditor-b`") in at_intents
    at_grading = refreshed["status"][[s.startswith("Pending: grading: ") for s in stops].index(True)]
    assert re.search(r"judging cost: \d+ judgments spent \(\d+ model calls\), [1-9]\d* pending",
                     at_grading)


def test_the_report_sets_the_old_and_the_new_query_set_side_by_side(refreshed):
    exp, first = refreshed["exp"], refreshed["before"]["record"]
    record = json.loads((exp / "data/key/record.json").read_text())
    kept = json.loads((exp / "data/key/previous/record.json").read_text())
    assert kept["key_sha256"] == first["key_sha256"] != record["key_sha256"]
    md = (exp / "metrics/report.md").read_text()
    section = md.split("## Translation from the previous key\n", 1)[1].split("\n## ", 1)[0]
    assert f"| previous | `{kept['key_sha256']}` | {kept['pool_version']} |" in section
    assert f"| current | `{record['key_sha256']}` | {record['pool_version']} |" in section
    assert "(9 queries scored under both keys)" in section.replace("\n", " ")
    for arm in ("bm25", "tfidf", "random"):
        assert re.search(rf"^\| {arm} \| \d\.\d{{4}} \| \d\.\d{{4}} \| [+-]\d\.\d{{4}} \|",
                         section, re.M), arm
    assert "translation from the previous key" in refreshed["second"][-1].stdout
