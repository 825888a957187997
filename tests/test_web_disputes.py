"""The grading page's dispute button, through the app as the browser reaches it: a dispute is
recorded with the grader's name and never changes a grade; a refused one records nothing."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from relgrade.cli.serve import build_site
from relgrade.web.app import create_app
from tests.graders import experiment as ex
from tests.test_web import Tab

RUBRIC = """version: v1

# Grading rubric

## 1. The scale

0, 1 or 2.

## 2. Boundary cases

### Duplicates

Grade each copy alone.
"""


def _web(tmp_path, paths):
    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"}}
    packets = ex.build(tmp_path, queries=2, chunks=3, audit=1, graders=graders, rubric=RUBRIC,
                       paths=paths)
    pool = pd.DataFrame([(q, c["chunk_id"]) for q, p in packets.items()
                         for b in p["batches"] for c in b], columns=["query_id", "chunk_id"])
    (tmp_path / "data/pool").mkdir(parents=True)
    pool.to_parquet(tmp_path / "data/pool/pool.parquet")
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice"])
    tab = Tab(create_app(site))
    assert tab.get(f"/login?token={site.graders['alice'].token}",
                   follow_redirects=False).status_code == 303
    return tmp_path, tab, packets, site, stores


@pytest.fixture(params=["named", "unnamed"])
def web(tmp_path, request):
    """The page over params that name the disputes file, and over params that name none
    (an experiment made before disputes existed): the button is there in both."""
    paths = {"disputes": "data/disputes.jsonl"} if request.param == "named" else {}
    root, tab, packets, site, stores = _web(tmp_path, paths)
    yield root, tab, packets
    site.writer.close()
    for s in stores:
        s.close()


def test_the_page_offers_a_dispute_per_chunk_naming_the_rubrics_sections(web):
    _, tab, packets = web
    html = tab.get("/g/alice/q/q01/0").text
    n = len(packets["q01"]["batches"][0])
    assert html.count("Dispute the rubric on this chunk") == n
    assert html.count('class="dispute-form"') == n
    assert ('<option value="the-scale">1. The scale</option>' in html
            and '<option value="duplicates">Duplicates</option>' in html)


def test_a_dispute_filed_on_the_page_is_recorded_and_changes_no_grade(web):
    root, tab, packets = web
    cid = packets["q01"]["batches"][0][1]["chunk_id"]
    r = tab.post("/g/alice/q/q01/0/dispute", follow_redirects=False,
                 data={"chunk": "1", "grade": "2", "section": "duplicates",
                       "reason": "  a copy of the answer is the answer  "})
    assert r.status_code == 303
    rows = [json.loads(x) for x in (root / "data/disputes.jsonl").read_text().splitlines()]
    assert len(rows) == 1
    got = rows[0]
    assert (got["query_id"], got["chunk_id"], got["grader"], got["grade"], got["section"],
            got["reason"], got["via"]) == ("q01", cid, "alice", 2, "duplicates",
                                           "a copy of the answer is the answer", "page")
    assert r.headers["location"] == f"/g/alice/q/q01/0?disputed={got['id']}"
    page = tab.get(r.headers["location"]).text
    assert f"Dispute {got['id']} filed" in page
    grades = root / "data/grades/alice/round-1.jsonl"
    assert not grades.exists() or grades.read_text() == ""


@pytest.mark.parametrize("data, shown", [
    ({"chunk": "0", "grade": "1", "section": "traps", "reason": "r"},
     "Unknown section id: a dispute names a section of the current rubric (found traps)"),
    ({"chunk": "0", "grade": "1", "section": "duplicates", "reason": "   "},
     "A dispute says why the rubric is wrong here: the reason is empty"),
    ({"chunk": "0", "grade": "5", "section": "duplicates", "reason": "r"},
     "A dispute&#39;s grade is an integer on the scale 0, 1, 2 (found 5)"),
    ({"chunk": "9", "grade": "1", "section": "duplicates", "reason": "r"},
     "The dispute names no chunk of this batch. Nothing was recorded."),
], ids=["unknown-section", "empty-reason", "off-scale", "no-such-chunk"])
def test_a_refused_dispute_says_why_on_the_page_and_records_nothing(web, data, shown):
    root, tab, _ = web
    r = tab.post("/g/alice/q/q01/0/dispute", data=data, follow_redirects=False)
    assert r.status_code == 400
    assert shown in r.text
    assert not (root / "data/disputes.jsonl").exists()


def test_the_first_dispute_on_the_page_names_the_disputes_file_in_params(tmp_path):
    import yaml

    root, tab, packets, site, stores = _web(tmp_path, {})
    try:
        assert "disputes" not in yaml.safe_load((root / "params.yaml").read_text())["paths"]
        r = tab.post("/g/alice/q/q01/0/dispute", follow_redirects=False,
                     data={"chunk": "0", "grade": "1", "section": "duplicates",
                           "reason": "a copy"})
        assert r.status_code == 303
        params = yaml.safe_load((root / "params.yaml").read_text())
        assert params["paths"]["disputes"] == "data/disputes.jsonl"
        assert len((root / "data/disputes.jsonl").read_text().splitlines()) == 1
    finally:
        site.writer.close()
        for s in stores:
            s.close()
