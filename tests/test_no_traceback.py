"""No Python traceback reaches a user: each bad input ends in one ``Error:`` line.

First the cases found by attacking the CLI (a write through a file, option values and a text
file that are not UTF-8, a control character in an experiment's folder, a call cache that
is a folder); then two checks over the whole command tree, enumerated from click: every
text option or argument given bytes that are not UTF-8, and every input file given such
bytes, is refused with ``Error:`` and exit 1.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main
from tests.e2e import tiny

BAD = b"bad \xff\xfe text\n"
#: What Python makes of the byte 0xff on a command line (surrogateescape).
BAD_ARG = "bad\udcff"
GRADER = Path(__file__).with_name("graders") / "tiny_grader.py"


def relgrade(root: Path, *args) -> subprocess.CompletedProcess:
    """Run the installed command as a user does; arguments may be bytes."""
    exe = Path(sys.executable).with_name("relgrade")
    return subprocess.run([str(exe), *args], cwd=root, capture_output=True,
                          stdin=subprocess.DEVNULL)


def one_error(proc) -> str:
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "Traceback" not in proc.stdout.decode("utf-8")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return lines[0]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The tiny experiment's inputs and params (no pipeline run: the refusals come first)."""
    root = tmp_path_factory.mktemp("inputs")
    tiny.write_inputs(root)
    return root


# --- the cases found ------------------------------------------------------------------

@pytest.mark.parametrize("args, option", [
    ([b"--reason", b"cut \xff"], "--reason"),
    ([b"--reason=cut \xff"], "--reason"),
    ([b"--reason", b"ok", b"--by", b"Jos\xc3"], "--by"),
], ids=["reason", "reason=", "by"])
def test_correct_with_an_option_that_is_not_utf8_names_the_option(inputs, args, option):
    line = one_error(relgrade(inputs, "grade", "correct", "kw01", "kw01-miss1", "--grade", "1",
                              *args))
    assert line.startswith(f"Error: {option}: not valid UTF-8 text (found byte 0x")


def test_corpus_edit_with_a_text_file_that_is_not_utf8_names_the_file_and_line(inputs):
    (inputs / "new.txt").write_bytes(b"first line\nbad \xff\n")
    line = one_error(relgrade(inputs, "corpus", "edit", "kw01-miss1", "--text-file", "new.txt"))
    assert line == ("Error: new.txt:2: not valid UTF-8 (found byte 0xff at column 5). "
                    "Save the file as UTF-8")


def test_export_through_a_file_names_the_path_and_a_missing_folder_is_made(tmp_path):
    from tests.graders import experiment as ex

    ex.build(tmp_path, queries=1, chunks=3, paths={"call_cache": "data/cache.jsonl"},
             graders={"grader-a": {"role": "grader", "kind": "model", "family": "test",
                                   "model_id": "test-model-1", "command": ex.command("ok")}})
    export = ("grade", "export", "--batch", "openai", "--grader", "grader-a", "-o")
    line = one_error(relgrade(tmp_path, *export, "params.yaml/requests.jsonl"))
    assert line == ("Error: params.yaml/requests.jsonl: cannot write there: a part of the "
                    "path is a file, not a folder (found params.yaml). Name a file in a folder "
                    "(one that exists, or can be made)")
    made = relgrade(tmp_path, *export, "new/folder/requests.jsonl")
    assert made.returncode == 0, made.stderr
    assert len((tmp_path / "new/folder/requests.jsonl").read_text().splitlines()) == 1


@pytest.mark.parametrize("folder, found", [("experiments/a\nb/c", "U+000A at character 14"),
                                           ("experiments/x\u202e/c", "U+202E at character 14")],
                         ids=["newline", "bidi"])
def test_init_refuses_a_control_character_in_the_folder_path(tmp_path, folder, found):
    tiny.write_inputs(tmp_path)
    line = one_error(relgrade(tmp_path, "init", folder, "--corpus", "data/input/chunks.jsonl",
                              "--queries", "data/input/queries.tsv", "--intents",
                              "data/input/intents.tsv", "--arm", "bm25=bm25"))
    shown = folder.replace("\n", "\\u000a").replace("\u202e", "\\u202e")
    assert line.startswith(f"Error: {shown}: an experiment's folder path holds no control, "
                           f"format or line-separator character (found {found})")
    assert not (tmp_path / "experiments").exists()


def test_a_call_cache_that_is_a_folder_is_refused_by_name(tmp_path):
    tiny.write_inputs(tmp_path)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["paths"]["call_cache"] = "data/cache"
    params["graders"]["grader-a"]["command"] = [sys.executable, str(GRADER)]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "data/cache").mkdir()
    line = one_error(relgrade(tmp_path, "grade", "run", "--grader", "grader-a"))
    assert line == (f"Error: {tmp_path / 'data/cache'}: paths.call_cache: the call cache is a file (JSON "
                    "Lines); this path is a folder. Name a file, e.g. "
                    "data/private/call-cache.jsonl")


# --- the whole command tree -----------------------------------------------------------

def commands(group=main, path=()):
    """(command path, click command) for every leaf command."""
    for name in group.list_commands(None):
        command = group.commands[name]
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


#: Path parameters that name something written (or a folder), never a file read.
OUTPUTS = {"--out", "-o", "folder", "--experiment", "--rankings", "--click-key"}


def filled(command, target, value) -> list[str]:
    """A command line giving ``target`` ``value`` and every other required parameter a
    plausible placeholder (a file for a path, the first choice, 1 for a number)."""
    args, rest = [], []
    for p in command.params:
        if p.name == target.name:
            given = value
        elif p.required:
            given = {click.Choice: lambda t: t.choices[0], click.Path: lambda t: "params.yaml",
                     click.types.IntParamType: lambda t: "1",
                     click.types.IntRange: lambda t: "1"}.get(type(p.type),
                                                              lambda t: "x")(p.type)
        else:
            continue
        if isinstance(p, click.Argument):
            rest += [given] * (1 if p.nargs == 1 else 1)
        else:
            args += [p.opts[0], given]
    return [*args, *rest]


def text_params():
    for path, command in commands():
        for p in command.params:
            if getattr(p, "is_flag", False) or p.name in ("help",):
                continue
            if isinstance(p.type, (click.types.StringParamType, click.Path)):
                yield pytest.param(path, command, p, id=f"{' '.join(path)} {p.opts[0]}")


def input_files():
    for path, command in commands():
        for p in command.params:
            if isinstance(p.type, click.Path) and p.opts[0] not in OUTPUTS:
                yield pytest.param(path, command, p, id=f"{' '.join(path)} {p.opts[0]}")


def check_refused(result, name):
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}")
    assert result.exit_code != 0, result.output
    assert "Error:" in result.output


@pytest.mark.parametrize("path, command, param", list(text_params()))
def test_no_text_option_takes_bytes_that_are_not_utf8(inputs, monkeypatch, path, command, param):
    monkeypatch.chdir(inputs)
    result = CliRunner().invoke(main, [*path, *filled(command, param, BAD_ARG)])
    check_refused(result, param.opts[0])
    name = param.opts[0] if isinstance(param, click.Option) else "argument"
    assert f"{name}" in result.output and "not valid UTF-8 text" in result.output


#: The file name suffix each input expects, so the reader of that format is reached.
SUFFIX = {"--grades": ".jsonl", "--gold": ".jsonl", "log_path": ".csv", "--per-query": ".tsv",
          "--corpus": ".jsonl", "--queries": ".tsv", "--intents": ".tsv", "--query-log": ".tsv",
          "--click-log": ".csv", "--groups": ".tsv", "file": ".jsonl", "--batch": ".jsonl",
          "--text-file": ".txt", "--params": ".yaml", "--tokens": ".yaml", "--inclusion": ".tsv",
          "--propensity": ".json"}
#: Inputs refused for an earlier reason than their bytes, here: the command needs more than
#: one placeholder can give (a second run, a human grader, a query log's own command, an
#: experiment's pool). Each still ends in one ``Error:`` line, checked below.
EARLIER = {"compare --qrels", "compare --groups", "compare --params", "grade import file",
           "grade import --params", "serve --tokens", "clicks pairs log_path",
           "corpus export --corpus", "corpus export --params", "init --gold",
           "init --click-log", "init --query-log", "init --queries", "evaluate run_paths", "evaluate --inclusion",
           "agreement b", "aggregate --gold",
           # an A/B results file must be read first (the placeholder is not one)
           "reconcile --segments", "reconcile --query-log",
           # a sampled experiment (params queries.log) and a share first
           "drift --log", "queries refresh --log", "queries refresh --params"}


@pytest.mark.parametrize("path, command, param", list(input_files()))
def test_no_input_file_of_bytes_that_are_not_utf8_raises_a_traceback(inputs, monkeypatch, path,
                                                                     command, param):
    monkeypatch.chdir(inputs)
    bad = inputs / f"bad-bytes{SUFFIX.get(param.opts[0], '.txt')}"
    bad.write_bytes(BAD)
    args = filled(command, param, str(bad))
    if path == ("init",):
        args = ["experiments/new" if a == "params.yaml" else a for a in args]
        for option, good in (("--corpus", "data/input/chunks.jsonl"),
                             ("--queries", "data/input/queries.tsv"),
                             ("--intents", "data/input/intents.tsv")):
            if param.opts[0] != option:
                args += [option, good]
    result = CliRunner().invoke(main, [*path, *args])
    check_refused(result, param.opts[0])
    if f"{' '.join(path)} {param.opts[0]}" not in EARLIER:
        assert f"{bad.name}" in result.output, result.output


def test_the_tree_walk_sees_every_command():
    seen = {" ".join(p) for p, _ in commands()}
    assert {"grade correct", "grade run", "corpus edit", "init", "serve", "status"} <= seen
    assert {"arm add", "arm remove", "judge status", "judge record", "judge recheck"} <= seen
    assert {"judge probe", "metrics exp", "reconcile", "disputes import", "drift",
            "queries refresh"} <= seen
    assert "pipeline list" in seen
    assert len(seen) == 41
