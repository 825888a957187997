"""The call cache: a request answered once is never sent to the grader command again.

The grader is the real test script (tests/graders/grader.py) run as real processes; with
RELGRADE_TEST_COUNTER it appends the sha256 of every request it answered to a counter file,
so the counter's lines are the calls made, and a repeated line a request sent twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.graders.cache import CallCache, cache_counts, call_key, command_identity
from relgrade.graders.store import append_lines, read_bank
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")
CACHE = {"call_cache": "../shared/call-cache.jsonl"}  # beside the experiments: shared


@pytest.fixture(autouse=True)
def repository(tmp_path):
    """Every test's folder is a relgrade repository (stages/ and dvc.yaml), so the shared
    cache beside its experiments lies inside the working tree."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    return tmp_path


def graders(mode="ok", **kw):
    return {"grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "command": ex.command(mode), "timeout": 30, "retries": 1, **kw}}


def run(root):
    return CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--params",
                                     str(root / "params.yaml"), "--no-progress"])


def grades_file(root):
    return root / "data/grades/grader-a/round-1.jsonl"


def calls(counter: Path) -> list[str]:
    return counter.read_text().split() if counter.exists() else []


def bank_marks(root) -> dict:
    """(query, chunk) -> the cache mark of its last bank line."""
    return {(r["query_id"], r["chunk_id"]): r.get("cache") for _, r in read_bank(grades_file(root))}


def rows(root):
    return sorted((r["query_id"], r["chunk_id"], r["grade"])
                  for r in ex.read_rows(grades_file(root)))


# --- the key and the file ------------------------------------------------------------

def test_the_key_is_the_sha256_of_the_documented_canonical_json():
    identity = command_identity(["g", "-x"], input_mode="json", grader="grader-a",
                                role="grader", files={"g": "ab" * 32}, env={"MODEL": None},
                                template="T", rubric=b"R", samples=3,
                                settings={"temperature": 0})
    t, r = hashlib.sha256(b"T").hexdigest().encode(), hashlib.sha256(b"R").hexdigest().encode()
    expected = hashlib.sha256(
        b'{"cache":"relgrade-call-cache/3","identity":{"grader":"grader-a","role":"grader",'
        b'"command":["g","-x"],"input":"json","files":{"g":"' + b"ab" * 32 + b'"},'
        b'"env":{"MODEL":null},"template":"' + t + b'","rubric":"' + r + b'",'
        b'"samples":3,"settings":{"temperature":0}},'
        b'"request":"{\\"q\\":\\"\xc3\xa9\\"}\\n"}').hexdigest()
    assert call_key(identity, '{"q":"é"}\n'.encode()) == expected


def test_a_torn_last_line_is_skipped_on_open_and_cut_by_the_next_append(tmp_path):
    path = tmp_path / "calls.jsonl"
    k1, k2, k3 = "1" * 64, "2" * 64, "3" * 64
    path.write_text(json.dumps({"key": k1, "answer": "A1", "cached_at": "t"}) + "\n"
                    + '{"key": "' + k2 + '", "answ')  # a crash cut the second line short
    cache = CallCache(path)
    assert (cache.get(k1), cache.get(k2), len(cache)) == ("A1", None, 1)
    cache.put(k3, "A3")
    lines = path.read_text().splitlines()
    assert [json.loads(x)["key"] for x in lines] == [k1, k3]
    assert CallCache(path).get(k3) == "A3"


def test_a_malformed_complete_line_is_refused_naming_the_file_and_line(tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_text(json.dumps({"key": "1" * 64, "answer": "A"}) + "\n"
                    + json.dumps({"key": "short", "answer": "B"}) + "\n")
    with pytest.raises(InputError, match=r"calls.jsonl:2: a call cache line must be a JSON "
                                         r"object with a 64-hex `key`"):
        CallCache(path)


def test_answers_another_process_appended_are_found_without_reopening(tmp_path):
    path = tmp_path / "calls.jsonl"
    cache = CallCache(path)
    assert cache.get("4" * 64) is None
    append_lines(path, (json.dumps({"key": "4" * 64, "answer": "A4"}) + "\n").encode())
    assert cache.get("4" * 64) == "A4"


# --- grade run with the cache ----------------------------------------------------------

def test_a_second_experiment_with_the_same_packets_starts_no_grader_process(tmp_path,
                                                                             monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    one, two = tmp_path / "one", tmp_path / "two"
    ex.build(one, queries=3, chunks=7, graders=graders(), paths=CACHE)
    ex.build(two, queries=3, chunks=7, graders=graders(), paths=CACHE)
    first = run(one)
    assert first.exit_code == 0, first.output
    assert len(calls(counter)) == 6  # 3 queries x 2 batches (5 + 2 chunks)
    assert "call cache: 0 requests answered from the cache, 6 sent to the command" in \
        first.output
    second = run(two)
    assert second.exit_code == 0, second.output
    assert len(calls(counter)) == 6, "the second run started a grader process"
    assert "6 requests answered from the cache, 0 sent" in second.output
    assert "0 processes" in second.output
    assert rows(two) == rows(one)
    assert set(bank_marks(one).values()) == {"miss"} and set(bank_marks(two).values()) == {"hit"}
    assert cache_counts(read_bank(grades_file(two))) == {"hit": 21, "miss": 0, "none": 0}


def _edit(root, qid, change):
    for role in ("grader", "auditor"):
        f = root / "data/packets" / role / f"{qid}.json"
        if f.exists():
            p = json.loads(f.read_text())
            change(p)
            f.write_text(json.dumps(p))


def _new_intent(p):
    p["intent"] = "Find where f is called, not where it is defined."


def _new_text(p):
    for b in p["batches"]:
        for c in b:
            if c["chunk_id"] == "q02-c3":
                c["text"] += "# edited\n"


def test_a_changed_intent_or_chunk_misses_the_cache_for_exactly_those_pairs(tmp_path,
                                                                            monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    root = tmp_path / "one"
    ex.build(root, queries=3, chunks=7, graders=graders(), paths=CACHE)
    assert run(root).exit_code == 0
    assert len(calls(counter)) == 6
    _edit(root, "q01", _new_intent)
    _edit(root, "q02", _new_text)
    again = run(root)
    assert again.exit_code == 0, again.output
    # q01's two batches (new intent) and q02's chunk c3 alone (its other pairs are current)
    assert len(calls(counter)) == 6 + 3
    bank = read_bank(grades_file(root))
    new_lines = [(r["query_id"], r["chunk_id"], r["cache"]) for _, r in bank[21:]]
    assert sorted(new_lines) == sorted([("q01", f"q01-c{j}", "miss") for j in range(7)]
                                       + [("q02", "q02-c3", "miss")])
    # the same edits in a fresh experiment sharing the cache: those requests hit too now
    fresh = tmp_path / "two"
    ex.build(fresh, queries=3, chunks=7, graders=graders(), paths=CACHE)
    _edit(fresh, "q01", _new_intent)
    third = run(fresh)
    assert third.exit_code == 0
    assert len(calls(counter)) == 9, "a request answered before was sent again"
    assert Counter(bank_marks(fresh).values()) == Counter({"hit": 21})


def test_a_refused_answer_is_not_cached_and_its_accepted_retry_is(tmp_path, monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    one, two = tmp_path / "one", tmp_path / "two"
    ex.build(one, queries=1, chunks=3, graders=graders("flaky"), paths=CACHE)
    ex.build(two, queries=1, chunks=3, graders=graders("flaky"), paths=CACHE)
    assert run(one).exit_code == 0
    assert len(calls(counter)) == 2  # attempt 1 refused (not JSON), attempt 2 accepted
    assert len(CallCache(tmp_path / "shared/call-cache.jsonl")) == 1
    second = run(two)
    assert second.exit_code == 0
    # attempt 1 is asked again (its refusal was not kept); attempt 2 comes from the cache
    assert len(calls(counter)) == 3
    assert "retried 1 attempts" in second.output
    assert set(bank_marks(two).values()) == {"hit"}


def answered_then_uncached(tmp_path, monkeypatch):
    """Two experiments sharing a cache; the first graded (one call), then its cache entry
    removed, as if the run died after the command answered but before the answer was cached.
    Returns the counter, both experiments, the cache file and the removed entry."""
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    one, two = tmp_path / "one", tmp_path / "two"
    ex.build(one, queries=1, chunks=3, graders=graders(), paths=CACHE)
    ex.build(two, queries=1, chunks=3, graders=graders(), paths=CACHE)
    assert run(one).exit_code == 0
    cache_file = tmp_path / "shared/call-cache.jsonl"
    (line,) = cache_file.read_text().splitlines()
    entry = json.loads(line)
    cache_file.unlink()
    spool = tmp_path / "shared/call-cache.jsonl.spool"
    spool.mkdir(exist_ok=True)
    return counter, one, two, cache_file, entry, spool


def test_an_answer_left_in_the_spool_by_a_killed_run_is_used_without_a_process(tmp_path,
                                                                              monkeypatch):
    counter, one, two, cache_file, entry, spool = answered_then_uncached(tmp_path, monkeypatch)
    (spool / f"{entry['key']}.x.out").write_text(entry["answer"])
    (spool / f"{entry['key']}.y.out").write_text(entry["answer"][:20])  # cut short: ignored
    second = run(two)
    assert second.exit_code == 0, second.output
    assert len(calls(counter)) == 1
    assert CallCache(cache_file).get(entry["key"]) == entry["answer"]
    assert list(spool.iterdir()) == []
    assert rows(two) == rows(one)


def test_a_spool_file_still_being_written_is_waited_for_not_asked_again(tmp_path,
                                                                         monkeypatch):
    counter, one, two, cache_file, entry, spool = answered_then_uncached(tmp_path, monkeypatch)
    # a killed run's grader process that has not died yet: it holds its spool file (locked
    # as the runners lock it) and prints its answer 1.5 s after the next run starts
    target = spool / f"{entry['key']}.orphan.out"
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from relgrade.graders.raytask import open_spool\n"
         "f = open_spool(sys.argv[1])\n"
         "time.sleep(1.5)\n"
         "f.write(sys.argv[2].encode()); f.flush()\n",
         str(target), entry["answer"]], env=ENV)
    deadline = time.monotonic() + 30
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert target.exists() and target.read_bytes() == b""  # locked, still empty
    second = run(two)
    assert writer.wait(30) == 0
    assert second.exit_code == 0, second.output
    assert len(calls(counter)) == 1  # the first run's call only: nothing asked twice
    assert CallCache(cache_file).get(entry["key"]) == entry["answer"]
    assert list(spool.iterdir()) == []
    assert rows(two) == rows(one)


# --- kill -9 ------------------------------------------------------------------------

@pytest.mark.slow
def test_kill_9_mid_run_then_a_rerun_sends_no_request_twice(tmp_path):
    counter = tmp_path / "calls"
    env = dict(ENV, RELGRADE_TEST_COUNTER=str(counter))
    root = tmp_path / "one"
    packets = ex.build(root, queries=30, chunks=10, graders=graders("sleep:0.5", workers=4),
                       paths=CACHE)
    cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
           "--grader", "grader-a", "--params", str(root / "params.yaml"), "--no-progress"]
    for delay in (0.9, 1.3, 0.7, 1.1):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # kill once this run has made a call of its own (so it is grading), at a moment
        # when processes are in flight
        start = len(calls(counter))
        deadline = time.monotonic() + 60
        while len(calls(counter)) == start and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        assert proc.poll() is None, "the run finished before it was killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.3)  # the lock held by a child caught mid-fork is released at its exec
    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    made = calls(counter)
    assert len(made) == len(set(made)), "a request was answered twice"
    assert len(made) == 60  # 30 queries x 2 batches, each answered exactly once
    got = ex.read_rows(grades_file(root))
    assert len(got) == len({(r["query_id"], r["chunk_id"]) for r in got}) == \
        sum(len(b) for p in packets.values() for b in p["batches"])


def test_status_shows_each_graders_cache_hits_and_misses(tmp_path):
    from relgrade.cli.status import _call_cache
    from relgrade.experiment.files import Experiment

    ex.build(tmp_path / "one", queries=2, chunks=5, graders=graders(), paths=CACHE)
    ex.build(tmp_path / "two", queries=2, chunks=5, graders=graders(), paths=CACHE)
    assert run(tmp_path / "one").exit_code == 0
    assert run(tmp_path / "two").exit_code == 0
    st: dict = {}
    lines = _call_cache(Experiment.load(tmp_path / "two/params.yaml"), st)
    assert lines == ["call cache: grader-a 10 of 10 grades answered from the cache, 0 by a call"]
    assert st["call_cache"] == {"grader-a": {"hit": 10, "miss": 0, "none": 0}}
    st = {}
    _call_cache(Experiment.load(tmp_path / "one/params.yaml"), st)
    assert st["call_cache"] == {"grader-a": {"hit": 0, "miss": 10, "none": 0}}


# --- whose answer: the grader, its script, its environment, and where the cache lies ---------

def test_two_graders_with_one_command_on_one_prompt_each_call_their_command(tmp_path,
                                                                             monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    root = tmp_path / "one"
    same = {"role": "grader", "kind": "model", "family": "test", "input": "prompt",
            "command": ex.command("prompt"), "timeout": 30, "retries": 1}
    ex.build(root, queries=3, chunks=7, graders={"grader-a": same, "grader-c": same},
             paths=CACHE)
    for name in ("grader-a", "grader-c"):
        res = CliRunner().invoke(main, ["grade", "run", "--grader", name, "--params",
                                        str(root / "params.yaml"), "--no-progress"])
        assert res.exit_code == 0, res.output
        assert "call cache: 0 requests answered from the cache, 6 sent to the command" in \
            res.output
    made = calls(counter)
    # the same six prompts, each answered once by each grader's own process
    assert len(made) == 12 and set(Counter(made).values()) == {2}
    for name in ("grader-a", "grader-c"):
        bank = read_bank(root / f"data/grades/{name}/round-1.jsonl")
        assert cache_counts(bank) == {"hit": 0, "miss": 21, "none": 0}
    assert len(CallCache(tmp_path / "shared/call-cache.jsonl")) == 12


def _script_in_tree(tmp_path) -> Path:
    """The test grader copied into the repository's working tree, as a grader script."""
    script = tmp_path / "graders/grader.py"
    script.parent.mkdir()
    script.write_bytes(ex.GRADER.read_bytes())
    return script


def test_an_edited_grader_script_misses_the_cache(tmp_path, monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    script = _script_in_tree(tmp_path)
    spec = graders()
    spec["grader-a"]["command"] = [sys.executable, str(script), "ok"]
    for name in ("one", "two", "three"):
        ex.build(tmp_path / name, queries=2, chunks=3, graders=spec, paths=CACHE)
    assert run(tmp_path / "one").exit_code == 0
    assert len(calls(counter)) == 2  # 2 queries x 1 batch
    assert run(tmp_path / "two").exit_code == 0
    assert len(calls(counter)) == 2, "the same script was asked again"
    script.write_bytes(script.read_bytes() + b"# reads the chunk more carefully now\n")
    third = run(tmp_path / "three")
    assert third.exit_code == 0, third.output
    assert len(calls(counter)) == 4, "the edited script was answered from the cache"
    assert set(bank_marks(tmp_path / "three").values()) == {"miss"}


def test_a_declared_environment_variable_changed_misses_the_cache(tmp_path, monkeypatch):
    counter = tmp_path / "calls"
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(counter))
    spec = graders(env_keys=["RELGRADE_TEST_MODEL"])
    for name in ("one", "two", "three", "four"):
        ex.build(tmp_path / name, queries=2, chunks=3, graders=spec, paths=CACHE)
    monkeypatch.setenv("RELGRADE_TEST_MODEL", "model-1")
    assert run(tmp_path / "one").exit_code == 0
    assert len(calls(counter)) == 2
    monkeypatch.setenv("RELGRADE_TEST_UNDECLARED", "anything")  # not declared: not in the key
    assert run(tmp_path / "two").exit_code == 0
    assert len(calls(counter)) == 2
    monkeypatch.setenv("RELGRADE_TEST_MODEL", "model-2")
    assert run(tmp_path / "three").exit_code == 0
    assert len(calls(counter)) == 4, "a changed declared variable was answered from the cache"
    monkeypatch.delenv("RELGRADE_TEST_MODEL")  # unset is a value of its own too
    assert run(tmp_path / "four").exit_code == 0
    assert len(calls(counter)) == 6


def test_env_keys_must_be_distinct_variable_names(tmp_path):
    root = tmp_path / "one"
    ex.build(root, queries=1, chunks=3, graders=graders(env_keys=["MODEL", "2BAD"]))
    res = run(root)
    assert res.exit_code == 1
    assert res.output == (f"Error: {root / 'params.yaml'}: graders.grader-a.env_keys: must be "
                          "a list of distinct environment variable names (letters, digits and "
                          "_) (found ['MODEL', '2BAD'])\n")


@pytest.mark.parametrize("how", ["absolute", "climbing", "symlinked"])
def test_a_call_cache_outside_the_working_tree_is_refused(tmp_path, how):
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "stages").mkdir(parents=True)
    (repo / "dvc.yaml").write_text("stages: {}\n")
    outside.mkdir()
    root = repo / "experiments/one"
    entry = {"absolute": str(outside / "call-cache.jsonl"),
             "climbing": "../../../outside/call-cache.jsonl",
             "symlinked": "private/call-cache.jsonl"}[how]
    ex.build(root, queries=1, chunks=3, graders=graders(), paths={"call_cache": entry})
    if how == "symlinked":
        (root / "private").symlink_to(outside, target_is_directory=True)
    res = run(root)
    assert res.exit_code == 1
    rule = ("the call cache is named relative to the experiment, never by an absolute path"
            if how == "absolute" else
            "the call cache lies outside the repository's working tree")
    found = (entry if how == "absolute" else
             f"{entry} resolves to {(outside / 'call-cache.jsonl').as_posix()}, outside "
             f"{repo.resolve().as_posix()}")
    assert res.output == (f"Error: {root / 'params.yaml'}: paths.call_cache: {rule} (found "
                          f"{found}). Keep the call cache inside the repository, relative to "
                          "the experiment (e.g. data/private/call-cache.jsonl, or "
                          "../shared/call-cache.jsonl for experiments that share it)\n")
    assert list(outside.iterdir()) == []  # nothing created there
    assert not grades_file(root).exists()


def test_a_ray_task_sees_the_declared_variables_exactly_as_the_key_holds_them(monkeypatch):
    from relgrade.graders.raytask import run_command

    monkeypatch.setitem(sys.modules, "ray", None)  # the task's function alone, no Ray started
    # the worker's own environment has a value the driver does not: the key says unset
    monkeypatch.setenv("RELGRADE_TEST_GONE", "the worker's value")
    res = run_command([sys.executable, "-c", "import os; print(os.environ.get("
                       "'RELGRADE_TEST_MODEL'), os.environ.get('RELGRADE_TEST_GONE'))"],
                      b"", 30.0, {"RELGRADE_TEST_MODEL": "model-2", "RELGRADE_TEST_GONE": None},
                      None, None)
    assert (res["returncode"], res["stdout"]) == (0, "model-2 None\n")


def test_a_driver_is_gone_once_its_process_ended_or_its_pid_was_reused():
    from relgrade.graders.raytask import driver_gone, process_start

    me = (os.getpid(), process_start(os.getpid()))
    assert me[1] is not None and not driver_gone(me)
    assert driver_gone((me[0], me[1] + 1))  # same pid, another start: a reused pid
    p = subprocess.Popen(["sleep", "60"])
    them = (p.pid, process_start(p.pid))
    assert not driver_gone(them)
    p.kill()
    p.wait()
    assert driver_gone(them)
    assert not driver_gone(None) and not driver_gone((p.pid, None))  # nothing to check
