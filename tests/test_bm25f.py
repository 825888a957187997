"""The bm25f arm: BM25 over header and text with the header's term frequencies weighted."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from relgrade import retrieve
from relgrade.errors import InputError
from relgrade.experiment.params import load_params
from relgrade.retrieve.bm25 import BM25Scorer
from relgrade.retrieve.bm25f import BM25FScorer
from tests.test_params import DEFAULT

HEADERS = ["core.py › def parse_args", "utils.py › def echo", "docs › Options"]
TEXTS = ["return parser", "print the parse result twice parse", "option values"]


def test_bm25f_scores_equal_simple_bm25f_computed_by_hand():
    # Terms (tokenize): header 0 = core, py, def, parse_args, parse, args (6);
    # text 0 = return, parser (2); header 1 = utils, py, def, echo (4); text 1 = print,
    # parse, result, twice, parse (5, "the" is a stopword); header 2 = docs, options (2);
    # text 2 = option, values (2).
    # Weight 3: |d̃| = 3·6 + 2 = 20, 3·4 + 5 = 17, 3·2 + 2 = 8; avgdl = 45 / 3 = 15.
    # Query "parse": df = 2 (chunks 0 and 1); tf̃ = 3·1 + 0 = 3 and 3·0 + 2 = 2.
    scores = BM25FScorer(HEADERS, TEXTS, header_weight=3).scores("parse")
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))

    def part(tf, dl):
        return tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / 15))

    np.testing.assert_allclose(scores, [idf * part(3, 20), idf * part(2, 17), 0.0],
                               rtol=1e-12)
    assert scores.dtype == np.float64


def test_a_header_match_outranks_two_text_matches_only_when_the_header_is_weighted():
    one = BM25FScorer(HEADERS, TEXTS, header_weight=1).scores("parse")
    three = BM25FScorer(HEADERS, TEXTS, header_weight=3).scores("parse")
    # weight 1: avgdl = (8 + 9 + 4) / 3 = 7; chunk 0 tf 1, |d| 8; chunk 1 tf 2, |d| 9
    assert one[1] > one[0]
    assert three[0] > three[1]


def test_header_weight_one_equals_the_bm25_arm_over_header_and_text():
    docs = [h + "\n" + t for h, t in zip(HEADERS, TEXTS)]
    for query in ("parse", "echo option", "def py values"):
        np.testing.assert_array_equal(BM25FScorer(HEADERS, TEXTS, header_weight=1).scores(query),
                                      BM25Scorer(docs).scores(query))


def test_unknown_query_terms_score_zero_and_repeats_count_once():
    scorer = BM25FScorer(HEADERS, TEXTS)
    np.testing.assert_array_equal(scorer.scores("zebra"), np.zeros(3))
    np.testing.assert_array_equal(scorer.scores("parse parse echo"), scorer.scores("parse echo"))


@pytest.mark.parametrize("weight", [0, -1, 2.5, True])
def test_a_header_weight_that_is_not_a_positive_integer_is_refused(weight):
    with pytest.raises(ValueError, match="header_weight must be an integer >= 1"):
        BM25FScorer(HEADERS, TEXTS, header_weight=weight)


def test_bm25f_arm_from_params_ranks_with_its_header_weight():
    chunks = pd.DataFrame({"chunk_id": ["c0", "c1", "c2"], "header": HEADERS, "text": TEXTS,
                           "source": ["core.py", "utils.py", "docs"]})
    queries = pd.DataFrame({"query_id": ["q1"], "query": ["parse"]})
    arms = {"f": {"kind": "bm25f", "depth": 5, "header_weight": 3},
            "f1": {"kind": "bm25f", "depth": 5, "header_weight": 1}}
    assert retrieve.run_arm("f", arms, chunks=chunks, queries=queries)["chunk_id"].tolist() \
        == ["c0", "c1"]
    assert retrieve.run_arm("f1", arms, chunks=chunks, queries=queries)["chunk_id"].tolist() \
        == ["c1", "c0"]


def _params_with(tmp_path, arm):
    p = copy.deepcopy(DEFAULT)
    p["arms"]["f"] = arm
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p, sort_keys=False))
    return load_params(path)


def test_params_take_a_bm25f_arm_with_header_weight_3_by_default(tmp_path):
    params = _params_with(tmp_path, {"kind": "bm25f", "depth": 100})
    assert params.arms["f"].header_weight == 3
    params = _params_with(tmp_path, {"kind": "bm25f", "depth": 100, "header_weight": 12})
    assert params.arms["f"].header_weight == 12


@pytest.mark.parametrize("weight", [0, 2.5])
def test_params_refuse_a_header_weight_below_1_or_not_whole_naming_the_key(tmp_path, weight):
    with pytest.raises(InputError) as e:
        _params_with(tmp_path, {"kind": "bm25f", "depth": 100, "header_weight": weight})
    assert "arms.f.header_weight" in str(e.value)
    assert f"(found {weight})" in str(e.value)
