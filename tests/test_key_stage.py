"""The key stage against a bypassed void rule: a ledger deleted, truncated or edited, a copied
round, a kill between the key's writes, and a post-hoc key written beside the frozen one."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from relgrade.errors import ProtocolError
from relgrade.experiment.files import Experiment
from tests.test_key import REPO, _grades, _run_stage, _stage_dir

KEY = (b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
       b'{"query_id":"q1","chunk_id":"b","grade":0}\n')
KEY_SHA = hashlib.sha256(KEY).hexdigest()
POOL = "p-0123456789ab"


def _use(h=KEY_SHA, **extra):
    return {"pool_version": POOL, "rubric_version": "v1", "round": 1, "key_sha256": h,
            "used_at": "2026-01-01T00:00:00+00:00"} | extra


def _metrics_file(root, p, arm="bm25", h=KEY_SHA):
    path = root / p["metrics"] / f"{arm}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"arm": arm, "key_sha256": h, "pool_version": POOL,
                                "post_hoc": False}))
    return path


def _frozen(tmp_path):
    """A frozen key used for metrics: key stage run once, one metrics file, the ledger entry."""
    p = _stage_dir(tmp_path)
    assert _run_stage(tmp_path).returncode == 0
    _metrics_file(tmp_path, p)
    (tmp_path / p["ledger"]).write_text(json.dumps(_use()) + "\n")
    return p


def _change_a_grade(tmp_path, p):
    grades = _grades([("q1", "a", "grader-a", 2), ("q1", "b", "grader-a", 1),
                      ("q2", "c", "grader-a", 0), ("q1", "a", "auditor-b", 1)])
    grades.to_parquet(tmp_path / p["grades"], index=False)


@pytest.mark.parametrize("damage", ["deleted", "emptied", "cut mid-line", "hash edited",
                                    "round edited"])
def test_a_damaged_ledger_while_metrics_show_a_use_is_refused_with_the_fix(tmp_path, damage):
    p = _frozen(tmp_path)
    _change_a_grade(tmp_path, p)
    ledger = tmp_path / p["ledger"]
    line = json.dumps(_use())
    if damage == "deleted":
        ledger.unlink()
    elif damage == "emptied":
        ledger.write_text("")
    elif damage == "cut mid-line":
        ledger.write_text(line[:40])
    elif damage == "hash edited":
        ledger.write_text(json.dumps(_use("f" * 64)) + "\n")
    else:
        ledger.write_text(json.dumps(_use(round=2)) + "\n")
    record_before = (tmp_path / p["record"]).read_bytes()
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: ledger: ")
    assert "git checkout -- data/ledger.jsonl" in proc.stderr
    assert (tmp_path / p["record"]).read_bytes() == record_before
    assert (tmp_path / p["key"]).read_bytes() == KEY


def test_an_intact_ledger_still_voids_the_changed_key(tmp_path):
    p = _frozen(tmp_path)
    _change_a_grade(tmp_path, p)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith(f"Error: void: key {KEY_SHA}")


def test_a_post_hoc_key_is_written_beside_the_frozen_one(tmp_path):
    p = _frozen(tmp_path)
    frozen = {n: (tmp_path / p[n]).read_bytes() for n in ("key", "qrels", "record")}
    _change_a_grade(tmp_path, p)
    _stage_dir(tmp_path, ledger_rows=[_use()], post_hoc=True)
    _change_a_grade(tmp_path, p)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "(post-hoc) beside the frozen key" in proc.stdout
    assert {n: (tmp_path / p[n]).read_bytes() for n in ("key", "qrels", "record")} == frozen
    folder = tmp_path / p["key_post_hoc"]
    # the folder's README.md (in git) survives the post-hoc key, saying what it holds
    assert sorted(x.name for x in folder.iterdir()) == ["README.md", "key.jsonl", "key.qrels",
                                                         "made_on.jsonl", "record.json"]
    new = (b'{"query_id":"q1","chunk_id":"a","grade":2}\n'
           b'{"query_id":"q1","chunk_id":"b","grade":1}\n')
    note = (folder / "README.md").read_text()
    assert note.startswith(f"A post-hoc key ({hashlib.sha256(new).hexdigest()}) ")
    assert note.endswith(f"of pool {POOL}, rubric v1, round 1 (params grading.post_hoc): every "
                         "number made with it is labelled post-hoc.\n")
    assert (folder / "key.jsonl").read_bytes() == new
    record = json.loads((folder / "record.json").read_text())
    assert record["post_hoc"] is True
    assert record["key_sha256"] == hashlib.sha256(new).hexdigest()
    ex = Experiment.load(tmp_path / "params.yaml")
    assert ex.read_key(post_hoc=True)[1]["key_sha256"] == record["key_sha256"]
    assert ex.read_key()[1]["key_sha256"] == KEY_SHA


def test_without_a_post_hoc_key_its_folder_says_the_frozen_key_is_the_only_one(tmp_path):
    p = _stage_dir(tmp_path)
    assert _run_stage(tmp_path).returncode == 0
    note = (tmp_path / p["key_post_hoc"] / "README.md").read_text()
    assert note == (f"No post-hoc key: the frozen key ({KEY_SHA}) is the only key of pool "
                    f"{POOL}, rubric v1, round 1.\n")


def test_the_record_holds_the_qrels_rubric_prompt_commands_gates_and_agreement(tmp_path):
    p = _stage_dir(tmp_path)
    gate = {"passed": True, "measures": {"binary_kappa": 0.9, "pairs": 3},
            "thresholds": {"binary_kappa_min": 0.8}}
    (tmp_path / p["gate"]).write_text(json.dumps(gate))
    (tmp_path / "rubric").mkdir(exist_ok=True)
    (tmp_path / "rubric/v1.md").write_bytes(b"grade 2 when it answers\n")
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["qrels_sha256"] == hashlib.sha256(b"q1 0 a 2\nq1 0 b 0\n").hexdigest()
    assert rec["rubric_sha256"] == hashlib.sha256(b"grade 2 when it answers\n").hexdigest()
    # no grade file with a bank in grades_in: no model grade, so no template made the key
    assert rec["prompt_template_sha256"] is None
    assert rec["prompt_template_note"] == ("no model grader graded this round: no prompt "
                                           "template made a grade of the key")
    assert "prompt_templates" not in rec
    assert rec["grader_commands"] == {"auditor-b": None, "grader-a": None}
    assert rec["gates"] == {"binary_kappa_min": 0.8}
    assert rec["agreement"] == {"binary_kappa": 0.9, "pairs": 3}
    assert "audit_lock_sha256" not in rec
    assert rec["key_sha256"] == KEY_SHA  # the key itself is unchanged by the new fields


def _bank(root, p, grader, lines):
    """A grade file of ``grader`` in grades_in with its bank sidecar of ``lines``."""
    folder = root / p["grades_in"] / grader
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "round-1.jsonl").write_text("".join(
        json.dumps({"query_id": q, "chunk_id": c, "reason": "r", "grade": 0}) + "\n"
        for q, c, _ in lines))
    (folder / "round-1.bank.jsonl").write_text("".join(
        json.dumps({"query_id": q, "chunk_id": c, **extra}) + "\n" for q, c, extra in lines))


def test_the_record_names_the_template_the_grades_name_not_the_template_file(tmp_path):
    p = _stage_dir(tmp_path)
    made_with = "7" * 64  # not the template file's sha256: a grade made before an edit of it
    _bank(tmp_path, p, "grader-a", [("q1", "a", {"judge": "j" * 64, "template_sha256": made_with}),
                                    ("q1", "b", {"judge": "j" * 64, "template_sha256": made_with})])
    _bank(tmp_path, p, "auditor-b", [("q1", "a", {})])  # a person: no judge, no template
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["prompt_template_sha256"] == made_with
    assert rec["prompt_templates"] == {"grader-a": {made_with: 2}}
    assert "prompt_template_note" not in rec


def test_grades_that_name_no_template_are_said_so_not_guessed(tmp_path):
    p = _stage_dir(tmp_path)
    # legacy bank lines: a judge identity, no template named
    _bank(tmp_path, p, "grader-a", [("q1", "a", {"judge": "j" * 64}),
                                    ("q1", "b", {"judge": "j" * 64})])
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["prompt_template_sha256"] is None
    assert rec["prompt_templates"] == {"grader-a": {"template not recorded": 2}}
    assert rec["prompt_template_note"] == (
        "the key's model grades name no prompt template (recorded before grade lines named "
        "it, or graded outside relgrade): the template they were made with is not known")


# --- a kill between the key's writes ---------------------------------------------------------

KILLER = """
import os, signal
import relgrade.io.{module} as target
real = target.{function}
def killed(path, *args, **kwargs):
    if str(path).endswith({suffix!r}):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(path, *args, **kwargs)
target.{function} = killed
from relgrade.experiment.stage import run_stage
from relgrade.pipeline.stages.key import run
run_stage(run)
"""


@pytest.mark.parametrize("hook", [("trec", "write_trec_qrels", ".qrels"),
                                  ("files", "write_json", "record.json")])
def test_a_kill_between_the_key_writes_leaves_files_every_reader_refuses(tmp_path, hook):
    p = _frozen(tmp_path)
    (tmp_path / p["ledger"]).unlink()
    (tmp_path / p["metrics"] / "bm25.json").unlink()
    _change_a_grade(tmp_path, p)  # no metrics seen: a fresh key, written over the old one
    module, function, suffix = hook
    code = KILLER.format(module=module, function=function, suffix=suffix)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == -9
    ex = Experiment.load(tmp_path / "params.yaml")
    with pytest.raises(ProtocolError, match="interrupted between its writes"):
        ex.read_key()
    assert _run_stage(tmp_path).returncode == 0  # the rerun writes a whole trio again
    assert ex.read_key()[1]["key_sha256"] != KEY_SHA


def test_a_qrels_file_swapped_after_freezing_is_refused(tmp_path):
    p = _stage_dir(tmp_path)
    assert _run_stage(tmp_path).returncode == 0
    (tmp_path / p["qrels"]).write_text("q1 0 a 2\nq1 0 b 2\n")
    with pytest.raises(ProtocolError, match=r"key\.qrels: the qrels file \(sha256 "):
        Experiment.load(tmp_path / "params.yaml").read_key()


# --- a copied round --------------------------------------------------------------------------

def _round_two(tmp_path, *, copy, meta=None, one_changed=False):
    p = _stage_dir(tmp_path)
    params = (tmp_path / "params.yaml").read_text().replace("round: 1", "round: 2")
    (tmp_path / "params.yaml").write_text(params)
    rows = [{"query_id": q, "chunk_id": c, "reason": f"reason {q} {c}", "grade": g}
            for q, c, g in (("q1", "a", 2), ("q1", "b", 0), ("q2", "c", 0))]
    folder = tmp_path / p["grades_in"] / "grader-a"
    folder.mkdir(parents=True)
    (folder / "round-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if copy:
        now = [dict(r) for r in rows]
        if one_changed:
            now[1]["grade"] = 1
    else:
        now = [dict(r, reason=f"fresh look at {r['chunk_id']}") for r in rows]
    (folder / "round-2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in now))
    if meta is not None:
        (folder / "round-2.meta.json").write_text(json.dumps(meta))
    g = pd.DataFrame(now).assign(grader="grader-a", role="grader", round=2)
    g.to_parquet(tmp_path / p["grades"], index=False)
    (tmp_path / p["grades_manifest"]).write_text(json.dumps({"graders": {"grader-a": {
        "kind": "model", "role": "grader", "file": (folder / "round-2.jsonl").as_posix(),
        "sha256": "g" * 64, "rows": 3}}}))
    return p


@pytest.mark.parametrize("one_changed", [False, True])
def test_a_round_two_file_copied_from_round_one_is_refused(tmp_path, one_changed):
    p = _round_two(tmp_path, copy=True, one_changed=one_changed)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1
    found = "3 of its 3 rows repeat the reason of" if one_changed else "byte-identical to"
    assert proc.stderr.startswith(
        f"Error: round 2: data/grades/grader-a/round-2.jsonl (grader-a) is {found} "
        "data/grades/grader-a/round-1.jsonl: grades of round 2 must come from a blind regrade")
    assert not (tmp_path / p["key"]).exists()


def test_a_copied_round_with_crlf_line_ends_is_refused_through_the_row_reader(tmp_path):
    # CRLF lines are left to the row reader by the column reader: the same count, same words
    p = _round_two(tmp_path, copy=True, one_changed=True)
    folder = tmp_path / p["grades_in"] / "grader-a"
    for name in ("round-1.jsonl", "round-2.jsonl"):
        f = folder / name
        f.write_bytes(f.read_bytes().replace(b"\n", b"\r\n"))
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "Error: round 2: data/grades/grader-a/round-2.jsonl (grader-a) is 3 of its 3 rows "
        "repeat the reason of data/grades/grader-a/round-1.jsonl")


def test_a_round_two_file_with_its_own_reasons_or_a_round_two_sidecar_is_accepted(tmp_path):
    _round_two(tmp_path / "fresh", copy=False) if (tmp_path / "fresh").mkdir() is None else None
    assert _run_stage(tmp_path / "fresh").returncode == 0
    (tmp_path / "attested").mkdir()
    _round_two(tmp_path / "attested", copy=True, meta={"round": 2, "rubric_version": "v1"})
    proc = _run_stage(tmp_path / "attested")
    assert proc.returncode == 0, proc.stderr
    assert os.path.exists(tmp_path / "attested/data/key/record.json")


def test_a_model_graders_lines_without_identity_name_no_template_and_the_auditor_is_left_out(
        tmp_path):
    p = _stage_dir(tmp_path)
    # grader-a is kind: model in params; its lines (imported, or written before identities
    # were recorded) name neither judge nor template; the auditor's template is not the key's
    _bank(tmp_path, p, "grader-a", [("q1", "a", {}), ("q1", "b", {})])
    _bank(tmp_path, p, "auditor-b", [("q1", "a", {"judge": "j" * 64, "template_sha256": "5" * 64})])
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["prompt_template_sha256"] is None
    assert rec["prompt_templates"] == {"grader-a": {"template not recorded": 2}}
    assert rec["prompt_template_note"].startswith("the key's model grades name no prompt template")


def _with_command(root, command):
    """Give grader-a a command in params.yaml, its script in the folder; its judge now."""
    import yaml

    from relgrade.experiment.judges import current_judge

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["graders"]["grader-a"]["command"] = command
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / command.split()[-1]).write_text("print('a judge')\n")
    return current_judge(Experiment.load(root / "params.yaml"), "grader-a")


def test_the_record_names_the_command_whose_judge_made_the_grades(tmp_path):
    p = _stage_dir(tmp_path)
    now = _with_command(tmp_path, "python3 judge.py")
    _bank(tmp_path, p, "grader-a", [("q1", "a", {"judge": now}), ("q1", "b", {"judge": now})])
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["grader_commands"]["grader-a"] == "python3 judge.py"
    assert "grader_commands_note" not in rec


def test_a_judge_swapped_after_the_key_keeps_the_command_that_made_it_in_the_record(tmp_path):
    p = _stage_dir(tmp_path)
    old = _with_command(tmp_path, "python3 judge.py")
    _bank(tmp_path, p, "grader-a", [("q1", "a", {"judge": old}), ("q1", "b", {"judge": old})])
    assert _run_stage(tmp_path).returncode == 0
    # the judge is swapped in params; the key's grades are the old judge's, unchanged
    new = _with_command(tmp_path, "python3 judge2.py")
    assert new != old
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["grader_commands"]["grader-a"] == "python3 judge.py"
    assert rec["judges"]["grader-a"] == {old: 2}
    assert "grader_commands_note" not in rec


def test_a_command_whose_judge_made_none_of_the_grades_is_not_named_as_theirs(tmp_path):
    p = _stage_dir(tmp_path)
    made_by = "7" * 64  # a judge params no longer name, and no standing record to say whose
    _bank(tmp_path, p, "grader-a", [("q1", "a", {"judge": made_by})])
    now = _with_command(tmp_path, "python3 judge2.py")
    assert _run_stage(tmp_path).returncode == 0
    rec = json.loads((tmp_path / p["record"]).read_text())
    assert rec["grader_commands"]["grader-a"] is None
    assert rec["grader_commands_note"] == {"grader-a": (
        f"params now name 'python3 judge2.py' (judge {now[:12]}), which made none of the "
        "key's grades; the command that made them is not known here (see params.yaml's git "
        "history)")}


def test_a_key_grader_that_graded_every_pair_0_is_refused_naming_the_grades_file(tmp_path):
    p = _stage_dir(tmp_path)
    grades = _grades([("q1", "a", "grader-a", 0), ("q1", "b", "grader-a", 0),
                      ("q2", "c", "grader-a", 0), ("q1", "a", "auditor-b", 1)])
    grades.to_parquet(tmp_path / p["grades"], index=False)
    proc = _run_stage(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"Error: {p['grades']}: grader-a: no query has a chunk graded relevant by the key "
        "grader: the key would be empty (found 2 queries dropped, every grade of grader-a "
        "below scale.relevant_min 1). Check grader-a's grades (a grader that grades every "
        "pair 0 makes no key) and params scale.relevant_min")
    assert not (tmp_path / p["key"]).exists()
