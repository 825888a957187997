"""At most five chunks in a batch on every route: packets, exports, the web page, grade run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.graders import command
from relgrade.graders.labelstudio import label_studio_tasks_json
from relgrade.protocol import packets
from tests.graders import experiment as ex

SIX = "a batch holds at most 5 chunks (found 6 chunks)"


def _oversized(root):
    """A tiny experiment whose q01 grader packet was replaced by one with a batch of six."""
    ex.build(root, queries=2, chunks=7, audit=1)
    bad = ex.packet("q01", 7, batch_size=6)
    assert [len(b) for b in bad["batches"]] == [6, 1]
    (root / "data/packets/grader/q01.json").write_text(json.dumps(bad))
    return bad


def test_orders_refuse_a_batch_size_above_five():
    pool = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": list("abcdef")})
    with pytest.raises(InputError, match=r"grading\.batch_size must be an integer from 1 to 5"):
        packets.build_orders(pool, seed=1, round=1, batch_size=6, audit_ids=[])


def test_packets_refuse_orders_that_put_six_chunks_in_one_batch():
    orders = pd.DataFrame({"query_id": ["q"] * 6, "chunk_id": list("abcdef"),
                           "role": ["grader"] * 6, "round": [1] * 6, "position": range(6),
                           "batch": [0] * 6, "order_seed": [1] * 6})
    chunks = pd.DataFrame({"chunk_id": list("abcdef"), "header": list("abcdef"),
                           "text": list("abcdef")})
    intents = pd.DataFrame({"query_id": ["q"], "query": ["x"], "intent": ["y"]})
    with pytest.raises(InputError, match="q batch 0 .grader.: " + SIX.replace("(", r"\(")
                       .replace(")", r"\)")):
        packets.build_packets(orders, chunks=chunks, intents=intents, rubric_version="v1",
                              intents_sha256="a" * 64)


def test_a_packet_of_five_passes_and_one_of_six_is_refused_by_check_packet_and_jsonl():
    five = ex.packet("q01", 7, batch_size=5)
    assert packets.check_packet(five) is five
    six = ex.packet("q01", 7, batch_size=6)
    with pytest.raises(InputError, match=r"q01 batch 0: a batch holds at most 5"):
        packets.check_packet(six, path="p.json")
    with pytest.raises(InputError, match=r"at most 5"):
        packets.packets_jsonl([six])


def test_label_studio_tasks_refuse_a_batch_of_six_called_directly():
    with pytest.raises(InputError, match=r"q01 batch 0: a batch holds at most 5"):
        label_studio_tasks_json([ex.packet("q01", 7, batch_size=6)])


@pytest.mark.parametrize("fmt", ["jsonl", "label-studio"])
def test_packets_export_refuses_a_batch_of_six_and_writes_nothing(tmp_path, fmt):
    _oversized(tmp_path)
    out = tmp_path / "out.file"
    res = CliRunner().invoke(main, ["packets", "export", "--role", "grader", "--out", str(out),
                                    "--format", fmt, "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 1
    assert SIX in res.output and "q01.json" in res.output
    assert not out.exists()


def test_grade_run_refuses_a_batch_of_six_and_starts_no_grader(tmp_path):
    _oversized(tmp_path)
    res = CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--no-progress",
                                    "--params", str(tmp_path / "params.yaml")])
    assert res.exit_code == 1
    assert SIX in res.output
    assert not (tmp_path / "data/grades/grader-a/round-1.jsonl").exists()


def test_grade_run_plan_refuses_a_batch_of_six_called_directly():
    with pytest.raises(InputError, match=r"q01 batch 0: a batch holds at most 5"):
        command.plan({"q01": ex.packet("q01", 7, batch_size=6)}, recorded=set())
    assert command.MAX_BATCH == packets.MAX_BATCH == 5


def test_the_web_page_cannot_be_built_over_a_batch_of_six(tmp_path):
    from relgrade.web.app import WebGrader

    with pytest.raises(InputError, match=r"q01 batch 0: a batch holds at most 5"):
        WebGrader(name="alice", role="grader", kind="human", token="t",
                  packets={"q01": ex.packet("q01", 7, batch_size=6)}, store=None)


def test_serve_refuses_packets_with_a_batch_of_six(tmp_path):
    from relgrade.cli.serve import build_site

    _oversized(tmp_path)
    params = tmp_path / "params.yaml"
    text = params.read_text().replace(
        "graders:\n", "graders:\n  alice:\n    role: grader\n    kind: human\n    family: person\n")
    params.write_text(text)
    with pytest.raises(InputError, match=SIX.replace("(", r"\(").replace(")", r"\)")):
        build_site(str(params), graders=["alice"])
