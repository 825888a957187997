"""A model grader's judge identity, and the price and caps of `relgrade grade run`.

The grader is the real test script (tests/graders/grader.py, copied into the experiment's
working tree so its bytes are part of the identity) run as real processes; with
RELGRADE_TEST_COUNTER it appends one line per request it answered, so the counter's lines are
the calls made, and with RELGRADE_TEST_LOG it saves every request it was sent.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.graders.cache import call_key, command_identity
from relgrade.graders.store import read_bank
from tests.graders import experiment as ex

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "src/relgrade/prompts/grader.md"
# 4 queries x 7 chunks, batches of 5 then 2: 8 requests, 28 pairs
REQUESTS, PAIRS = 8, 28


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An experiment in a repository (stages/, dvc.yaml) whose grader script lies inside it."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "tools").mkdir()
    shutil.copy(ex.GRADER, tmp_path / "tools/grader.py")
    monkeypatch.setenv("RELGRADE_TEST_COUNTER", str(tmp_path / "calls.txt"))
    # the repository's paths (what `relgrade status` reads), the test set-up's where they differ
    paths = yaml.safe_load((ROOT / "params.yaml").read_text())["paths"]
    ex.build(tmp_path, graders=graders(tmp_path), paths={
        k: v for k, v in paths.items() if k not in ("packets", "grades_in", "audit", "pool")})
    return tmp_path


def graders(root, mode="ok", **kw):
    return {"grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "command": [sys.executable, str(root / "tools/grader.py"), mode],
                         "timeout": 30, "retries": 0, **kw}}


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


def run(root, *args):
    return CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--params",
                                     str(root / "params.yaml"), "--no-progress", *args])


def status(root):
    res = CliRunner().invoke(main, ["status", "--params", str(root / "params.yaml")])
    return res.output


def calls(root) -> list[str]:
    path = root / "calls.txt"
    return path.read_text().split() if path.exists() else []


def grades_file(root):
    return root / "data/grades/grader-a/round-1.jsonl"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def expected_identity(root, *, settings=None, samples=1) -> str:
    """The judge identity written out by hand: sha256 of the compact JSON of the documented
    fields, in the documented order (the grader's name and role left out)."""
    argv = [sys.executable, str(root / "tools/grader.py"), "ok"]
    doc = {"command": argv, "input": "json",
           "files": {argv[1]: sha((root / "tools/grader.py").read_bytes())}, "env": {},
           "template": sha(TEMPLATE.read_bytes()),
           "rubric": sha((root / "rubric/v1.md").read_bytes()),
           "samples": samples, "settings": settings or {}}
    return sha(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())


# --- judge identity --------------------------------------------------------------------

def test_every_bank_line_carries_the_judge_identity_of_the_documented_fields(root):
    res = run(root)
    assert res.exit_code == 0, res.output
    judge = expected_identity(root)
    lines = [r for _, r in read_bank(grades_file(root))]
    assert len(lines) == PAIRS and {r["judge"] for r in lines} == {judge}
    assert f"judge identity {judge[:12]} recorded on every bank line" in res.output
    assert f"judge: grader-a identity {judge[:12]}; {PAIRS} grades made under it" \
        in status(root).splitlines()


def test_a_declared_setting_or_an_edited_rubric_is_a_new_judge_and_status_counts_both(root):
    assert run(root).exit_code == 0
    old = expected_identity(root)
    # a setting the grader declares part of its identity: a new judge
    edit_params(root, **{"graders.grader-a.temperature": 0.5,
                         "graders.grader-a.identity_keys": ["temperature"]})
    new = expected_identity(root, settings={"temperature": 0.5})
    assert new != old
    assert f"judge: grader-a identity {new[:12]}; 0 grades made under it, {PAIRS} under " \
           f"{old[:12]}" in status(root).splitlines()
    # the rubric's bytes: another new judge
    rubric = root / "rubric/v1.md"
    rubric.write_text(rubric.read_text() + "\nA chunk that only names the target is a 0.\n")
    newer = expected_identity(root, settings={"temperature": 0.5})
    assert newer not in (old, new)
    assert f"judge: grader-a identity {newer[:12]};" in status(root)


def test_bank_lines_recorded_before_identities_read_as_identity_not_recorded(root):
    assert run(root).exit_code == 0
    bank = grades_file(root).with_name("round-1.bank.jsonl")
    lines = [json.loads(x) for x in bank.read_text().splitlines()]
    bank.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "judge"}) + "\n"
                            for r in lines))
    judge = expected_identity(root)
    assert f"judge: grader-a identity {judge[:12]}; 0 grades made under it, {PAIRS} identity " \
           "not recorded" in status(root).splitlines()
    before = len(calls(root))
    res = run(root)  # still valid grades: nothing is asked again
    assert res.exit_code == 0, res.output
    assert len(calls(root)) == before and "0 of 28 pairs still lack a grade" in res.output


def test_the_call_cache_key_holds_the_template_and_rubric_so_a_change_never_hits():
    base = dict(input_mode="prompt", grader="g", role="grader", rubric="R")
    request = b"the same rendered prompt"
    same = call_key(command_identity(["g"], template="T", **base), request)
    assert same == call_key(command_identity(["g"], template="T", **base), request)
    assert same != call_key(command_identity(["g"], template="T2", **base), request)
    assert same != call_key(command_identity(["g"], template="T", **base | {"rubric": "R2"}),
                            request)


def test_a_changed_declared_setting_misses_the_call_cache_with_real_calls(root):
    edit_params(root, **{"paths.call_cache": "data/private/call-cache.jsonl"})
    assert run(root).exit_code == 0
    assert len(calls(root)) == REQUESTS
    shutil.rmtree(root / "data/grades")
    assert run(root).exit_code == 0  # same judge: every request answered from the cache
    assert len(calls(root)) == REQUESTS
    shutil.rmtree(root / "data/grades")
    edit_params(root, **{"graders.grader-a.temperature": 1.0,
                         "graders.grader-a.identity_keys": ["temperature"]})
    assert run(root).exit_code == 0  # a new judge: every request sent again
    assert len(calls(root)) == 2 * REQUESTS


# --- the price before the run -----------------------------------------------------------

def test_dry_run_prices_the_rendered_prompts_without_starting_a_process(root, tmp_path):
    edit_params(root, **{"prices": {"grader-a": {"input_per_1k": 0.5, "output_per_1k": 2}}})
    res = run(root, "--dry-run")
    assert res.exit_code == 0, res.output
    assert calls(root) == [] and not grades_file(root).exists()
    # the prompts the command is really sent (input: prompt), logged by the grader script
    edit_params(root, **{"graders.grader-a.input": "prompt",
                         "graders.grader-a.command": graders(root, "prompt")["grader-a"][
                             "command"]})
    assert run(root, "--dry-run").output == res.output  # the prompt is the same either way
    log = tmp_path / "log"
    log.mkdir()
    import os
    os.environ["RELGRADE_TEST_LOG"] = str(log)
    try:
        assert run(root).exit_code == 0
    finally:
        del os.environ["RELGRADE_TEST_LOG"]
    prompts = [p.read_text("utf-8") for p in log.iterdir()]
    assert len(prompts) == REQUESTS
    prompt_tokens = sum(math.ceil(len(p) / 4) for p in prompts)
    # output: per chunk {"query_id": "q01", "chunk_id": "q01-cJ", "reason": 45 chars,
    # "grade": 0}\n = 113 characters (reason cap 15 words x 6 = 90, half of it expected);
    # per query ceil(5 x 113 / 4) + ceil(2 x 113 / 4) = 142 + 57 = 199; 4 queries
    output_tokens = 4 * 199
    cost = prompt_tokens / 1000 * 0.5 + output_tokens / 1000 * 2
    lines = res.output.splitlines()
    assert lines[0] == "dry run: no process started, nothing recorded"
    assert lines[1].startswith(f"grader-a: would send {REQUESTS} requests ({PAIRS} chunks); "
                               f"prompt tokens ≈ {prompt_tokens} (range ")
    assert f"output tokens ≈ {output_tokens} (range " in lines[1]
    assert f"expected {cost:.4f}," in lines[2]


def test_without_a_price_table_the_dry_run_says_how_to_add_one(root):
    res = run(root, "--dry-run")
    assert res.exit_code == 0, res.output
    assert "grader-a: no price (add prices.grader-a with input_per_1k and output_per_1k" \
        in res.output
    assert calls(root) == []


# --- caps ----------------------------------------------------------------------------------

def test_max_calls_stops_before_the_call_that_would_cross_it_and_the_rerun_finishes(root):
    res = run(root, "--max-calls", "3")
    assert res.exit_code == 0, res.output
    # q01 batch 0 (5) and batch 1 (2), q02 batch 0 (5)
    assert len(calls(root)) == 3
    assert len(ex.read_rows(grades_file(root))) == 12
    assert "cap reached: --max-calls 3 reached after 3 calls" in res.output
    assert "stopped at the cap; to grade the rest, rerun: relgrade grade run --grader " \
           "grader-a" in res.output
    res = run(root)
    assert res.exit_code == 0, res.output
    assert len(calls(root)) == REQUESTS and len(set(calls(root))) == REQUESTS
    assert len(ex.read_rows(grades_file(root))) == PAIRS


def test_max_cost_stops_before_the_request_that_would_cross_it(root):
    # output tokens only, 1 per 1k: a 5-chunk request costs 0.142, a 2-chunk one 0.057;
    # 0.142 + 0.057 = 0.199 <= 0.2, and the next 5-chunk request would make it 0.341
    edit_params(root, **{"prices": {"grader-a": {"input_per_1k": 0, "output_per_1k": 1}},
                         "grading.max_cost": 0.2})
    res = run(root)
    assert res.exit_code == 0, res.output
    assert len(calls(root)) == 2 and len(ex.read_rows(grades_file(root))) == 7
    assert "cap reached: grading.max_cost 0.2 reached: 2 calls cost ≈ 0.1990 and the next " \
           "would cost ≈ 0.1420" in res.output


@pytest.mark.parametrize("args,changes,message", [
    (["--max-calls", "0"], {}, "Error: --max-calls must be an integer >= 1 (found 0)"),
    (["--max-calls", "-2"], {}, "Error: --max-calls must be an integer >= 1 (found -2)"),
    ([], {"grading.max_cost": 0}, "grading.max_cost"),
    ([], {"grading.max_cost": -1}, "grading.max_cost"),
    ([], {"prices": {"grader-a": {"input_per_1k": -0.1, "output_per_1k": 1}}},
     "prices.grader-a.input_per_1k"),
    ([], {"grading.max_cost": 1}, "grading.max_cost needs a price for grader grader-a"),
])
def test_a_bad_cap_or_price_is_one_error_line_and_nothing_recorded_is_lost(root, args,
                                                                            changes, message):
    assert run(root, "--max-calls", "1").exit_code == 0
    before = grades_file(root).read_bytes()
    edit_params(root, **changes)
    res = run(root, *args)
    assert res.exit_code == 1
    assert len(res.output.splitlines()) == 1 and res.output.startswith("Error: ")
    assert message in res.output
    assert grades_file(root).read_bytes() == before and len(calls(root)) == 1


def test_a_provider_graders_bank_lines_carry_its_judge_identity_and_a_new_rubric_a_new_one(
        tmp_path):
    from tests.test_batch_files import PATHS, cli, export, openai_result, write_jsonl
    from tests.test_batch_files import graders as batch_graders

    ex.build(tmp_path, queries=1, chunks=3, graders=batch_graders(), paths=PATHS)
    reqs = export(tmp_path, "openai", tmp_path / "requests.jsonl")
    results = write_jsonl(tmp_path / "results.jsonl", [openai_result(r) for r in reqs])
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    # the provider, its model and settings, then what a command grader's identity also holds
    doc = {"provider": "openai", "model": "test-model-1", "max_tokens": 800,
           "temperature": None, "template": sha(TEMPLATE.read_bytes()),
           "rubric": sha((tmp_path / "rubric/v1.md").read_bytes()), "samples": 1,
           "settings": {}}
    judge = sha(json.dumps(doc, separators=(",", ":")).encode())
    assert {r["judge"] for _, r in read_bank(grades_file(tmp_path))} == {judge}
    # the same batch under an edited rubric is another request id: never answered from before
    rubric = tmp_path / "rubric/v1.md"
    rubric.write_text(rubric.read_text() + "\nNames alone are a 0.\n")
    shutil.rmtree(tmp_path / "data/grades")
    again = export(tmp_path, "openai", tmp_path / "requests2.jsonl")
    assert len(again) == len(reqs) and not {r["custom_id"] for r in again} & {
        r["custom_id"] for r in reqs}


def test_the_call_cap_holds_with_several_workers_sending_at_once(root):
    res = run(root, "--max-calls", "3", "--workers", "4")
    assert res.exit_code == 0, res.output
    assert len(calls(root)) == 3
    # whichever three requests went, each recorded its whole batch and nothing else
    assert len(ex.read_rows(grades_file(root))) in (6, 9, 12, 15)
    assert "cap reached: --max-calls 3 reached after 3 calls" in res.output


def test_the_keys_record_counts_grades_per_judge_and_leaves_older_records_unchanged():
    from relgrade.protocol.key import record_provenance

    common = dict(qrels_sha256="q", rubric_sha256="r", prompt_template_sha256="t",
                  graders={"grader-a": {"command": "g"}}, gate={})
    assert "judges" not in record_provenance(**common)
    rec = record_provenance(**common, judges={"grader-a": {"j" * 64: 26,
                                                            "identity not recorded": 2}})
    assert rec["judges"] == {"grader-a": {"j" * 64: 26, "identity not recorded": 2}}


def test_status_prices_every_grader_with_a_command_each_on_its_own_lines(root):
    # grader-a (a model, every pair graded) has no price; auditor-b, a person answering
    # through a command (as a ppi experiment's human grader), has one and owes the audit
    # sample: q01 and q02, 7 chunks each in batches of 5 and 2, so 4 requests of 14 chunks
    g = graders(root)
    g["auditor-b"] = {**g["grader-a"], "role": "auditor", "kind": "human", "family": "human"}
    edit_params(root, **{"graders": g, "grading.auditor": "auditor-b",
                         "prices": {"auditor-b": {"input_per_1k": 0.5, "output_per_1k": 2}}})
    assert run(root).exit_code == 0
    dry = CliRunner().invoke(main, ["grade", "run", "--grader", "auditor-b", "--params",
                                    str(root / "params.yaml"), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    lines = status(root).splitlines()
    assert "price: grader-a: no price (add prices.grader-a with input_per_1k and " \
           "output_per_1k to params to see the cost)" in lines
    owed = [x for x in lines if x.startswith("price: auditor-b: ")]
    # the same two lines the dry run prints for it, prefixed
    assert owed == [f"price: {x}" for x in dry.output.splitlines()[1:3]]
    assert owed[0].startswith("price: auditor-b: would send 4 requests (14 chunks); ")
    assert owed[1].startswith("price: auditor-b: cost low ")
    assert not any(x.startswith("judge: auditor-b") for x in lines)  # a person: no judge
