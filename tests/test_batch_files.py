"""Provider batch files: `grade export --batch` → the provider's results → `grade import --batch`.

Results files are written here in the shapes the providers document (OpenAI Batch API
output lines, Anthropic Message Batches results); no network.
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.graders.cache import CallCache
from relgrade.graders.store import read_bank
from tests.graders import experiment as ex

PATHS = {"call_cache": "data/private/call-cache.jsonl"}


def graders(**kw):
    return {"grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "model_id": "test-model-1", "max_tokens": 800,
                         "command": ex.command("ok"), **kw}}


def cli(root, *args):
    return CliRunner().invoke(main, [*args, "--params", str(root / "params.yaml")])


def export(root, provider, out):
    res = cli(root, "grade", "export", "--batch", provider, "--grader", "grader-a", "-o",
              str(out))
    assert res.exit_code == 0, res.output
    return [json.loads(x) for x in out.read_text().splitlines()]


def grades_file(root):
    return root / "data/grades/grader-a/round-1.jsonl"


def answer_text(prompt_request, *, grade_of=None) -> str:
    """A correct answer to the batch the request's prompt shows (ids read from the prompt)."""
    content = (prompt_request["body"]["messages"] if "body" in prompt_request
               else prompt_request["params"]["messages"])[0]["content"]
    qid = re.search(r"\b(q\d\d)-c\d+", content).group(1)
    chunks = sorted(set(re.findall(rf"\b{qid}-c\d+", content)),
                    key=lambda c: int(c.rsplit("c", 1)[1]))
    grade_of = grade_of or ex.truth
    return "".join(json.dumps({"query_id": qid, "chunk_id": c, "reason": "text marks it",
                               "grade": grade_of(c)}) + "\n" for c in chunks)


def openai_result(req, text=None, *, error=None):
    if error:
        return {"id": "r", "custom_id": req["custom_id"], "response": None,
                "error": {"code": "server_error", "message": error}}
    return {"id": "r", "custom_id": req["custom_id"],
            "response": {"status_code": 200, "request_id": "x",
                         "body": {"choices": [{"index": 0, "message": {
                             "role": "assistant", "content": text or answer_text(req)}}]}},
            "error": None}


def anthropic_result(req, text=None, *, kind="succeeded"):
    if kind != "succeeded":
        return {"custom_id": req["custom_id"], "result": {"type": kind}}
    return {"custom_id": req["custom_id"], "result": {"type": "succeeded", "message": {
        "id": "msg", "type": "message", "role": "assistant", "model": "test-model-1",
        "content": [{"type": "text", "text": text or answer_text(req)}],
        "stop_reason": "end_turn"}}}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_an_openai_export_holds_one_request_per_owed_batch_with_the_command_prompt(
        tmp_path, monkeypatch):
    packets = ex.build(tmp_path, queries=2, chunks=7, graders=graders(), paths=PATHS)
    reqs = export(tmp_path, "openai", tmp_path / "requests.jsonl")
    assert len(reqs) == 4  # 2 queries x (5 + 2 chunks)
    for r in reqs:
        assert list(r) == ["custom_id", "method", "url", "body"]
        assert (r["method"], r["url"]) == ("POST", "/v1/chat/completions")
        assert re.fullmatch(r"[0-9a-f]{64}", r["custom_id"])
        assert list(r["body"]) == ["model", "messages", "max_completion_tokens"]
        assert (r["body"]["model"], r["body"]["max_completion_tokens"]) == ("test-model-1", 800)
    # the prompt is the one a command grader is given for the same batch
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("RELGRADE_TEST_LOG", str(log))
    other = tmp_path / "cmd"
    ex.build(other, queries=2, chunks=7, graders=graders())
    assert cli(other, "grade", "run", "--grader", "grader-a", "--no-progress").exit_code == 0
    prompts = sorted(json.loads(f.read_text())["prompt"] for f in log.iterdir())
    assert sorted(r["body"]["messages"][0]["content"] for r in reqs) == prompts
    assert {len(packets[q]["batches"]) for q in packets} == {2}


def test_an_anthropic_export_uses_custom_ids_within_its_limit_and_the_params_shape(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=graders(temperature=0), paths=PATHS)
    (r,) = export(tmp_path, "anthropic", tmp_path / "requests.jsonl")
    assert list(r) == ["custom_id", "params"]
    assert re.fullmatch(r"^[a-zA-Z0-9_-]{1,64}$", r["custom_id"])
    assert list(r["params"]) == ["model", "max_tokens", "messages", "temperature"]
    assert r["params"]["messages"][0]["role"] == "user"


def test_export_without_a_model_id_names_the_setting_to_add(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, paths=PATHS)
    res = cli(tmp_path, "grade", "export", "--batch", "openai", "--grader", "grader-a")
    assert res.exit_code == 1
    assert "grader-a: a batch file needs the provider's model name (found None). Set " \
           "graders.grader-a.model_id" in res.output


@pytest.mark.parametrize("provider, result", [("openai", openai_result),
                                              ("anthropic", anthropic_result)])
def test_a_partial_results_file_records_its_batches_and_the_rest_stays_owed(
        tmp_path, provider, result):
    packets = ex.build(tmp_path, queries=3, chunks=7, graders=graders(), paths=PATHS)
    reqs = export(tmp_path, provider, tmp_path / "requests.jsonl")
    assert len(reqs) == 6
    # the provider answered three, failed one, and the file lacks the other two
    failed = (openai_result(reqs[3], error="overloaded") if provider == "openai"
              else anthropic_result(reqs[3], kind="expired"))
    results = write_jsonl(tmp_path / "results.jsonl",
                          [result(reqs[0]), result(reqs[2]), failed, result(reqs[1])])
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    # batches 0, 1, 2 are q01 b0 (5), q01 b1 (2), q02 b0 (5): 12 pairs; 21 - 12 = 9 owed
    assert (f"imported 12 grades in 3 batches for grader-a from {results.as_posix()} "
            f"({provider} results); 1 request unanswered; 9 pairs still owed") in res.output
    got = sorted((r["query_id"], r["chunk_id"], r["grade"])
                 for r in ex.read_rows(grades_file(tmp_path)))
    want = sorted((q, c["chunk_id"], ex.truth(c["chunk_id"]))
                  for q in ("q01", "q02") for i, b in enumerate(packets[q]["batches"])
                  for c in b if q == "q01" or i == 0)
    assert got == want
    marks = {(r["cache"], r["via"]) for _, r in read_bank(grades_file(tmp_path))}
    assert marks == {("miss", f"{provider} batch")}
    # answers are in the call cache under their custom_id
    cache = CallCache(tmp_path / PATHS["call_cache"])
    assert all(cache.get(r["custom_id"]) == answer_text(r) for r in reqs[:3])
    # the next export holds exactly the three batches still owed, under the same ids
    again = export(tmp_path, provider, tmp_path / "requests2.jsonl")
    assert [r["custom_id"] for r in again] == [r["custom_id"] for r in reqs[3:]]


def test_markdown_fences_around_an_answer_are_ignored_as_for_a_command(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=graders(), paths=PATHS)
    (req,) = export(tmp_path, "anthropic", tmp_path / "requests.jsonl")
    results = write_jsonl(tmp_path / "results.jsonl",
                          [anthropic_result(req, "```json\n" + answer_text(req) + "```\n")])
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert len(ex.read_rows(grades_file(tmp_path))) == 3


def _refused(tmp_path, rows_of):
    ex.build(tmp_path, queries=2, chunks=7, graders=graders(), paths=PATHS)
    reqs = export(tmp_path, "openai", tmp_path / "requests.jsonl")
    results = tmp_path / "results.jsonl"
    results.write_text(rows_of(reqs))
    res = cli(tmp_path, "grade", "import", "--batch", str(results), "--grader", "grader-a")
    assert res.exit_code == 1
    assert not grades_file(tmp_path).exists(), "a refused file recorded something"
    assert not (tmp_path / PATHS["call_cache"]).exists()
    return res.output, results, reqs


def test_a_malformed_line_refuses_the_file_naming_the_line(tmp_path):
    out, results, _ = _refused(tmp_path, lambda reqs: json.dumps(openai_result(reqs[0]))
                               + "\n{\"custom_id\": \"x\", \"respo\n")
    assert out.startswith(f"Error: {results.as_posix()}:2: a results line is not valid JSON")
    assert out.rstrip().endswith("Nothing of this file was recorded")


def test_a_grade_off_the_scale_refuses_the_file_naming_the_line_and_batch(tmp_path):
    def rows_of(reqs):
        bad = openai_result(reqs[1], answer_text(reqs[1], grade_of=lambda c: 3))
        return json.dumps(openai_result(reqs[0])) + "\n" + json.dumps(bad) + "\n"
    out, results, _ = _refused(tmp_path, rows_of)
    assert out.startswith(f"Error: {results.as_posix()}:2: q01 batch 1")
    assert "grade" in out and "(found 3)" in out


def test_a_result_for_a_batch_not_owed_refuses_the_file(tmp_path):
    def rows_of(reqs):
        stranger = dict(openai_result(reqs[0]), custom_id="f" * 64)
        return json.dumps(openai_result(reqs[0])) + "\n" + json.dumps(stranger) + "\n"
    out, results, _ = _refused(tmp_path, rows_of)
    assert out == (f"Error: {results.as_posix()}:2: result for a batch this grader does not "
                   "owe (already recorded, or exported for another grader, round or model) "
                   f"(found custom_id {'f' * 64}). Import the results of the latest "
                   "`relgrade grade export --batch` for this grader; nothing of this file "
                   "was recorded\n")


def test_importing_the_same_results_twice_is_refused_the_second_time(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=graders(), paths=PATHS)
    (req,) = export(tmp_path, "openai", tmp_path / "requests.jsonl")
    results = write_jsonl(tmp_path / "results.jsonl", [openai_result(req)])
    args = ("grade", "import", "--batch", str(results), "--grader", "grader-a")
    assert cli(tmp_path, *args).exit_code == 0
    before = grades_file(tmp_path).read_bytes()
    res = cli(tmp_path, *args)
    assert res.exit_code == 1 and "does not owe" in res.output
    assert grades_file(tmp_path).read_bytes() == before


def test_import_takes_either_a_file_or_batch_results(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3, graders=graders(), paths=PATHS)
    res = cli(tmp_path, "grade", "import", "--grader", "grader-a")
    assert res.exit_code == 2 and "give either FILE or --batch RESULTS" in res.output
