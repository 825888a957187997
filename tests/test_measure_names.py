"""Every measure name relgrade prints is ir_measures' canonical name: it round-trips through
``ir_measures.parse_measure`` unchanged (``str(parse(name)) == name``)."""

from __future__ import annotations

import json

import ir_measures
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.cli.evaluate import DEFAULT_MEASURES
from relgrade.evaluation.measures import DCG_FORMS, parse_measure, protocol_measures

# Every measure relgrade knows, with each of its parameter values and with and without a
# cutoff: the names str(Measure) can produce.
VARIANTS = (
    [f"nDCG(dcg={d!r})" for d in DCG_FORMS]
    + [f"{m}(rel={r})" for m in ("R", "RR", "P") for r in (1, 2, 3)]
    + ["Judged"]
)
ALL_NAMES = sorted({str(parse_measure(f"{v}{c}")) for v in VARIANTS
                    for c in ("", "@1", "@10", "@100")})


def _round_trips(name: str) -> bool:
    return str(ir_measures.parse_measure(name)) == name


def test_the_variants_cover_every_measure_relgrade_knows():
    # nDCG: 2 gains; R, RR, P: rel 1 (dropped) and 2, 3; Judged: no parameter; each with
    # no cutoff and three cutoffs
    assert len(ALL_NAMES) == (2 + 3 * 3 + 1) * 4
    assert {str(parse_measure(n)).split("(")[0].split("@")[0] for n in ALL_NAMES} == {
        "nDCG", "R", "RR", "P", "Judged"}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_canonical_name_round_trips_through_ir_measures(name):
    assert _round_trips(name)


@pytest.mark.parametrize("relevant_min", [1, 2])
def test_the_protocol_measures_round_trip(relevant_min):
    names = [str(m) for m in protocol_measures([3, 5, 10], relevant_min=relevant_min)]
    assert names[:4] == ["nDCG(dcg='exp-log2')@3",
                         "R@3" if relevant_min == 1 else "R(rel=2)@3",
                         "RR@3" if relevant_min == 1 else "RR(rel=2)@3", "Judged@3"]
    assert all(_round_trips(n) for n in names)


def test_the_names_evaluate_prints_round_trip(tmp_path):
    (tmp_path / "key.qrels").write_text("q1 0 a 1\n")
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 1 t\n")
    res = CliRunner().invoke(main, ["evaluate", str(tmp_path / "key.qrels"),
                                    str(tmp_path / "r.trec"), "--json", "-m", "NDCG@5",
                                    "-m", "MRR", "-m", "Recall(rel=1)@10",
                                    *[a for m in DEFAULT_MEASURES for a in ("-m", m)]])
    assert res.exit_code == 0, res.output
    names = json.loads(res.output)["measures"]
    assert names == ["nDCG@5", "RR", "R@10", "nDCG(dcg='exp-log2')@10", "R@10", "RR@10",
                     "Judged@10"]
    assert all(_round_trips(n) for n in names)
