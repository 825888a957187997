"""End to end, in a temporary git repository: arms join after the key froze.

The tiny experiment's key is frozen from grades made by command graders (the key grader a
person answering through a command); then two new arms are named under ``holes.arms``.
``dvc repro`` stops at the holes' pending work, ``relgrade status`` says what each arm's holes
owe (priced: the model grader in calls, people in annotator-hours), the model grader grades
with the command ``dvc repro`` prints and people's grades arrive through ``relgrade packets
export`` and ``relgrade grade import``; ``dvc repro`` completes. The key and every old arm's
numbers are byte-identical; each new arm has its corrected estimate, decision file and report
section; the model grader is lenient on the second arm's holes only, so that arm's level claim
is refused, in its decision file, its report section and the status.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_bank import _grade, _params, _pending_line, _reviewed

pytestmark = [pytest.mark.slow]

# queries whose new-arm list starts with a chunk the pool never held (another topic's answer,
# grade 2 by the graders' truth): their holes
HOLE_QUERIES = ["kw01", "kw02", "kw03", "kw04", "qu01", "qu02", "qu03", "qu04"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ndcg(ranked, grades, k=10):
    """nDCG@k with gains 2^g - 1 and discount 1/log2(rank + 1), by hand."""
    dcg = sum((2 ** grades.get(c, 0) - 1) / math.log2(i + 2) for i, c in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _new_run(root, arm="fresh", hole="answer"):
    """A new arm's run: per query the lexical arm's first 4 pooled chunks, and for the
    queries of HOLE_QUERIES first a chunk the pool never held (another topic's ``hole``
    chunk): its holes. Returns query -> ranked chunk ids."""
    pool = pd.read_parquet(root / "data/pool/pool.parquet")
    pooled = set(zip(pool.query_id, pool.chunk_id))
    lexical = {}
    for line in (root / "data/input/runs/lexical.trec").read_text().splitlines():
        q, _, c, *_ = line.split()
        lexical.setdefault(q, []).append(c)
    ranked = {}
    for q, *_ in tiny.TOPICS:
        head = [c for c in lexical[q] if (q, c) in pooled][:4]
        if q in HOLE_QUERIES:
            other = next(c for c in (f"{t}-{hole}" for t, *_ in tiny.TOPICS)
                         if (q, c) not in pooled and c not in head)
            head = [other, *head]
        ranked[q] = head
    (root / f"data/input/runs/{arm}.trec").write_text("".join(
        f"{q} Q0 {c} {i + 1} {10 - i} {arm}\n" for q, cs in ranked.items()
        for i, c in enumerate(cs)))
    return ranked


def _a_person(params):
    """grader-a, the key grader, is a person (answering through the fixture's command)."""
    params["graders"]["grader-a"].update(kind="human", family="human")
    params["graders"]["grader-a"].pop("model", None)


def _status(root, *args):
    return json.loads(tiny.run(root, "relgrade", "status", "--json", *args).stdout)


def test_new_arms_on_a_frozen_key_get_their_corrected_estimates_and_change_nothing_else(
        tmp_path):
    root = tmp_path
    _reviewed(root)
    _params(root, _a_person)
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0 and _pending_line(proc), proc.stderr
    _grade(root)
    full = tiny.run(root, "dvc", "repro")
    # compare names its steps always; the data stages only past QUIET_SECONDS of wall time,
    # which a loaded machine can reach, so their lines are not asserted here
    assert re.search(r"^compare: step 1/3: ", full.stderr, re.M), full.stderr
    record = json.loads((root / "data/key/record.json").read_text())
    kept = sorted(p for d in ("data/key", "metrics/arms", "metrics/decision")
                  for p in (root / d).glob("*") if p.is_file())
    kept.append(root / "metrics/comparisons.json")
    before = {p: _sha(p) for p in kept}

    ranked = _new_run(root)
    skewed = _new_run(root, "skewed", hole="miss1")   # its holes: near misses, truth 0

    # a person who graded no pair of the key cannot be the holes' people: the transport check
    # would have no reference side; refused before anyone grades a hole, nothing written
    text = (root / "params.yaml").read_text()
    declared = yaml.safe_load(text)
    declared["graders"]["expert-d"] = {**declared["graders"]["grader-a"], "role": "auditor"}
    (root / "params.yaml").write_text(yaml.safe_dump(declared, sort_keys=False))
    edited = (root / "params.yaml").read_bytes()
    refused = tiny.run(root, "relgrade", "arm", "add", "fresh", "--run",
                       "data/input/runs/fresh.trec", "--depth", "5", "--holes",
                       "--model-grader", "auditor-b", "--human-grader", "expert-d",
                       "--human-fraction", "0.5", check=False)
    errors = [x for x in (refused.stdout + refused.stderr).splitlines()
              if x.startswith("Error: ")]
    assert refused.returncode == 1 and len(errors) == 1, refused.stdout + refused.stderr
    grades_table = yaml.safe_load(text)["paths"]["grades"]
    assert errors[0].startswith(
        f"Error: {grades_table}: auditor-b and expert-d: no pair of the old arms was graded "
        "by both graders"), errors[0]
    assert (root / "params.yaml").read_bytes() == edited
    (root / "params.yaml").write_text(text)

    # a share of the 8 queries with holes too small for the stage's sample (2 of 8, the
    # jackknife needs 3) is refused now, not at the next repro; nothing written
    dvc_yaml = (root / "dvc.yaml").read_bytes()
    small = tiny.run(root, "relgrade", "arm", "add", "fresh", "--run",
                     "data/input/runs/fresh.trec", "--depth", "5", "--holes", "--model-grader",
                     "auditor-b", "--human-grader", "grader-a", "--human-fraction", "0.2",
                     check=False)
    assert small.returncode == 1 and small.stdout == "", small.stdout + small.stderr
    assert small.stderr.startswith(
        "Error: the human sample of holes needs at least 3 queries (jackknife)"), small.stderr
    assert "2 of 8 queries with holes" in small.stderr and "holes.human_fraction" in small.stderr
    assert (root / "params.yaml").read_text() == text
    assert (root / "dvc.yaml").read_bytes() == dvc_yaml

    # the command a user types: the first arm makes the holes section, the second joins it
    first = tiny.run(root, "relgrade", "arm", "add", "fresh", "--run",
                     "data/input/runs/fresh.trec", "--depth", "5", "--holes", "--model-grader",
                     "auditor-b", "--human-grader", "grader-a", "--human-fraction", "0.5")
    assert "the pool and the key stay as they are" in first.stdout, first.stdout
    assert "holes fresh: 8 holes in 8 queries; people's sample: 4 queries" in first.stdout
    second = tiny.run(root, "relgrade", "arm", "add", "skewed", "--run",
                      "data/input/runs/skewed.trec", "--depth", "5", "--holes")
    holes = yaml.safe_load((root / "params.yaml").read_text())["holes"]
    assert holes == {"arms": {arm: {"kind": "file", "depth": 5,
                                    "source": f"data/input/runs/{arm}.trec"}
                              for arm in ("fresh", "skewed")},
                     "model_grader": "auditor-b", "human_grader": "grader-a",
                     "human_fraction": 0.5}

    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    line, = [x for x in (proc.stderr + proc.stdout).splitlines() if x.startswith("Pending:")]
    # people owe the holes of the sampled queries, named as such (not "audit queries")
    assert "(sampled quer" in line and "audit quer" not in line, line

    # the status says what each arm's holes owe: the model grader every hole (in calls),
    # people every hole of the sampled queries (in annotator-hours, 30 s a judgment)
    owed = _status(root)["holes"]
    assert owed["state"] == "owed"
    samples = {}
    for arm in ("fresh", "skewed"):
        a = owed["arms"][arm]
        samples[arm] = a["sampled_queries"]
        assert (a["holes"], a["hole_queries"], a["sampled_holes"]) == (8, 8, 4)
        assert len(a["sampled_queries"]) == 4 and set(a["sampled_queries"]) <= set(HOLE_QUERIES)
        assert a["owed"] == {"auditor-b": 8, "grader-a": 4}
        people, model = a["cost"]["graders"]["grader-a"], a["cost"]["graders"]["auditor-b"]
        assert (model["worker"], model["pending_calls"]) == ("model", 8)
        assert (people["worker"], people["pending_hours"]) == ("person", 4 * 30 / 3600)
        assert a["verdict"] == {"state": "not computed"}
    # the folder's whole work: a query sampled for either arm holds both arms' holes
    sampled = set(samples["fresh"]) | set(samples["skewed"])
    assert owed["cost"]["graders"]["auditor-b"]["pending_calls"] == 16
    assert owed["cost"]["graders"]["grader-a"]["pending_hours"] == pytest.approx(
        2 * len(sampled) * 30 / 3600)
    assert f"grading: 16 pairs need auditor-b (16 new), {2 * len(sampled)} need grader-a" in line
    # arm add and the status text say what the stage asks of the whole folder, as the JSON
    together = ("holes, every arm together (what the holes stage asks: a pair two arms share "
                "once, people every hole of a query sampled for any arm): auditor-b (model) "
                f"owes 16 (16 model calls), grader-a (people) owes {2 * len(sampled)} "
                f"({2 * len(sampled) * 30 / 3600:.2f} annotator-hours)")
    assert "  " + together in second.stdout.splitlines()[-3:], second.stdout
    plain = tiny.run(root, "relgrade", "status").stdout
    assert together in plain.splitlines()
    # the status's judging cost is the key's: the holes' stand beside it, counted alike
    assert (f"  holes (beside the key's judging cost above): {16 + 2 * len(sampled)} pending "
            f"({2 * len(sampled) * 30 / 3600:.2f} annotator-hours + 16 model calls), as the "
            "holes stage asks") in plain.splitlines()
    assert ("holes fresh: 8 holes in 8 queries; people's sample: 4 queries "
            f"({', '.join(samples['fresh'])}), 4 holes; auditor-b (model) owes 8 (8 model "
            "calls), grader-a (people) owes 4 (0.03 annotator-hours)") in plain
    # the holes' folder is no experiment of its own: its status is the parent's
    proc = tiny.run(root, "relgrade", "status", "--experiment", "data/holes", check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "Error: data/holes/params.yaml: is the holes folder of another experiment "
        "(paths.holes_work there), not an experiment with a key of its own. Run "
        "`relgrade status --experiment .`: it says what the holes owe"]

    commands = re.findall(r"`(relgrade grade run [^`]+)`", line)
    assert sorted(commands) == [
        "relgrade grade run --grader auditor-b --experiment data/holes",
        "relgrade grade run --grader grader-a --experiment data/holes"]
    # the model grader is lenient on the skewed arm's holes only
    lenient = root / "lenient.txt"
    lenient.write_text("".join(f"{q} {cs[0]}\n" for q, cs in skewed.items()
                               if q in HOLE_QUERIES))
    tiny.run(root, *shlex.split(commands[0]), "--no-progress",
             env_extra={"TINY_GRADER_LENIENT_ON": str(lenient)})
    # people grade from a file: the packets they owe out, their grades in
    tiny.run(root, "relgrade", "packets", "export", "--experiment", "data/holes", "--role",
             "auditor", "--grader", "grader-a", "--out", "people.jsonl")
    packets = [json.loads(x) for x in (root / "people.jsonl").read_text().splitlines()]
    pairs = [(p["query_id"], c["chunk_id"]) for p in packets for b in p["batches"] for c in b]
    assert sorted({q for q, _ in pairs}) == sorted(sampled) and len(pairs) == 2 * len(sampled)
    (root / "people-grades.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in tiny.grade_rows(pairs)))
    tiny.run(root, "relgrade", "grade", "import", "--experiment", "data/holes", "--grader",
             "grader-a", "people-grades.jsonl")
    done = tiny.run(root, "dvc", "repro")
    assert "holes nDCG" in done.stdout

    assert {p: _sha(p) for p in kept} == before          # the key and the old arms as they were
    assert json.loads((root / "data/key/record.json").read_text()) == record
    holes = json.loads((root / "metrics/holes.json").read_text())
    assert holes["key_sha256"] == record["key_sha256"]
    fresh = holes["arms"]["fresh"]
    assert (fresh["holes"], fresh["hole_queries"]) == (8, 8)
    assert fresh["hole_rate"] == pytest.approx(8 / 56)     # 8 lists of 5, 4 of 4
    assert fresh["sample"] == samples["fresh"]
    # both graders grade fresh's holes by the same truth: the model-only value is the new
    # arm's nDCG@10 under the truth with every hole graded, by hand; holes as not relevant
    # score lower
    key = pd.read_json(root / "data/key/key.jsonl", lines=True, dtype={"query_id": str})
    graded = {q: dict(zip(g.chunk_id, g.grade)) for q, g in key.groupby("query_id")}
    truth = [_ndcg(cs, graded.get(q, {}) | {c: tiny.truth(c) for c in cs[:1]
                                              if q in HOLE_QUERIES})
             for q, cs in sorted(ranked.items())]
    as_is = [_ndcg(cs, graded.get(q, {})) for q, cs in sorted(ranked.items())]
    est = fresh["estimates"]
    assert est["model-only"]["estimate"] == pytest.approx(sum(truth) / 12, abs=1e-12)
    assert est["key-only"]["estimate"] == pytest.approx(sum(as_is) / 12, abs=1e-12)
    assert est["key-only"]["estimate"] < est["model-only"]["estimate"]
    ppi = est["ppi++"]
    assert ppi["low"] <= sum(truth) / 12 <= ppi["high"]
    assert fresh["level_claim"] == "level claim holds"      # the same bias on both sides
    assert {r["arm_b"] for r in fresh["comparisons"]} == set(tiny.ARMS)

    # skewed: the model grades its near misses 2, people 0; on the old arms' pairs the two
    # agree, so the bias differs by 2 grades and the level claim is refused
    lax = holes["arms"]["skewed"]
    assert (lax["transport"]["bias_old"], lax["transport"]["bias_new"]) == (0.0, 2.0)
    assert lax["transport"]["refuse"] is True
    assert lax["level_claim"] == "level claim refused"
    assert lax["estimates"]["model-only"]["estimate"] > lax["estimates"]["key-only"]["estimate"]

    decision = json.loads((root / "metrics/decision/fresh.json").read_text())
    assert decision["mean"] == ppi["estimate"]
    assert decision["key"] == record["key_sha256"][:12]
    assert decision["level_claim"] == "level claim holds"
    vs, = [r for r in fresh["comparisons"] if r["arm_b"] == "lexical"]   # metrics.baseline
    assert (decision["baseline"], decision["delta"], decision["p_holm"]) == (
        "lexical", vs["estimate"], vs["p_holm"])
    assert decision["judged"] == pytest.approx(1 - 8 / 56)   # what the key graded of its 56
    # its rank among the old arms and itself: the record's rank-set, every arm in it, the
    # new arm's estimate the corrected one; the old arms' files keep their own ranks
    ranks = fresh["rank_set"]
    assert set(ranks["arms"]) == {*tiny.ARMS, "fresh"}
    assert ranks["arms"]["fresh"]["estimate"] == ppi["estimate"]
    assert (decision["rank_low"], decision["rank_high"]) == (
        ranks["arms"]["fresh"]["rank_low"], ranks["arms"]["fresh"]["rank_high"])
    assert 1 <= decision["rank_low"] <= decision["rank_high"] <= len(tiny.ARMS) + 1
    assert holes["design"]["rank_set_streams"]["fresh"] == "holes-rank-sets-fresh"
    # its comparisons are verdicts on the primary measure: in the report and verdicts.sh
    text = (root / "metrics/report.md").read_text()
    verdicts = text[text.index("## Verdicts\n"):]
    verdicts = verdicts[:verdicts.index("\n## ", 1)]
    mine = [x for x in verdicts.splitlines() if "fresh joined after the key froze" in x]
    assert len(mine) == len(tiny.ARMS), text
    base = [x for x in mine if "lexical" in x]
    assert len(base) == 1 and (
        f"p={vs['p_holm']:.2g} after Holm (fresh joined after the key froze: PPI++ on its "
        f"holes, Holm over its {len(tiny.ARMS)} comparisons with the old arms; level claim "
        "holds)") in base[0]
    script = Path(__file__).resolve().parents[1] / "tools/verdicts.sh"
    printed = tiny.run(root, "bash", str(script), str(root)).stdout
    assert base[0][2:] in printed
    shown = tiny.run(root, "relgrade", "metrics", "show").stdout
    assert "undefined" not in shown and re.search(r"^fresh +nDCG", shown, re.M), shown
    refused = json.loads((root / "metrics/decision/skewed.json").read_text())
    assert refused["level_claim"] == "level claim refused"
    assert refused["mean"] == lax["estimates"]["ppi++"]["estimate"]
    report = (root / "metrics/report.md").read_text()
    assert "## New arm fresh on the frozen key" in report
    assert "- rank among the old arms: " in report and "tied groups, best first: " in report
    section = report[report.index("## New arm skewed on the frozen key"):]
    assert "- **level claim refused**: the model grader's bias on the sampled holes " \
           "(2.000 grade) differs from its bias on the old arms' pairs (0.000) by 2.000" in section
    params = yaml.safe_load((root / "data/holes/params.yaml").read_text())
    assert params["graders"]["auditor-b"]["role"] == "grader"

    # the status: nothing owed, each arm's level claim as computed
    after = _status(root)["holes"]
    assert after["state"] == "graded" and after["commands"] == {}
    assert after["arms"]["fresh"]["verdict"]["state"] == "computed"
    assert after["arms"]["fresh"]["verdict"]["level_claim"] == "level claim holds"
    assert after["arms"]["skewed"]["verdict"]["level_claim"] == "level claim refused"
    assert after["arms"]["skewed"]["owed"] == {"auditor-b": 0, "grader-a": 0}
    plain = tiny.run(root, "relgrade", "status").stdout
    assert f"holes skewed: level claim refused: {lax['measure']} " in plain

    # the people's sample is locked once they graded it: a fraction that would move fresh's
    # sample is refused by the stage, naming the record, and nothing of the holes changes
    text = (root / "params.yaml").read_text()
    assert "human_fraction: 0.5" in text
    record_bytes = (root / "metrics/holes.json").read_bytes()
    (root / "params.yaml").write_text(text.replace("human_fraction: 0.5",
                                                   "human_fraction: 0.9", 1))
    moved = tiny.run(root, "dvc", "repro", check=False)
    errors = [x for x in (moved.stdout + moved.stderr).splitlines() if x.startswith("Error: ")]
    assert moved.returncode != 0 and len(errors) == 1, moved.stdout + moved.stderr
    assert errors[0].startswith("Error: ") and "data/holes/samples.json: holes.arms." in \
        errors[0] and "human sample of holes would move after people graded it" in errors[0]
    assert (root / "metrics/holes.json").read_bytes() == record_bytes
    (root / "params.yaml").write_text(text)
