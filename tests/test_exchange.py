"""The command grader exchange format: requests hold the packet only; answers are checked."""

from __future__ import annotations

import json

import jinja2
import pytest

from relgrade.errors import InputError
from relgrade.graders.exchange import (
    EXCHANGE_VERSION,
    batch_request,
    encode_request,
    parse_command,
    parse_response,
    prompt_template,
    render_prompt,
)
from tests.graders import experiment as ex

REQUEST_KEYS = ["exchange", "grader", "query_id", "query", "intent", "rubric_version", "rubric",
                "scale", "max_reason_words", "reason_required", "batch", "batches", "sample",
                "attempt", "previous_error", "chunks"]


def packet():
    return ex.packet("q07", 7)


def request(**kw):
    p = packet()
    return batch_request(p, 1, p["batches"][1], grader="grader-a", rubric="RUBRIC TEXT",
                         scale=[0, 1, 2], max_reason_words=15, **kw)


def test_parse_command_takes_an_argv_list_or_a_shell_like_string():
    assert parse_command(["python", "g.py", 3], grader="g") == ["python", "g.py", "3"]
    assert parse_command("claude -p 'grade this'", grader="g") == ["claude", "-p", "grade this"]


@pytest.mark.parametrize("value, rule", [
    ("", "grader command is empty"),
    ([], "grader command is empty"),
    ({"run": "x"}, "must be an argv list or a string"),
    ("claude 'unclosed", "not a valid command line"),
])
def test_parse_command_refuses_what_cannot_run(value, rule):
    with pytest.raises(InputError, match=rule) as e:
        parse_command(value, grader="grader-a")
    assert "graders.grader-a.command" in str(e.value)


def test_a_request_holds_exactly_the_documented_keys_and_the_batch_chunks():
    req = request(sample=2, attempt=3, previous_error="line 1: not JSON")
    assert list(req) == REQUEST_KEYS
    assert req["exchange"] == EXCHANGE_VERSION
    assert req["batch"] == 1 and req["batches"] == 2
    assert [c["chunk_id"] for c in req["chunks"]] == ["q07-c5", "q07-c6"]
    assert (req["sample"], req["attempt"], req["previous_error"]) == (2, 3, "line 1: not JSON")


def test_a_request_carries_only_chunk_id_header_and_text_even_if_a_packet_had_more():
    p = packet()
    leaky = [dict(c, rank=1, score=9.5, arm="bm25") for c in p["batches"][0]]
    req = batch_request(p, 0, leaky, grader="g", rubric="", scale=[0, 1, 2], max_reason_words=15)
    assert all(list(c) == ["chunk_id", "header", "text"] for c in req["chunks"])
    text = json.dumps(req)
    for word in ("rank", "score", "bm25", "arm"):
        assert f'"{word}"' not in text


def test_the_prompt_holds_rubric_query_intent_chunks_and_the_previous_error():
    req = request(previous_error="too few rows")
    prompt = render_prompt(prompt_template(), req)
    for part in ("RUBRIC TEXT", req["query"], req["intent"], "q07-c5", "q07-c6",
                 "def f5():", "src/pkg/mod_6.py", "too few rows", "at most 15 words",
                 "query_id, chunk_id, reason, grade", "0, 1, 2"):
        assert part in prompt
    assert "refused" not in render_prompt(prompt_template(), request())


def test_chunk_text_holding_backticks_gets_a_longer_fence_in_the_prompt():
    p = packet()
    chunk = {"chunk_id": "md", "header": "README.md", "text": "Run:\n```sh\npip install x\n```"}
    req = batch_request(p, 0, [chunk], grader="g", rubric="", scale=[0, 1, 2], max_reason_words=15)
    prompt = render_prompt(prompt_template(), req)
    assert "````\nRun:\n```sh\npip install x\n```\n````" in prompt


def test_prompt_mode_puts_only_the_prompt_on_stdin():
    req = dict(request(), prompt="PROMPT ÄÖ")
    assert encode_request(req, mode="prompt") == "PROMPT ÄÖ".encode()
    assert json.loads(encode_request(req, mode="json")) == req


def answer(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def good_rows(chunks=("q07-c5", "q07-c6")):
    return [{"query_id": "q07", "chunk_id": c, "reason": "defines f in full", "grade": 2}
            for c in chunks]


def parse(stdout, chunks=("q07-c5", "q07-c6")):
    return parse_response(stdout, query_id="q07", chunks=[{"chunk_id": c} for c in chunks],
                          scale=[0, 1, 2], max_reason_words=15, kind="model", role="grader",
                          source="grader-a command, q07 batch 1", grader="grader-a")


def test_a_good_answer_becomes_a_table_and_fences_and_blank_lines_are_ignored():
    out = "```json\n\n" + answer(good_rows()) + "```\n"
    df = parse(out)
    assert df.values.tolist() == [["q07", "q07-c5", "defines f in full", 2],
                                  ["q07", "q07-c6", "defines f in full", 2]]


def test_integer_chunk_ids_in_the_answer_are_the_same_chunks():
    rows = [{"query_id": "q07", "chunk_id": 4411, "reason": "the answer", "grade": 1}]
    assert parse(answer(rows), chunks=("4411",))["chunk_id"].tolist() == ["4411"]


def test_a_line_that_is_not_json_fails_the_batch_naming_the_line():
    with pytest.raises(InputError) as e:
        parse("Here are the grades:\n" + answer(good_rows()))
    assert str(e.value).startswith("grader-a command, q07 batch 1:1: grader output line is not JSON")


def test_a_json_value_that_is_not_an_object_fails():
    with pytest.raises(InputError, match="not a JSON object"):
        parse("[1, 2]\n")


def test_a_row_for_a_chunk_outside_the_batch_fails():
    rows = good_rows() + [{"query_id": "q07", "chunk_id": "q07-c0", "reason": "x", "grade": 0}]
    with pytest.raises(InputError) as e:
        parse(answer(rows))
    assert str(e.value) == ("grader-a command, q07 batch 1:3: pair (q07, q07-c0): row for a chunk "
                            "that is not in this batch. Grade exactly the chunks of the "
                            "request, nothing else")


def test_a_row_for_another_query_fails():
    rows = good_rows()[:1] + [{"query_id": "q08", "chunk_id": "q07-c6", "reason": "x", "grade": 0}]
    with pytest.raises(InputError, match="not in this batch"):
        parse(answer(rows))


def test_too_few_rows_fail_naming_the_chunks_left_without_one():
    with pytest.raises(InputError) as e:
        parse(answer(good_rows()[:1]))
    assert str(e.value) == ("grader-a command, q07 batch 1: missing q07-c6: too few rows: every "
                            "chunk of the batch needs one row (found 1 of 2 rows)")
    with pytest.raises(InputError, match=r"found 0 of 2 rows"):
        parse("")


@pytest.mark.parametrize("change, rule", [
    ({"grade": 3}, "grade outside the scale 0-2"),
    ({"grade": "2"}, "grade must be an integer"),
    ({"reason": " ".join(["word"] * 16)}, "reason longer than 15 words"),
    ({"reason": ""}, "reason required"),
])
def test_rows_breaking_the_grade_row_rules_fail(change, rule):
    rows = good_rows()
    rows[1].update(change)
    with pytest.raises(InputError, match=rule):
        parse(answer(rows))


def test_a_second_row_for_a_chunk_and_keys_out_of_order_fail():
    rows = good_rows() + good_rows()[:1]
    with pytest.raises(InputError, match="second row for one pair"):
        parse(answer(rows))
    swapped = [{"query_id": "q07", "chunk_id": "q07-c5", "grade": 2, "reason": "x"}]
    with pytest.raises(InputError, match="keys out of order"):
        parse(answer(swapped), chunks=("q07-c5",))


def test_the_prompt_template_renders_strictly():
    with pytest.raises(jinja2.UndefinedError):
        prompt_template().render(query_id="q")
