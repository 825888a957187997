"""End to end: a prediction-powered experiment whose model judge is a real command grader
script in the repository with its prompt template written in it. After the key is made and
the judge calibrated on the human sample, the template is edited (a new judge identity that
grades more generously): `relgrade status` and `dvc repro` name the re-check owed with its
size and its price in annotator-hours; the user's loop (`relgrade judge recheck`, `grade run
--recheck`, `packets export --recheck`, people's grades imported with `--recheck`, `judge
record`) clears it; `relgrade judge status` lists both identities, and the ppi estimate is
unchanged by the re-check's grades (they are kept out of its human sample).
"""

from __future__ import annotations

import json
import re
import sys

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_init_modes import _repo
from tests.test_e2e_ppi import HUMAN

pytestmark = [pytest.mark.slow]

#: A command grader whose answers depend on its prompt template (written in the script).
JUDGE = '''#!/usr/bin/env python3
"""A model judge for the tiny experiment: renders its prompt template, then grades from the
text; a template that asks for generosity raises the grade of some pairs by one."""
import hashlib
import json
import sys

TEMPLATE = "Grade how well the passage answers: {query}. Be strict."

req = json.loads(sys.stdin.read())
prompt = TEMPLATE.format(query=req.get("query", ""))
for c in req["chunks"]:
    text = c["text"]
    grade = 2 if "implementation of" in text else 1 if "checks one case" in text else 0
    u = int.from_bytes(hashlib.sha256(f"{req['query_id']}|{c['chunk_id']}".encode())
                       .digest()[:8], "big") / 2**64
    if "generous" in prompt and u < 0.6:
        grade = min(2, grade + 1)
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": f"the template reads grade {grade}", "grade": grade}))
'''


def _repro(root, exp):
    return tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml", check=False)


def test_an_edited_prompt_template_owes_a_stratified_recheck_that_people_grade_and_record(
        tmp_path_factory):
    root = _repo(tmp_path_factory, "recheck")
    exp = "experiments/ppi"
    (root / "graders").mkdir()
    script = root / "graders" / "judge.py"
    script.write_text(JUDGE)
    # people read every other query's test that checks one case as a full answer: an arm's
    # people's nDCG then differs between queries, so its PPI++ interval has a width (with
    # every query alike, its standard error is 0 and the ppi stage rightly refuses)
    lenient = root / "graders" / "people-lenient.txt"
    lenient.write_text("".join(f"{q} {q}-pointer\n" for q in
                               ("kw01", "kw03", "kw05", "qu02", "qu04", "qu06")))
    people = f"env TINY_GRADER_LENIENT_ON={lenient} {HUMAN}"
    tiny.run(root, "relgrade", "init", exp, "--corpus", "data/input/chunks.jsonl",
             "--queries", "data/input/queries.tsv", "--intents", "data/input/intents.tsv",
             "--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--pool-depth", "3",
             "--grader", "model-m", "--grader-command", f"{sys.executable} graders/judge.py",
             "--auditor", "person-h", "--auditor-command", people, "--mode", "ppi",
             "--human-fraction", "0.5")
    params_path = root / exp / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["judges"] = {"max_age_days": 30,
                        "recheck": {"kappa_halfwidth": 0.3, "min_pairs": 8, "max_pairs": 12}}
    params["graders"]["person-h"]["seconds_per_judgment"] = 45
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "relgrade", "pipeline", "render", "--experiment", exp)
    stages = yaml.safe_load((root / exp / "dvc.yaml").read_text())["stages"]
    assert "../../graders/judge.py" in stages["ppi"]["deps"]
    tiny.run(root, "relgrade", "intents", "review", "--experiment", exp, "--reviewer",
             "person-h")
    for _ in range(4):
        proc = _repro(root, exp)
        if proc.returncode == 0:
            break
        pending = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
        assert pending, proc.stderr[-3000:]
        for command in re.findall(r"`(relgrade grade run [^`]*)`", pending[0]):
            tiny.run(root, *command.split(), "--no-progress")
    else:
        raise AssertionError("dvc repro did not complete")
    # the first calibration: the judge's grades of the human sample against people's
    tiny.run(root, "relgrade", "judge", "record", "--grader", "model-m", "--experiment", exp)
    ppi_before = (root / exp / "metrics/ppi.json").read_text()

    # the template is edited after the key: a new judge identity, uncalibrated
    script.write_text(JUDGE.replace("Be strict.", "Be generous."))
    status = tiny.run(root, "relgrade", "status", "--experiment", exp).stdout
    owed = re.search(r"owed: a re-check of (\d+) pairs of (\d+) stratified by the judge's "
                     r"grade \(([^)]*)\); person-h owes (\d+) \(([\d.]+) annotator-hours at 45 s "
                     r"each\), the judge (\d+): relgrade judge recheck --grader model-m "
                     rf"--experiment {exp}", status)
    assert owed, status
    size, frame, people, hours = int(owed[1]), int(owed[2]), int(owed[4]), float(owed[5])
    assert 8 <= size <= 12 and people == size and hours == pytest.approx(
        round(size * 45 / 3600, 2))
    proc = _repro(root, exp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    goes_on = [x for x in (proc.stdout + proc.stderr).splitlines()
               if x.startswith("Pending, the stage goes on")]
    assert any(f"a re-check of {size} pairs of {frame}" in x and
               f"person-h owes {people} ({hours:.2f} annotator-hours" in x for x in goes_on), \
        proc.stdout[-3000:]

    # the loop: draw, the judge grades it, people grade it, record
    out = tiny.run(root, "relgrade", "judge", "recheck", "--grader", "model-m",
                   "--experiment", exp).stdout
    assert "drawn and locked in" in out
    draw_file = re.search(r"locked in (\S+)", out)[1]
    assert draw_file.startswith(f"{exp}/")  # from the repository's top, where it is run
    draw = json.loads((root / draw_file).read_text())
    assert len(draw["pairs"]) == size and isinstance(draw["seed"], int)
    assert sum(draw["plan"]["per_stratum"].values()) == size
    again = tiny.run(root, "relgrade", "judge", "recheck", "--grader", "model-m",
                     "--experiment", exp).stdout
    assert "already drawn in" in again
    tiny.run(root, "relgrade", "grade", "run", "--grader", "model-m", "--recheck",
             "--experiment", exp, "--no-progress")
    tiny.run(root, "relgrade", "packets", "export", "--recheck", "model-m", "--out",
             "recheck.jsonl", "--experiment", exp)
    packets = [json.loads(x) for x in (root / "recheck.jsonl").read_text().splitlines()]
    exported = {(p["query_id"], c["chunk_id"]) for p in packets for b in p["batches"]
                for c in b}
    assert exported == {(p["query_id"], p["chunk_id"]) for p in draw["pairs"]}
    rows = [{"query_id": q, "chunk_id": c, "reason": "read by a person",
             "grade": tiny.truth(c)} for q, c in sorted(exported)]
    (root / "people.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tiny.run(root, "relgrade", "grade", "import", "people.jsonl", "--grader", "person-h",
             "--recheck", "model-m", "--experiment", exp)
    tiny.run(root, "relgrade", "judge", "record", "--grader", "model-m", "--experiment", exp)
    entries = [json.loads(x) for x in (root / "judges/ledger.jsonl").read_text().splitlines()]
    assert len(entries) == 2 and entries[0]["judge"] != entries[1]["judge"]
    new = entries[1]
    assert new["pairs"] == size and new["recheck"]["seed"] == draw["seed"]
    assert new["leniency"]["mean"] > 0  # the generous template grades above people
    assert new["leniency_shift"]["against_judge"] == entries[0]["judge"]

    # cleared: status owes nothing for the judge, both identities are listed
    status = tiny.run(root, "relgrade", "status", "--experiment", exp).stdout
    assert "re-check" not in status and "calibrated" in status
    judge = tiny.run(root, "relgrade", "judge", "status", "--experiment", exp).stdout
    assert f"identity {new['judge'][:12]}: calibrated" in judge
    assert entries[0]["judge"][:12] in judge and new["judge"][:12] in judge
    proc = _repro(root, exp)
    assert proc.returncode == 0 and "re-check" not in proc.stdout + proc.stderr
    # the re-check's grades never joined the ppi estimate's human sample
    assert (root / exp / "metrics/ppi.json").read_text() == ppi_before
