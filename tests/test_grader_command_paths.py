"""A grader command's paths are read from the experiment's folder (then from the repository's
top, the form the shipped experiments write), once, whatever folder `relgrade grade run` is
typed in; a script that is not there is one `Error:` line, never a retried failure.

The printed command (`relgrade grade run --grader NAME --experiment experiments/NAME`, as
`judge status` prints it) is run from the repository's top and from inside the experiment's
folder, on the tiny grading set-up of tests/graders/experiment.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.graders.command import resolve_command
from tests.graders import experiment as ex


def _repo(tmp_path: Path, command: list[str]) -> Path:
    """A repository whose experiment experiments/sub has the model grader grader-a running
    ``command`` (the test grader script copied to experiments/sub/sim/grader.py)."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    sub = tmp_path / "experiments" / "sub"
    ex.build(sub, graders={"grader-a": {"role": "grader", "kind": "model", "family": "test",
                                        "command": command, "timeout": 30, "retries": 2}})
    (sub / "sim").mkdir()
    shutil.copy(ex.GRADER, sub / "sim" / "grader.py")
    return tmp_path


def _run(cwd: Path, monkeypatch, *args):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(main, list(args))


def test_relative_script_paths_resolve_from_the_experiment_folder_then_the_top(tmp_path):
    top = tmp_path
    (top / "experiments/sub/sim").mkdir(parents=True)
    script = top / "experiments/sub/sim/grader.py"
    script.write_text("print()\n")
    folder = top / "experiments/sub"
    want = ("python", str(script.resolve()), "--seed", "7")
    # written relative to the experiment's folder, or to the top as the shipped ones are
    assert resolve_command(["python", "sim/grader.py", "--seed", "7"], grader="g",
                           folder=folder, tree=top) == want
    assert resolve_command(["python", "experiments/sub/sim/grader.py", "--seed", "7"],
                           grader="g", folder=folder, tree=top) == want
    # a program on PATH and options stay as written
    assert resolve_command(["llm", "-m", "my-model"], grader="g", folder=folder,
                           tree=top) == ("llm", "-m", "my-model")


def test_with_no_relgrade_top_a_script_path_resolves_from_the_folder_typed_in(tmp_path,
                                                                            monkeypatch):
    # a folder of experiments with no top dvc.yaml: the experiment is its own working tree,
    # and a path written from the folder the command is typed in resolves from there
    (tmp_path / "experiments/sub/sim").mkdir(parents=True)
    script = tmp_path / "experiments/sub/sim/grader.py"
    script.write_text("print()\n")
    folder = tmp_path / "experiments/sub"
    monkeypatch.chdir(tmp_path)
    assert resolve_command(["python", "experiments/sub/sim/grader.py"], grader="g",
                           folder=folder, tree=folder) == ("python", str(script.resolve()))


def test_a_missing_script_is_an_error_naming_the_grader_and_both_places_looked(tmp_path):
    with pytest.raises(InputError) as err:
        resolve_command(["python", "sim/gone.py"], grader="model-m", folder=tmp_path / "e",
                        tree=tmp_path)
    text = str(err.value)
    assert "grader model-m" in text and "graders.model-m.command" in text
    assert str(tmp_path / "e" / "sim/gone.py") in text and str(tmp_path / "sim/gone.py") in text


@pytest.mark.parametrize("written", ["experiments/sub/sim/grader.py", "sim/grader.py"])
@pytest.mark.parametrize("where", ["top", "experiment folder"])
def test_the_printed_grade_run_works_from_the_top_and_from_inside_the_experiment(
        tmp_path, monkeypatch, written, where):
    root = _repo(tmp_path, [sys.executable, written, "ok"])
    cwd = root if where == "top" else root / "experiments/sub"
    res = _run(cwd, monkeypatch, "grade", "run", "--grader", "grader-a", "--experiment",
               "experiments/sub", "--no-progress")
    assert res.exit_code == 0, res.output
    # 4 queries of 7 chunks in batches of 5: 8 batches, one process each, none failed
    assert "grader-a: graded 28 pairs in 8 batches" in res.output
    assert "failed 0 batches" in res.output


def test_the_judge_identity_does_not_depend_on_the_folder_the_command_is_typed_in(
        tmp_path, monkeypatch):
    root = _repo(tmp_path, [sys.executable, "sim/grader.py", "ok"])
    ids = []
    for cwd in (root, root / "experiments/sub"):
        res = _run(cwd, monkeypatch, "judge", "status", "--experiment", "experiments/sub")
        assert res.exit_code == 0, res.output
        ids.append(next(w for line in res.output.splitlines() if line.startswith("judge:")
                        for w in [line.split("identity ")[1].split(":")[0]]))
    assert ids[0] == ids[1]


def test_a_missing_grader_script_is_one_error_line_and_starts_no_process(
        tmp_path, monkeypatch):
    root = _repo(tmp_path, [sys.executable, "sim/grader.py", "ok"])
    sub = root / "experiments/sub"
    # two of the 8 batches recorded (the run stops at the cap), 6 still owed
    res = _run(sub, monkeypatch, "grade", "run", "--grader", "grader-a", "--no-progress",
               "--max-calls", "2")
    assert res.exit_code == 0, res.output
    grades = sub / "data/grades/grader-a/round-1.jsonl"
    kept = grades.read_bytes()
    (sub / "sim/grader.py").rename(sub / "sim/moved.py")
    res = _run(root, monkeypatch, "grade", "run", "--grader", "grader-a", "--experiment",
               "experiments/sub", "--no-progress")
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "grader grader-a" in lines[0] and "sim/grader.py" in lines[0]
    assert "not retried" in lines[0] and "failed:" not in res.output
    assert grades.read_bytes() == kept
