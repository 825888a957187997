"""The judges' calibration ledger: a model judge measured against people per judge identity,
kept in the repository's sha256-chained judges/ledger.jsonl, and its state in
`relgrade judge status` and `relgrade status`.

The model grader is the real test script (tests/graders/grader.py, copied into the working
tree) and the person a script answering set grades, both run by `relgrade grade run`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.io.judge_ledger import GENESIS, append_entry, read_ledger
from relgrade.protocol.calibration import calibration_state, leniency, measure_calibration
from relgrade.protocol.reliability import Resampling
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]

# q01 and q02, 7 chunks each; the test grader grades the truth, (2, 1, 0) by chunk number
MODEL = {"q01": [2, 1, 0, 2, 1, 0, 2], "q02": [2, 1, 0, 2, 1, 0, 2]}
# people part ways on three pairs: q01-c1 (2, model 1), q02-c2 (1, model 0), q02-c3 (1, model 2)
HUMAN = {"q01": [2, 2, 0, 2, 1, 0, 2], "q02": [2, 1, 1, 1, 1, 0, 2]}


def paired_table() -> pd.DataFrame:
    return pd.DataFrame([(q, f"{q}-c{j}", MODEL[q][j], HUMAN[q][j])
                         for q in MODEL for j in range(7)],
                        columns=["query_id", "chunk_id", "model", "human"])


RESAMPLING = Resampling(seed=11, resamples=1000, level=0.95)


# --- the measurement, by hand --------------------------------------------------------------

def test_kappas_confusion_and_leniency_of_a_tiny_table_match_the_hand_computation():
    out = measure_calibration(paired_table(), scale=[0, 1, 2], relevant_min=1,
                              resampling=RESAMPLING)
    # rows the model's grade, columns people's
    assert out["confusion"] == [[3, 1, 0], [0, 3, 1], [0, 1, 5]]
    # quadratic weights 1/4 at one step, 1 at two; row sums (4, 4, 6), column sums (3, 5, 6):
    # observed 3 * 1/4 = 0.75 pairs, expected ((20 + 12 + 24 + 30) / 4 + (24 + 18)) / 14
    # = 63.5 / 14 pairs: kappa = 1 - 0.75 / (63.5 / 14) = 53 / 63.5
    assert out["weighted_kappa"]["value"] == pytest.approx(53 / 63.5)
    # binary (>= 1): 13 of 14 agree; chance (4 * 3 + 10 * 11) / 196
    assert out["binary_kappa"]["value"] == pytest.approx(30 / 37)
    t = paired_table()
    assert out["weighted_kappa"]["value"] == pytest.approx(
        cohen_kappa_score(t["model"], t["human"], weights="quadratic"))
    assert out["binary_kappa"]["value"] == pytest.approx(
        cohen_kappa_score(t["model"] >= 1, t["human"] >= 1))
    # leniency: differences -1 (q01), -1 and +1 (q02): mean -1/14; per-query sums (-1, 0),
    # u = (-1/2, 1/2), se = sqrt(2 * 1/2) / 14
    le = out["leniency"]
    assert le["mean"] == pytest.approx(-1 / 14) and le["se"] == pytest.approx(1 / 14)
    assert le["low"] == pytest.approx(-1 / 14 - 1.959964 / 14, abs=1e-6)
    assert (le["pairs"], le["queries"], out["pairs"], out["queries"]) == (14, 2, 14, 2)
    assert out["weighted_kappa"]["resample_unit"] == "query"
    assert out["weighted_kappa"]["low"] <= out["weighted_kappa"]["value"] <= 1.0
    assert out["leniency_by_family"] == {}


def test_leniency_per_arm_family_counts_the_pairs_each_family_retrieved():
    t = paired_table()
    fam = pd.concat([t[["query_id", "chunk_id"]].assign(family="semantic"),
                     t[t["chunk_id"].str[-1].astype(int) <= 3][["query_id", "chunk_id"]]
                     .assign(family="lexical")])
    out = measure_calibration(t, scale=[0, 1, 2], relevant_min=1, resampling=RESAMPLING,
                              families=fam)
    lex = out["leniency_by_family"]["lexical"]
    # c0..c3: q01 differences (0, -1, 0, 0), q02 (0, 0, -1, +1): mean -1/8, u = (-1/2, 1/2)
    assert (lex["mean"], lex["pairs"]) == (pytest.approx(-1 / 8), 8)
    assert lex["se"] == pytest.approx(1 / 8)
    assert out["leniency_by_family"]["semantic"]["mean"] == pytest.approx(-1 / 14)
    assert list(out["leniency_by_family"]) == ["lexical", "semantic"]


def test_leniency_on_one_query_has_no_interval():
    out = leniency([1, 0], ["q", "q"])
    assert out["mean"] == 0.5 and out["se"] is None and out["low"] is None


def test_a_calibration_with_no_pair_is_refused():
    with pytest.raises(InputError, match="at least one pair"):
        measure_calibration(paired_table().iloc[:0], scale=[0, 1, 2], relevant_min=1,
                            resampling=RESAMPLING)


def test_a_calibration_older_than_the_age_or_under_another_rubric_is_stale():
    e = {"measured_at": "2026-01-01T00:00:00Z", "rubric_sha256": "r1"}
    now = datetime(2026, 1, 31, tzinfo=timezone.utc)
    assert calibration_state([e], rubric_sha256="r1", now=now, max_age_days=30)[0] == \
        "calibrated"
    assert calibration_state([e], rubric_sha256="r1", now=now, max_age_days=29)[0] == "stale"
    state, why, _ = calibration_state([e], rubric_sha256="r2", now=now, max_age_days=30)
    assert state == "stale" and "rubric" in why
    assert calibration_state([], rubric_sha256="r1", now=now, max_age_days=30)[0] == "none"


def test_a_measurement_on_fewer_pairs_than_the_recheck_floor_does_not_calibrate():
    now = datetime(2026, 1, 2, tzinfo=timezone.utc)
    small = {"measured_at": "2026-01-01T00:00:00Z", "rubric_sha256": "r1", "pairs": 5,
             "queries": 3}
    state, why, last = calibration_state([small], rubric_sha256="r1", now=now,
                                         max_age_days=90, min_pairs=50)
    assert (state, last) == ("small", small)
    assert why == ("measured on 5 pairs (3 queries), fewer than judges.recheck.min_pairs "
                   "(50): too few to count as a calibration")
    # 50 pairs is enough; so is a drawn re-check of any size (its plan sized it)
    assert calibration_state([small | {"pairs": 50}], rubric_sha256="r1", now=now,
                             max_age_days=90, min_pairs=50)[0] == "calibrated"
    drawn = small | {"interval": {"method": "stratified-delta"}}
    assert calibration_state([drawn], rubric_sha256="r1", now=now, max_age_days=90,
                             min_pairs=50)[0] == "calibrated"
    # a later small measurement leaves an earlier one that counts standing
    older = small | {"pairs": 80, "measured_at": "2025-12-20T00:00:00Z"}
    state, _, last = calibration_state([older, small], rubric_sha256="r1", now=now,
                                       max_age_days=90, min_pairs=50)
    assert (state, last) == ("calibrated", older)


# --- the ledger file -------------------------------------------------------------------------

def test_ledger_lines_are_chained_and_a_hand_edit_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "judges/ledger.jsonl"
    first = append_entry(path, {"judge": "a" * 64, "weighted_kappa": 0.5})
    second = append_entry(path, {"judge": "b" * 64, "weighted_kappa": 0.7})
    assert first["prev"] == GENESIS and second["prev"] == first["sha256"]
    assert [e["judge"][0] for e in read_ledger(path)] == ["a", "b"]
    text = path.read_text()
    path.write_text(text.replace('"weighted_kappa":0.7', '"weighted_kappa":0.9'))
    with pytest.raises(InputError, match="ledger.jsonl:2: ") as err:
        read_ledger(path)
    assert "sha256 does not match" in str(err.value)
    # a line removed: the next one no longer names the line before it
    path.write_text(text.splitlines(keepends=True)[1])
    with pytest.raises(InputError, match="ledger.jsonl:1: .*prev"):
        read_ledger(path)


# --- the commands, on a real grading set-up ----------------------------------------------------

@pytest.fixture
def root(tmp_path):
    # the repository's paths (what `relgrade status` reads), the test set-up's where they differ
    paths = yaml.safe_load((ROOT / "params.yaml").read_text())["paths"]
    """A repository with one experiment: the model grader grader-a (a command in the tree)
    graded every pair; the person person-b (simulated by a script) the two audited queries."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "tools").mkdir()
    shutil.copy(ex.GRADER, tmp_path / "tools/grader.py")
    ex.build(tmp_path, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": [sys.executable, str(tmp_path / "tools/grader.py"), "ok"],
                     "timeout": 30, "retries": 0},
        "person-b": {"role": "auditor", "kind": "human", "family": "human",
                     "command": [sys.executable, str(tmp_path / "tools/people.py")],
                     "timeout": 30, "retries": 0}},
        paths={k: v for k, v in paths.items()
               if k not in ("packets", "grades_in", "audit", "pool")})
    # a simulated person: the grades of HUMAN, looked up by pair
    (tmp_path / "tools/people.py").write_text(
        "import json, sys\n"
        f"grades = {json.dumps(HUMAN)}\n"
        "req = json.load(sys.stdin)\n"
        "for c in req['chunks']:\n"
        "    j = int(c['chunk_id'].rsplit('-c', 1)[1])\n"
        "    print(json.dumps({'query_id': req['query_id'], 'chunk_id': c['chunk_id'],\n"
        "                      'reason': 'read it', 'grade': grades[req['query_id']][j]}))\n")
    edit_params(tmp_path, **{"grading.key_grader": "grader-a", "grading.auditor": "person-b",
                             "agreement.bootstrap": 1000})
    pairs = [(f"q{i:02d}", f"q{i:02d}-c{j}") for i in range(1, 5) for j in range(7)]
    (tmp_path / "data/pool").mkdir(parents=True)
    pd.DataFrame({"query_id": [q for q, _ in pairs], "chunk_id": [c for _, c in pairs],
                  "inclusion_prob": [1.0] * len(pairs)}).to_parquet(
        tmp_path / "data/pool/pool.parquet", index=False)
    res = invoke(tmp_path, "grade", "run", "--grader", "grader-a", "--no-progress")
    assert res.exit_code == 0, res.output
    res = invoke(tmp_path, "grade", "run", "--grader", "person-b", "--no-progress")
    assert res.exit_code == 0, res.output
    return tmp_path


def edit_params(root, **changes):
    path = root / "params.yaml"
    params = yaml.safe_load(path.read_text())
    for dotted, value in changes.items():
        *head, last = dotted.split(".")
        node = params
        for k in head:
            node = node.setdefault(k, {})
        node[last] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def invoke(root, *args):
    return CliRunner().invoke(main, [*args, "--params", str(root / "params.yaml")])


def judge_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("judge: grader-a"))


def calibration_line(output: str) -> str:
    return next(line for line in output.splitlines()
                if line.startswith("calibration: grader-a"))


def test_judge_status_names_the_owed_recheck_then_shows_the_recorded_measurement(root):
    edit_params(root, **{"judges.recheck.min_pairs": 10})  # the audit's 14 pairs count
    res = invoke(root, "judge", "status")
    assert res.exit_code == 0, res.output
    assert "no calibration recorded; owed: a re-check against people, relgrade judge " \
           "record --grader grader-a (14 pairs graded by person-b have a grade of this " \
           "identity)" in judge_line(res.output)
    # and `relgrade status` names the same owed work
    assert "calibration: grader-a identity " in invoke(root, "status").output
    assert "no calibration recorded; owed: a re-check against people" in \
        calibration_line(invoke(root, "status").output)

    res = invoke(root, "judge", "record")
    assert res.exit_code == 0, res.output
    assert "recorded in judges/ledger.jsonl" in res.output
    (entry,) = read_ledger(root / "judges/ledger.jsonl")
    assert (entry["grader"], entry["against"], entry["pairs"], entry["experiment"]) == \
        ("grader-a", "person-b", 14, ".")
    assert entry["confusion"] == [[3, 1, 0], [0, 3, 1], [0, 1, 5]]
    assert entry["weighted_kappa"]["value"] == pytest.approx(53 / 63.5)
    assert entry["binary_kappa"]["value"] == pytest.approx(30 / 37)
    assert entry["leniency"]["mean"] == pytest.approx(-1 / 14)
    assert entry["self_consistency"] is None
    # dated by its data: the latest graded_at of the grades it rests on
    bank = root / "data/grades/person-b/round-1.bank.jsonl"
    assert entry["measured_at"] == max(json.loads(x)["graded_at"]
                                       for x in bank.read_text().splitlines())

    res = invoke(root, "judge", "status")
    line = judge_line(res.output)
    assert f"identity {entry['judge'][:12]}: calibrated" in line
    assert f"{entry['judge'][:12]} measured {entry['measured_at']} against person-b on 14 " \
           "pairs (2 queries)" in res.output and "weighted kappa 0.83 [" in res.output
    assert ": calibrated (measured 0 days ago)" in calibration_line(invoke(root, "status").output)
    # the same measurement is not appended twice
    assert "already in" in invoke(root, "judge", "record").output
    assert len(read_ledger(root / "judges/ledger.jsonl")) == 1


def test_a_changed_prompt_template_is_an_uncalibrated_judge_and_the_old_one_stays(root,
                                                                                  monkeypatch):
    assert invoke(root, "judge", "record").exit_code == 0
    (old,) = read_ledger(root / "judges/ledger.jsonl")
    from relgrade.experiment import judges

    text = judges.prompt_template_text()
    monkeypatch.setattr(judges, "prompt_template_text",
                        lambda: text + "\nAnswer with the grade first.\n")
    res = invoke(root, "judge", "status")
    line = judge_line(res.output)
    assert old["judge"][:12] not in line and "no calibration recorded" in line
    # a key judge with nothing people graded under its identity now owes the targeted
    # re-check, drawn from the grades table (not built in this set-up: dvc repro builds it)
    assert line.endswith("owed: a re-check against people, which cannot be planned yet: "
                         f"{root / 'data/graded/grades.parquet'}: a re-check is drawn from "
                         "the key judge's grades: the grades table is not built yet. "
                         "Run: dvc repro")
    assert f"  {old['judge'][:12]} measured" in res.output  # the old identity stays listed
    # and it cannot be recorded from grades made under the old template
    res = invoke(root, "judge", "record")
    assert res.exit_code == 1 and res.output.startswith("Error: ")
    assert "no pair has both a grade made under the judge now" in res.output
    assert len(read_ledger(root / "judges/ledger.jsonl")) == 1


def test_a_measurement_on_fewer_pairs_than_the_floor_is_kept_but_leaves_the_recheck_owed(root):
    # the default floor, judges.recheck.min_pairs 50, is above the audit's 14 pairs: the
    # re-check is owed, not a record of those 14
    # (the re-check is drawn from the grades table, which this set-up has not built)
    line = judge_line(invoke(root, "judge", "status").output)
    assert "no calibration recorded; owed: a re-check against people, which cannot be " \
           "planned yet" in line and "relgrade judge record" not in line
    res = invoke(root, "judge", "record")
    assert res.exit_code == 0, res.output
    (entry,) = read_ledger(root / "judges/ledger.jsonl")
    assert entry["pairs"] == 14
    assert (f"judge: grader-a identity {entry['judge'][:12]} is not calibrated by it: "
            "measured on 14 pairs (2 queries), fewer than judges.recheck.min_pairs (50): too "
            "few to count as a calibration; see relgrade judge status for what is owed") \
        in res.output
    line = judge_line(invoke(root, "judge", "status").output)
    assert ": calibrated" not in line
    assert f"identity {entry['judge'][:12]}: measured on 14 pairs (2 queries), fewer than " \
           "judges.recheck.min_pairs (50): too few to count as a calibration; owed: a " \
           "re-check against people" in line
    assert ": calibrated" not in calibration_line(invoke(root, "status").output)


def test_an_edited_rubric_is_owed_a_recheck_that_regrading_and_recording_clear(root):
    edit_params(root, **{"judges.recheck.min_pairs": 10})  # the audit's 14 pairs count
    assert invoke(root, "judge", "record").exit_code == 0
    (old,) = read_ledger(root / "judges/ledger.jsonl")
    rubric = root / "rubric/v1.md"
    rubric.write_text(rubric.read_text() + "\nA chunk that only names the target is a 0.\n")
    assert "no calibration recorded" in judge_line(invoke(root, "judge", "status").output)
    # the grades of both are stale under the new rubric: `grade run` asks both again
    for grader in ("grader-a", "person-b"):
        res = invoke(root, "grade", "run", "--grader", grader, "--no-progress")
        assert res.exit_code == 0, res.output
    assert invoke(root, "judge", "record").exit_code == 0
    first, second = read_ledger(root / "judges/ledger.jsonl")
    assert first == old and second["judge"] != old["judge"]
    assert second["rubric_sha256"] != old["rubric_sha256"] and second["pairs"] == 14
    res = invoke(root, "judge", "status")
    assert f"identity {second['judge'][:12]}: calibrated" in judge_line(res.output)
    assert f"  {old['judge'][:12]} measured" in res.output
    assert f"  {second['judge'][:12]} measured" in res.output


def test_a_calibration_older_than_judges_max_age_days_is_owed_again(root):
    edit_params(root, **{"judges.recheck.min_pairs": 10})  # the audit's 14 pairs count
    assert invoke(root, "judge", "record").exit_code == 0
    edit_params(root, **{"judges.max_age_days": 1e-9})
    line = judge_line(invoke(root, "judge", "status").output)
    assert "calibration stale, measured 0 days ago, older than judges.max_age_days" in line
    assert "owed: a re-check against people" in line


def test_a_hand_edited_ledger_is_one_error_line_naming_file_and_line(root):
    assert invoke(root, "judge", "record").exit_code == 0
    path = root / "judges/ledger.jsonl"
    before = path.read_text()
    path.write_text(before.replace('"against":"person-b"', '"against":"person-c"'))
    for args in (("judge", "status"), ("judge", "record")):
        res = invoke(root, *args)
        assert res.exit_code == 1
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ")
        assert "judges/ledger.jsonl:1: " in lines[0]
    assert "person-c" in path.read_text()  # nothing rewritten: the file is as it was left


# --- the gate and ppi stages --------------------------------------------------------------------

def test_the_stages_print_an_owed_calibration_or_stop_when_it_is_required(root):
    from relgrade.errors import PendingWork
    from relgrade.experiment.calibration import key_judges, owed_calibrations
    from relgrade.experiment.files import Experiment

    exp = Experiment.load(root / "params.yaml")
    assert key_judges(exp) == ["grader-a"]
    (line,) = owed_calibrations(exp, key_judges(exp))
    assert line.startswith("grader-a identity ") and "no calibration recorded; owed: a " \
        "re-check against people, relgrade judge record --grader grader-a" in line
    edit_params(root, **{"judges.require_calibration": True})
    with pytest.raises(PendingWork, match="judge calibration: grader-a identity .* no "
                                          "calibration recorded"):
        owed_calibrations(Experiment.load(root / "params.yaml"), ["grader-a"])
    assert invoke(root, "judge", "record").exit_code == 0
    assert owed_calibrations(Experiment.load(root / "params.yaml"), ["grader-a"]) == []


def test_the_gate_and_ppi_stages_list_the_judges_params_only_when_declared():
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline import registry

    raw = yaml.safe_load((ROOT / "experiments/ppi-sim/params.yaml").read_text())
    by_name = {s.name: s for s in registry.stages()}

    def params_of(raw):
        exp = Experiment.from_mapping(raw, root=ROOT / "experiments/ppi-sim")
        modes = registry.modes_of(exp)
        return {n: registry.stage_body(by_name[n], exp, modes, graph=None, src=ROOT / "src",
                                       root_rel="../..").get("params", [])
                for n in ("gate", "ppi", "key")}

    assert not any("judges" in p for p in params_of(raw).values())
    declared = params_of(raw | {"judges": {"max_age_days": 30}})
    assert "judges.max_age_days" in declared["gate"] and "judges.max_age_days" in declared["ppi"]
    assert not any("judges" in p for p in declared["key"])
    # the probe's settings are the probe command's: they rerun no stage
    probed = params_of(raw | {"judges": {"probe": {"max_flip_rate": 0.2}}})
    assert not any("judges" in p for p in probed["gate"] + probed["ppi"])


@pytest.mark.parametrize("judges, item", [({"max_age_days": 0}, "judges.max_age_days"),
                                          ({"max_age_days": -3}, "judges.max_age_days"),
                                          ({"require_calibration": "yes"},
                                           "judges.require_calibration"),
                                          ({"max_age": 30}, "judges.max_age")])
def test_bad_judges_params_are_refused_naming_the_key(judges, item):
    from relgrade.experiment.params import parse_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text()) | {"judges": judges}
    with pytest.raises(InputError, match=re.escape(item)):
        parse_params(raw)


def test_the_stages_judge_the_key_by_the_identities_that_graded_it_and_the_one_now(
        root, monkeypatch):
    from relgrade.experiment import judges
    from relgrade.experiment.calibration import owed_calibrations
    from relgrade.experiment.files import Experiment

    graded_by = read_bank_judges(root)
    text = judges.prompt_template_text()
    monkeypatch.setattr(judges, "prompt_template_text",
                        lambda: text + "\nAnswer with the grade first.\n")
    exp = Experiment.load(root / "params.yaml")
    # the template changed after grading: the key's grades are the old judge's, and that
    # judge is owed its calibration, named with --identity; the judge now owes one too
    old_line, now_line = owed_calibrations(exp, ["grader-a"])
    assert old_line.startswith(f"grader-a identity {graded_by[:12]}: no calibration recorded")
    assert f"relgrade judge record --grader grader-a --identity {graded_by[:12]} (14 pairs" \
        in old_line
    assert graded_by[:12] not in now_line and "no calibration recorded" in now_line
    res = invoke(root, "judge", "record", "--grader", "grader-a", "--identity", graded_by[:12])
    assert res.exit_code == 0, res.output
    (entry,) = read_ledger(root / "judges/ledger.jsonl")
    assert entry["judge"] == graded_by and entry["pairs"] == 14
    assert owed_calibrations(Experiment.load(root / "params.yaml"), ["grader-a"]) == [now_line]
    # and `judge status` owes the identity now, which has graded nothing
    assert "no calibration recorded" in judge_line(invoke(root, "judge", "status").output)
    res = invoke(root, "judge", "record", "--identity", "ffff")
    assert res.exit_code == 1 and "--identity" in res.output and "--grader" in res.output


def read_bank_judges(root) -> str:
    bank = root / "data/grades/grader-a/round-1.bank.jsonl"
    (judge,) = {json.loads(x)["judge"] for x in bank.read_text().splitlines()}
    return judge


def test_with_no_human_grader_status_says_so_once_instead_of_a_line_per_judge(root):
    # the person becomes a simulated model too: nobody to measure either judge against
    edit_params(root, **{"graders.person-b.kind": "model", "graders.person-b.family": "sim"})
    out = invoke(root, "status").output
    lines = [x for x in out.splitlines() if x.startswith("calibration:")]
    assert lines == ["calibration: no human grader in this experiment to measure its 2 model "
                     "graders against (`relgrade judge status` lists them)"], out


def test_the_judge_identity_is_the_same_from_the_experiments_folder_and_the_top(tmp_path,
                                                                               monkeypatch):
    # params write a command from the repository's top; DVC runs a stage in the
    # experiment's folder: the script is found (and hashed) from either
    from relgrade.graders.cache import named_files, sha256_bytes

    (tmp_path / "experiments/e/sim").mkdir(parents=True)
    (tmp_path / "experiments/e/sim/judge.py").write_text("print('2')\n")
    argv = ["python", "experiments/e/sim/judge.py", "--seed", "7"]
    want = {"experiments/e/sim/judge.py": sha256_bytes(b"print('2')\n")}
    assert named_files(argv, tree=tmp_path, cwd=tmp_path) == want
    assert named_files(argv, tree=tmp_path, cwd=tmp_path / "experiments/e") == want
    monkeypatch.chdir(tmp_path / "experiments/e")
    assert named_files(argv, tree=tmp_path) == want


def test_only_the_script_a_command_runs_is_hashed_not_the_data_files_after_it(tmp_path):
    # a log the grader appends to while it runs must not change its identity (nor every
    # call cache key) from one run to the next
    from relgrade.graders.cache import named_files, sha256_bytes

    (tmp_path / "grader.py").write_text("print(1)\n")
    (tmp_path / "calls.log").write_text("start\n")
    argv = ["python", str(tmp_path / "grader.py"), str(tmp_path / "calls.log")]
    first = named_files(argv, tree=tmp_path)
    assert first == {str(tmp_path / "grader.py"): sha256_bytes(b"print(1)\n")}
    (tmp_path / "calls.log").write_text("start\ndone\n")
    assert named_files(argv, tree=tmp_path) == first
