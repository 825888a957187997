"""End to end: in ppi mode the people's grades of the human sample fall under the void rule.

A ppi experiment made by `relgrade init --mode ppi` (tests/test_e2e_ppi.py's) is run by the
user's loop to its report. Then, as a new user did: the human grader's folder is deleted and
grades with some flipped are imported under the same name, and `dvc repro` runs again. The
ppi stage refuses (the ledger records the human key its estimates used) and writes nothing;
with `grading.post_hoc: true` it runs, and every ppi number is labelled post-hoc. A renamed
human grader with the same grades is the same human key; the ledger cut of its line is refused.
"""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_init_modes import _loop
from tests.test_e2e_ppi import EXP

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def reported(tmp_path_factory, ppi_graded):
    root = tiny.copy_repo(ppi_graded / "repo", tmp_path_factory.mktemp("ppi-ledger"))
    _loop(root, EXP, rounds=3)
    tiny.run(root, "git", "add", "-A")
    tiny.run(root, "git", "commit", "-q", "-m", "the ppi experiment, reported")
    return root


def _flipped(root, folder):
    """person-h's grades of round 1 with the grades of the file's first three rows flipped
    (0 -> 2, 1 -> 0, 2 -> 0), written outside the grade folder; those pairs."""
    rows = [json.loads(x) for x in (folder / "data/grades/person-h/round-1.jsonl")
            .read_text().splitlines() if x.strip()]
    flip = {0: 2, 1: 0, 2: 0}
    pairs = []
    for r in rows[:3]:
        r["grade"] = flip[int(r["grade"])]
        pairs.append(f"{r['query_id']}/{r['chunk_id']}")
    path = root / "flipped.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, pairs


def test_a_reimported_human_grade_folder_is_void_then_post_hoc_when_declared(
        reported, tmp_path_factory):
    root = tiny.copy_repo(reported, tmp_path_factory.mktemp("ppi-void"))
    folder = root / EXP
    ledger_path = folder / "data/ledger.jsonl"
    human = [json.loads(x) for x in ledger_path.read_text().splitlines()
             if json.loads(x).get("kind") == "ppi-human"]
    assert len(human) == 1
    kept = folder / "data/ledger.ppi-human" / human[0]["key_sha256"]
    # the human key kept beside the ledger: its bytes hash to the entry's hash
    data = kept.with_suffix(".jsonl").read_bytes()
    assert hashlib.sha256(data).hexdigest() == human[0]["key_sha256"]
    assert json.loads(kept.with_suffix(".json").read_text())["key_sha256"] == \
        human[0]["key_sha256"]
    assert "post_hoc" not in json.loads((folder / "metrics/ppi.json").read_text())

    # the trial's commands: delete the human grader's folder, import other grades, repro
    flipped, pairs = _flipped(root, folder)
    shutil.rmtree(folder / "data/grades/person-h")
    tiny.run(root, "relgrade", "grade", "import", str(flipped), "--grader", "person-h",
             "--experiment", EXP)
    before = {p: p.read_bytes() for p in (ledger_path, folder / "metrics/ppi.json",
                                          folder / "metrics/comparisons.json",
                                          folder / "metrics/report.md")}
    proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert proc.returncode != 0
    errors = [x for x in proc.stderr.splitlines() if x.startswith("Error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert errors[0].startswith("Error: void: data/ledger.jsonl records human key "
                                f"{human[0]['key_sha256']} as the one the ppi stage "
                                "used on pool ")
    assert "3 pairs differ: a grade changed on unchanged content, or a pair read that was " \
        "not, or not read that was: " in errors[0]
    assert all(p in errors[0] for p in pairs)
    assert "`grading.round`" in errors[0] and "`grading.post_hoc: true`" in errors[0]
    assert "Traceback" not in proc.stderr
    for path, data in before.items():  # nothing written
        assert path.read_bytes() == data, path

    # declared post-hoc: it runs, and every ppi number says so
    params_path = folder / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["grading"]["post_hoc"] = True
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml")
    ppi = json.loads((folder / "metrics/ppi.json").read_text())
    assert ppi["post_hoc"] is True and ppi["human_key_sha256"] != human[0]["key_sha256"]
    comparisons = json.loads((folder / "metrics/comparisons.json").read_text())
    assert comparisons["post_hoc"] is True and comparisons["estimator"]["post_hoc"]
    assert comparisons["verdicts"] and all(v.startswith("post-hoc: ")
                                           for v in comparisons["verdicts"])
    for p in (folder / "metrics/decision").glob("*.json"):
        assert json.loads(p.read_text())["post_hoc"] is True
    report = (folder / "metrics/report.md").read_text()
    verdicts = report.split("## Verdicts")[1].split("\n## ")[0]
    lines = [x for x in verdicts.splitlines() if x.startswith("- ")]
    assert lines and all(x.startswith("- post-hoc: ") for x in lines)
    assert "yes: the human sample's grades changed after the ppi estimates were seen" in report
    # the decision human key stays the first one: the ledger adds the post-hoc use
    entries = [json.loads(x) for x in ledger_path.read_text().splitlines()]
    assert [e["key_sha256"] for e in entries if e.get("kind") == "ppi-human"] == [
        human[0]["key_sha256"], ppi["human_key_sha256"]]


def test_a_ledger_cut_of_its_human_key_line_is_refused_naming_the_kept_record(
        reported, tmp_path_factory):
    root = tiny.copy_repo(reported, tmp_path_factory.mktemp("ppi-trunc"))
    folder = root / EXP
    ledger_path = folder / "data/ledger.jsonl"
    lines = ledger_path.read_text().splitlines(keepends=True)
    kept = [x for x in lines if json.loads(x).get("kind") != "ppi-human"]
    assert len(kept) == len(lines) - 1
    human = next(json.loads(x) for x in lines if x not in kept)["key_sha256"]
    ledger_path.write_text("".join(kept))  # the human key's line cut off
    tiny.run(root, "git", "commit", "-q", "-am", "the ledger truncated")  # and committed
    params_path = folder / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["grading"]["post_hoc"] = True  # no way around a missing entry
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    proc = tiny.run(root, "dvc", "repro", "--force", "-s", f"{EXP}/dvc.yaml:ppi", check=False)
    assert proc.returncode != 0
    errors = [x for x in proc.stderr.splitlines() if x.startswith("Error: ")]
    assert len(errors) == 1 and errors[0].startswith(
        "Error: ledger: data/ledger.jsonl has no entry for human key "), proc.stderr
    assert f"which data/ledger.ppi-human/{human}.json shows was used by the ppi stage" \
        in errors[0]


def test_a_renamed_human_grader_with_the_same_grades_is_the_same_human_key(
        reported, tmp_path_factory):
    root = tiny.copy_repo(reported, tmp_path_factory.mktemp("ppi-renamed"))
    folder = root / EXP
    ledger_before = (folder / "data/ledger.jsonl").read_bytes()
    same = root / "same.jsonl"
    shutil.copyfile(folder / "data/grades/person-h/round-1.jsonl", same)
    shutil.rmtree(folder / "data/grades/person-h")
    params_path = folder / "params.yaml"
    text = params_path.read_text().replace("person-h", "person-j")
    params_path.write_text(text)
    tiny.run(root, "relgrade", "grade", "import", str(same), "--grader", "person-j",
             "--experiment", EXP)
    proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the grader's name is not part of the human key: nothing new in the ledger
    assert (folder / "data/ledger.jsonl").read_bytes() == ledger_before
    ppi = json.loads((folder / "metrics/ppi.json").read_text())
    assert ppi["design"]["human_grader"] == "person-j" and "post_hoc" not in ppi


def _edit_answer(root, folder, qid):
    """`relgrade corpus edit` of ``qid``'s answer chunk: "implementation of" misspelt, which
    people grade 0 (tests/graders/tiny_grader.py) and which leaves every arm's top 3 as it
    was (the words' count is the same, the query words untouched): the pool version stays.
    Returns the chunk id."""
    cid = f"{qid}-answer"
    chunks = [json.loads(x) for x in (folder / "data/input/chunks.jsonl").read_text()
              .splitlines() if x.strip()]
    text = next(c["text"] for c in chunks if c["chunk_id"] == cid)
    assert "implementation of" in text
    (root / "edited.txt").write_text(text.replace("implementation of", "implementaton of"))
    tiny.run(root, "relgrade", "corpus", "edit", cid, "--text-file", "edited.txt",
             "--experiment", EXP)
    return cid


def _human_entries(folder):
    return [json.loads(x) for x in (folder / "data/ledger.jsonl").read_text().splitlines()
            if json.loads(x).get("kind") == "ppi-human"]


def test_people_regrading_an_edited_chunk_is_a_revision_of_the_human_key(
        reported, tmp_path_factory):
    root = tiny.copy_repo(reported, tmp_path_factory.mktemp("ppi-revision"))
    folder = root / EXP
    before = json.loads((folder / "metrics/ppi.json").read_text())
    (first,) = _human_entries(folder)
    sample = before["design"]["human_sample"]
    cid = _edit_answer(root, folder, sample[0])
    # the user's loop: dvc repro stops on the edited chunk's pairs, both graders regrade them
    seen = _loop(root, EXP, rounds=3)
    assert seen and "stale" in seen[0] and "person-h" in seen[0], seen
    ppi = json.loads((folder / "metrics/ppi.json").read_text())
    assert ppi["pool_version"] == before["pool_version"]  # the same pool: not a new key
    # accepted as a revision: no post-hoc label, the ledger's new use revises the first
    assert "post_hoc" not in ppi
    entries = _human_entries(folder)
    assert [e["key_sha256"] for e in entries] == [first["key_sha256"], entries[1]["key_sha256"]]
    assert entries[1]["key_sha256"] != first["key_sha256"]
    assert entries[1]["revises"] == first["key_sha256"]
    # the human key kept beside the ledger: the edited pair graded 2, now 0; every other
    # pair as before
    def kept(entry):
        path = folder / "data/ledger.ppi-human" / f"{entry['key_sha256']}.jsonl"
        return {(r["query_id"], r["chunk_id"]): r["grade"]
                for r in map(json.loads, path.read_text().splitlines())}
    old, new = kept(first), kept(entries[1])
    assert old[(sample[0], cid)] == 2 and new[(sample[0], cid)] == 0
    assert {k: v for k, v in new.items() if k[1] != cid} == \
        {k: v for k, v in old.items() if k[1] != cid}


def test_an_unchanged_pair_regraded_beside_an_edited_chunk_is_void_naming_only_that_pair(
        reported, tmp_path_factory):
    root = tiny.copy_repo(reported, tmp_path_factory.mktemp("ppi-void-beside"))
    folder = root / EXP
    (first,) = _human_entries(folder)
    sample = json.loads((folder / "metrics/ppi.json").read_text())["design"]["human_sample"]
    cid = _edit_answer(root, folder, sample[0])
    pending = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert pending.returncode != 0 and "Traceback" not in pending.stderr
    for grader in ("model-m", "person-h"):  # the edited chunk's pairs, regraded
        tiny.run(root, "relgrade", "grade", "run", "--grader", grader, "--experiment", EXP,
                 "--no-progress")
    # and people's grade of one pair whose content did not change: the pointer of the next
    # sampled query, 1 -> 2 (the grade folder deleted and imported again, as a user did)
    path = folder / "data/grades/person-h/round-1.jsonl"
    latest = {}  # each pair's latest grade (the edited chunk's regrade replaces its first)
    for x in path.read_text().splitlines():
        r = json.loads(x)
        latest[(r["query_id"], r["chunk_id"])] = r
    rows = list(latest.values())
    assert latest[(sample[0], cid)]["grade"] == 0
    pair = (sample[1], f"{sample[1]}-pointer")
    hit = [r for r in rows if (r["query_id"], r["chunk_id"]) == pair]
    assert hit and all(r["grade"] == 1 for r in hit)
    for r in hit:
        r["grade"] = 2
    (root / "regraded.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.rmtree(folder / "data/grades/person-h")
    tiny.run(root, "relgrade", "grade", "import", "regraded.jsonl", "--grader", "person-h",
             "--experiment", EXP)
    ppi_before = (folder / "metrics/ppi.json").read_bytes()
    proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [x for x in proc.stderr.splitlines() if x.startswith("Error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert errors[0].startswith("Error: void: data/ledger.jsonl records human key "
                                f"{first['key_sha256']} as the one the ppi stage used on pool ")
    # the one pair regraded on unchanged content, not the edited chunk's
    assert ("(1 pair differs: a grade changed on unchanged content, or a pair read that was "
            f"not, or not read that was: {pair[0]}/{pair[1]}). ") in errors[0]
    assert cid not in errors[0]
    assert (folder / "metrics/ppi.json").read_bytes() == ppi_before
    assert [e["key_sha256"] for e in _human_entries(folder)] == [first["key_sha256"]]
