"""Every command the judge paths print works when it is run as printed, typed inside the
experiment's folder of a sub-experiment (docs/judges.md):

- the targeted re-check's loop, each step taken from the `owed:` line `judge status` prints
  (the people's side by the simulated person's command, `grade run --grader PERSON
  --recheck`), until the judge is calibrated;
- the refusals' `Run:` commands (`grade run --grader PERSON --recheck` before the draw,
  `judge recheck --grader PERSON`);
- an experiment with no human grader (the shipped crowd-sim) owes no calibration;
- the `dvc repro` that `judge status` and `relgrade reconcile` name for a sub-experiment is a
  target DVC accepts (checked with `dvc stage list` on a copy of the shipped ppi-sim).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main
from tests.graders import experiment as ex
from tests.test_judge_ledger import HUMAN

REPO = Path(__file__).resolve().parents[1]
SUB = "experiments/sub"


def _people_script(path: Path) -> None:
    """A simulated person: the grades of HUMAN, looked up by pair."""
    path.write_text(
        "import json, sys\n"
        f"grades = {json.dumps(HUMAN)}\n"
        "req = json.load(sys.stdin)\n"
        "for c in req['chunks']:\n"
        "    q, j = req['query_id'], int(c['chunk_id'].rsplit('-c', 1)[1])\n"
        "    g = grades[q][j] if q in grades else (2, 1, 0)[j % 3]\n"
        "    print(json.dumps({'query_id': q, 'chunk_id': c['chunk_id'],\n"
        "                      'reason': 'read it', 'grade': g}))\n")


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository whose experiment experiments/sub has the key's model judge grader-a (the
    test grader, sim/grader.py, every pair graded) and the person person-b (simulated, with
    a command; the auditor, the two audited queries graded); the shell is in its folder."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    sub = tmp_path / SUB
    paths = yaml.safe_load((REPO / "params.yaml").read_text())["paths"]
    ex.build(sub, paths={k: v for k, v in paths.items()
                         if k not in ("packets", "grades_in", "audit", "pool")}, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": [sys.executable, "sim/grader.py", "ok"], "timeout": 30,
                     "retries": 0},
        "person-b": {"role": "auditor", "kind": "human", "family": "human",
                     "command": [sys.executable, "sim/people.py"], "timeout": 30,
                     "retries": 0}})
    (sub / "sim").mkdir()
    shutil.copy(ex.GRADER, sub / "sim/grader.py")
    _people_script(sub / "sim/people.py")
    params = yaml.safe_load((sub / "params.yaml").read_text())
    params["grading"].update({"key_grader": "grader-a", "auditor": "person-b"})
    params.setdefault("agreement", {})["bootstrap"] = 1000
    params["judges"] = {"recheck": {"min_pairs": 6, "max_pairs": 9}}
    (sub / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    pairs = [(f"q{i:02d}", f"q{i:02d}-c{j}") for i in range(1, 5) for j in range(7)]
    (sub / "data/pool").mkdir(parents=True)
    pd.DataFrame({"query_id": [q for q, _ in pairs], "chunk_id": [c for _, c in pairs],
                  "inclusion_prob": [1.0] * len(pairs)}).to_parquet(
        sub / "data/pool/pool.parquet", index=False)
    monkeypatch.chdir(sub)
    for g in ("grader-a", "person-b"):
        res = cli("grade", "run", "--grader", g, "--experiment", SUB, "--no-progress")
        assert res.exit_code == 0, res.output
    return tmp_path


def cli(*args):
    return CliRunner().invoke(main, list(args))


def run_printed(command: str):
    """Run one command exactly as relgrade printed it (``relgrade ...``)."""
    argv = shlex.split(command)
    assert argv[0] == "relgrade", command
    return cli(*argv[1:])


def _grades_table(sub: Path) -> None:
    """The grades stage's table: grader-a's grade of every pool pair."""
    rows = [json.loads(x) for x in
            (sub / "data/grades/grader-a/round-1.jsonl").read_text().splitlines()]
    (sub / "data/graded").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"query_id": [r["query_id"] for r in rows],
                  "chunk_id": [r["chunk_id"] for r in rows], "grader": "grader-a",
                  "grade": [r["grade"] for r in rows]}).to_parquet(
        sub / "data/graded/grades.parquet", index=False)


def _owed_commands(status_output: str) -> list[str]:
    """The commands of grader-a's `owed:` line, in order (the people's side by the simulated
    person's command, the alternative printed in parentheses)."""
    line = next(x for x in status_output.splitlines() if x.startswith("judge: grader-a"))
    tail = line[line.index(": relgrade ") + 2:]
    out = []
    for step in tail.split("; "):
        alt = re.search(r"\(or, with \S+ command: (relgrade [^)]*)\)", step)
        out.append(alt.group(1) if alt else step)
    return out


def test_the_recheck_loop_runs_command_by_command_as_judge_status_prints_it(repo):
    sub = repo / SUB
    assert cli("judge", "record", "--experiment", SUB).exit_code == 0  # the first identity
    _grades_table(sub)
    script = sub / "sim/grader.py"
    script.write_text(script.read_text() + "# prompt: answer with the grade first\n")
    seen = []
    for _ in range(4):
        out = cli("judge", "status", "--experiment", SUB).output
        if "grader-a identity" in out and ": calibrated (" in out:
            break
        commands = _owed_commands(out)
        assert all(c.endswith(f"--experiment {SUB}") for c in commands), commands
        for command in commands:
            res = run_printed(command)
            assert res.exit_code == 0, (command, res.output)
            seen.append(shlex.split(command)[1:3])
    else:
        pytest.fail("the re-check was still owed after running every printed command")
    assert seen == [["judge", "recheck"], ["grade", "run"], ["grade", "run"],
                    ["judge", "record"]]
    # the draw's size is within judges.recheck (6..9) and both sides graded all of it
    (draw_file,) = (sub / "data/grades/grader-a/recheck").glob("*/draw.json")
    size = len(json.loads(draw_file.read_text())["pairs"])
    assert 6 <= size <= 9
    for who in ("grader-a", "person-b"):
        assert len((draw_file.parent / f"{who}.jsonl").read_text().splitlines()) == size


def test_refusals_for_a_person_name_commands_that_work(repo):
    _grades_table(repo / SUB)
    res = cli("grade", "run", "--grader", "person-b", "--recheck", "--experiment", SUB,
              "--no-progress")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    draw = res.output.split("Run: ")[1].strip()
    assert draw == f"relgrade judge recheck --grader grader-a --experiment {SUB}"
    assert run_printed(draw).exit_code == 0
    # judge recheck for the person is refused, naming the people's commands
    res = cli("judge", "recheck", "--grader", "person-b", "--experiment", SUB)
    assert res.exit_code == 1 and "person-b is a human grader" in res.output
    person = re.search(r"\(or, with person-b's command: (relgrade [^)]*)\)", res.output)
    res = run_printed(person.group(1))
    assert res.exit_code == 0, res.output
    assert "person-b: graded" in res.output


def test_an_experiment_with_no_human_grader_owes_no_calibration(repo):
    sub = repo / SUB
    params = yaml.safe_load((sub / "params.yaml").read_text())
    params["graders"]["person-b"]["kind"] = "model"
    (sub / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = cli("judge", "status", "--experiment", SUB).output
    lines = [x for x in out.splitlines() if x.startswith("judge: ")]
    assert len(lines) == 2 and all("owed:" not in x for x in lines)
    assert all("no people's grades to calibrate against" in x and "nothing owed" in x
               for x in lines)
    data = json.loads(cli("judge", "status", "--experiment", SUB, "--json").output)
    assert {s["state"] for s in data} == {"no people"} and all(s["owed"] is None for s in data)


# --- the dvc repro a sub-experiment's messages name ---------------------------------------------

def _shipped_copy(tmp_path: Path, name: str = "ppi-sim") -> Path:
    """A DVC repository holding a copy of a shipped experiment's committed files only."""
    root = tmp_path / "repo"
    (root / "stages").mkdir(parents=True)
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    tracked = subprocess.run(["git", "ls-files", f"experiments/{name}"], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
    assert f"experiments/{name}/dvc.yaml" in tracked
    for rel in tracked:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, root / rel)
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    return root


def test_the_shipped_crowd_sim_lists_its_seven_simulated_raters_with_nothing_owed(
        tmp_path, monkeypatch):
    root = _shipped_copy(tmp_path, "crowd-sim")
    monkeypatch.chdir(root)
    res = cli("judge", "status", "--experiment", "experiments/crowd-sim")
    assert res.exit_code == 0, res.output
    lines = [x for x in res.output.splitlines() if x.startswith("judge: ")]
    assert len(lines) == 7 and not any("owed:" in x for x in lines)
    assert all("no people's grades to calibrate against" in x for x in lines)


def _dvc_accepts(root: Path, command: str) -> None:
    """``dvc repro TARGET`` names stages DVC knows: ``dvc stage list TARGET`` lists some."""
    argv = shlex.split(command)
    assert argv[:2] == ["dvc", "repro"] and len(argv) == 3, command
    done = subprocess.run(["dvc", "stage", "list", argv[2]], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


def test_judge_status_and_reconcile_name_the_sub_experiments_dvc_repro(tmp_path, monkeypatch):
    root = _shipped_copy(tmp_path)
    monkeypatch.chdir(root)
    out = cli("judge", "status", "--experiment", "experiments/ppi-sim").output
    repro = out.split("the grades table is not built yet. Run: ")[1].splitlines()[0]
    assert repro == "dvc repro experiments/ppi-sim/dvc.yaml"
    _dvc_accepts(root, repro)
    ab = tmp_path / "ab.jsonl"
    ab.write_text(json.dumps({"control": "bm25", "treatment": "tfidf", "metric": "ctr",
                              "delta": 0.01, "low": 0.0, "high": 0.02}) + "\n")
    res = cli("reconcile", "--ab", str(ab), "--experiment", "experiments/ppi-sim")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    repro = res.output.split("Run the metrics stage first: ")[1].strip()
    assert repro == "dvc repro experiments/ppi-sim/dvc.yaml:metrics"
    _dvc_accepts(root, repro)


def test_judge_record_without_pairs_of_the_judge_now_names_the_recheck_that_draws_them(repo):
    sub = repo / SUB
    _grades_table(sub)
    script = sub / "sim/grader.py"
    script.write_text(script.read_text() + "# prompt: answer with the grade first\n")
    res = cli("judge", "record", "--experiment", SUB)
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    assert "grade run does not ask again for a current grade" in res.output
    draw = "relgrade judge recheck " + res.output.split("relgrade judge recheck ")[1].strip()
    assert draw == f"relgrade judge recheck --grader grader-a --experiment {SUB}"
    res = run_printed(draw)
    assert res.exit_code == 0 and "drawn and locked in" in res.output, res.output


def test_a_person_without_a_command_is_sent_to_the_packets_export_that_works(repo):
    sub = repo / SUB
    _grades_table(sub)
    params = yaml.safe_load((sub / "params.yaml").read_text())
    del params["graders"]["person-b"]["command"]
    (sub / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    res = cli("grade", "run", "--grader", "person-b", "--experiment", SUB, "--no-progress")
    assert res.exit_code == 1
    assert f"`relgrade serve --grader person-b --experiment {SUB}`" in res.output
    assert f"`relgrade grade import --grader person-b FILE --experiment {SUB}`" in res.output
    script = sub / "sim/grader.py"
    script.write_text(script.read_text() + "# prompt: answer with the grade first\n")
    assert cli("judge", "recheck", "--grader", "grader-a", "--experiment", SUB).exit_code == 0
    res = cli("grade", "run", "--grader", "person-b", "--recheck", "--experiment", SUB,
              "--no-progress")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    assert "person-b has no command: people grade the re-check of grader-a by hand" in res.output
    export = "relgrade packets export " + res.output.split("relgrade packets export ")[1] \
        .split(", then ")[0]
    res = run_printed(export)
    assert res.exit_code == 0, res.output
    assert re.search(r"the [6-9] pairs person-b still owes", res.output)  # the whole draw
    assert (sub / "recheck.jsonl").is_file()
    assert f"--recheck grader-a --experiment {SUB}" in res.output  # the import it names
