"""``relgrade evaluate --trec-eval-output`` reproduces trec_eval's published outputs on
trec_eval's own test collection, for every measure the two share, for every query and
``all``, to the 4 decimals trec_eval prints (see tests/data/trec_eval/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.evaluation.measures import parse_measure, trec_eval_name

_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALLS = ("0.00", "0.10", "0.20", "0.30", "0.40", "0.50", "0.60", "0.70", "0.80", "0.90",
            "1.00")

# Every measure of trec_eval's `all_trec` set that relgrade computes, by trec_eval's name.
SHARED = (
    ["num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank", "infAP",
     "ndcg", "rbp", "rbp_resid", "set_P", "set_recall"]
    + [f"iprec_at_recall_{x}" for x in _RECALLS]
    + [f"P_{k}" for k in _CUTS]
    + [f"recall_{k}" for k in _CUTS]
    + [f"ndcg_cut_{k}" for k in _CUTS]
    + [f"map_cut_{k}" for k in _CUTS]
    + [f"success_{k}" for k in (1, 5, 10)]
    + [f"unj_{k}" for k in (5, 10, 20)]
)

# trec_eval's all_trec measures relgrade does not compute (and the run's id and the
# number of queries, which are not measures)
NOT_SHARED = (
    ["runid", "num_q", "gm_map", "gm_bpref", "utility", "11pt_avg", "binG", "G", "ndcg_rel",
     "Rndcg", "set_map", "set_F", "set_relative_P", "num_nonrel_judged_ret", "relstring", "relstring_20"]
    + [f"Rprec_mult_{x:.2f}" for x in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)]
    + [f"relative_P_{k}" for k in _CUTS]
)

# output file -> (qrels, run, options): the options trec_eval's Makefile gave it, in
# relgrade's words (-c: a query missing from the run scores 0; without it, it is skipped;
# -l2: relevant from grade 2)
CASES = {
    "out.test.aq": ("qrels.test", "results.test", ["--missing", "skip"]),
    "out.test.aqc": ("qrels.test", "results.trunc", ["--missing", "zero"]),
    "out.test.aql": ("qrels.rel_level", "results.test",
                     ["--missing", "skip", "--relevant-min", "2"]),
}


def _collection() -> Path | None:
    for folder in (os.environ.get("RELGRADE_TREC_EVAL_TESTS"),
                   Path(__file__).parent / "data" / "trec_eval"):
        if folder and (Path(folder) / "out.test.aq").is_file():
            return Path(folder)
    return None


DATA = _collection()
needs_collection = pytest.mark.skipif(
    DATA is None, reason="trec_eval's test files are not in tests/data/trec_eval "
                         "(see its README.md)")


def _published(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        name, qid, value = line.split()
        out[(name, qid)] = value
    return out


def test_the_shared_measures_are_66_and_each_has_one_relgrade_measure():
    assert len(SHARED) == 66 == len(set(SHARED))
    assert not set(SHARED) & set(NOT_SHARED)
    # each trec_eval name reads as one relgrade measure, whose trec_eval name is it again
    for name in SHARED:
        assert trec_eval_name(parse_measure(name)) == name
    assert str(parse_measure("map")) == "AP"
    assert str(parse_measure("ndcg_cut_10")) == "nDCG@10"
    assert str(parse_measure("iprec_at_recall_0.10")) == "IPrec@0.1"
    assert str(parse_measure("rbp")) == "RBP(p=0.9)"
    assert str(parse_measure("num_rel_ret", relevant_min=2)) == "NumRet(rel=2)"
    assert str(parse_measure("unj_5")) == "Unjudged@5"


@needs_collection
@pytest.mark.parametrize("output", sorted(CASES))
def test_every_shared_value_equals_trec_eval_s_published_output(output):
    qrels, run, options = CASES[output]
    published = _published(DATA / output)
    # the published file holds every shared measure, and nothing unaccounted for
    names = {name for name, _ in published}
    assert set(SHARED) <= names <= set(SHARED) | set(NOT_SHARED)
    args = ["evaluate", str(DATA / qrels), str(DATA / run), "--trec-eval-output",
            "--per-query", "--no-relevant", "zero", *options]
    for name in SHARED:
        args += ["-m", name]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output + result.stderr
    mine = {}
    for line in result.stdout.splitlines():
        name, qid, value = line.split("\t")
        mine[(name.strip(), qid)] = value
    compared = 0
    for (name, qid), value in published.items():
        if name not in SHARED:
            continue
        assert (name, qid) in mine, (name, qid)
        assert abs(float(mine[(name, qid)]) - float(value)) <= 0.5e-4 + 1e-12, \
            (name, qid, mine[(name, qid)], value)
        compared += 1
    # 66 measures x (3 topics + all); with -c, topic 302, missing from the run, is scored
    # on an empty ranking by both
    assert compared == 66 * 4
    assert mine[("num_q", "all")] == published[("num_q", "all")] == "3"
    # the run's tag, as trec_eval prints it ("STANDARD"), not the file's name
    assert mine[("runid", "all")] == published[("runid", "all")] == "STANDARD"
