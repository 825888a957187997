"""Text that is not relgrade's stays inert wherever it is shown.

A bidi override (U+202E) or a terminal escape (ESC, U+001B) in chunk text, a correction's
name or reason, or a query group reaches no reader raw: the grading page, the reports
(Markdown and HTML), ``status`` and error lines all show it as ``\\u202e``, ``\\u001b``,
through the one function :func:`relgrade.text.inert`. Free-text fields are capped.
"""

from __future__ import annotations

import pytest
import yaml
from fastapi.testclient import TestClient

from relgrade.cli.serve import build_site
from relgrade.errors import InputError
from relgrade.evaluation import decision
from relgrade.experiment.params import load_params
from relgrade.protocol.corrections import correction_row
from relgrade.text import check_free_text, inert, markdown_text
from relgrade.web.app import create_app
from tests.graders import experiment as ex
from tests.test_decision import P, report
from tests.test_report_post_hoc import POST_HOC

RLO, ESC = "\u202e", "\x1b"


@pytest.mark.parametrize("text, shown", [
    ("abc\u202edef", "abc\\u202edef"),
    ("red \x1b[31m!", "red \\u001b[31m!"),
    ("two\nlines\r", "two\\u000alines\\u000d"),
    ("C1 \x9b and zero\u200bwidth", "C1 \\u009b and zero\\u200bwidth"),
    ("isolate \u2066x\u2069 and \u2028", "isolate \\u2066x\\u2069 and \\u2028"),
    ("plain café, 日本, tab\tend", "plain café, 日本, tab\\u0009end"),
])
def test_inert_shows_each_control_and_bidi_character_as_its_code(text, shown):
    assert inert(text) == shown
    assert inert(text).isprintable()


def test_inert_keeps_what_it_is_told_to_keep():
    assert inert("a\tb\nc\u202e", keep="\n\t") == "a\tb\nc\\u202e"


def test_markdown_text_is_one_line_one_cell_and_no_tag():
    assert markdown_text("Ana\nBen | <img onerror=x>") == \
        "Ana\\u000aBen \\| &lt;img onerror=x&gt;"


def test_a_free_text_field_is_capped_by_characters():
    assert check_free_text(" " + "x" * 300 + " ", limit=300, what="--reason") == "x" * 300
    with pytest.raises(ValueError, match=r"--reason longer than 300 characters \(found 301"):
        check_free_text("x" * 301, limit=300, what="--reason")


# --- the grading page ---------------------------------------------------------------------

def test_bidi_and_escape_sequences_in_chunk_text_reach_the_page_as_codes(tmp_path):
    hostile = f"def f():\n    return 'admin{RLO}nimda' + '{ESC}[2J'\n"
    graders = {"alice": {"role": "grader", "kind": "human", "family": "person"},
               "bob": {"role": "auditor", "kind": "human", "family": "person"}}
    ex.build(tmp_path, queries=1, chunks=2, audit=1, graders=graders,
             text_of=lambda c: hostile)
    site, stores = build_site(str(tmp_path / "params.yaml"), graders=["alice"])
    try:
        client = TestClient(create_app(site))
        client.get(f"/login?token={site.graders['alice'].token}")
        page = client.get("/g/alice/q/q01/0").text
    finally:
        site.writer.close()
        for s in stores:
            s.close()
    assert RLO not in page and ESC not in page
    assert "\\u202e" in page and "\\u001b" in page


# --- the reports --------------------------------------------------------------------------

def hostile_post_hoc():
    corrections = [dict(POST_HOC["post_hoc"]["corrections"][0],
                        corrected_by="Ana\nEve <script>x()</script>",
                        reason=f"right{RLO}thgir {ESC}[31m <img src=x onerror=alert(1)>")]
    return dict(POST_HOC, post_hoc=dict(POST_HOC["post_hoc"], corrections=corrections))


def test_a_correction_name_and_reason_stay_inert_in_the_markdown_report():
    md = decision.to_markdown(decision.build_decision(report(), primary=P,
                                                      post_hoc=hostile_post_hoc()))
    section = md.split("## Post-hoc", 1)[1].split("\n## ", 1)[0]
    assert RLO not in md and ESC not in md and "<script>" not in md and "<img" not in md
    # the summary names the person on one line: the newline cannot split the paragraph
    assert "1 correction of grader-a's grades by Ana\\u000aEve &lt;script&gt;x()&lt;/script&gt;," \
        in section
    assert ("| Ana\\u000aEve &lt;script&gt;x()&lt;/script&gt; | 2026-12-01T11:00:00Z | "
            "right\\u202ethgir \\u001b[31m &lt;img src=x onerror=alert(1)&gt; |") in section


def test_a_correction_name_and_reason_stay_inert_in_the_html_report():
    html = decision.to_html(decision.build_decision(report(), primary=P,
                                                    post_hoc=hostile_post_hoc()))
    assert RLO not in html and ESC not in html and "<script>x" not in html
    assert "right\\u202ethgir \\u001b[31m &lt;img src=x onerror=alert(1)&gt;" in html
    assert "Ana\\u000aEve &lt;script&gt;x()&lt;/script&gt;" in html


# --- the fields a user sets ---------------------------------------------------------------

def correct(**kw):
    import pandas as pd

    key = pd.DataFrame({"query_id": ["q1"], "chunk_id": ["c1"], "grade": [0]})
    args = dict(key=key, pool=key[["query_id", "chunk_id"]], earlier=[], query_id="q1",
                chunk_id="c1", grade=2, reason="answers it", scale=[0, 1, 2], grader="g",
                round=1, corrected_at="t", key_sha256="a" * 64, made_on=None,
                source="round-1.corrections.jsonl")
    return correction_row(**{**args, **kw})


def test_a_correction_reason_is_capped_like_a_grade_reason():
    assert correct(reason="x" * 300)["reason"] == "x" * 300
    with pytest.raises(InputError) as e:
        correct(reason="x" * 100_000)
    assert str(e.value) == ("round-1.corrections.jsonl: pair (q1, c1): --reason longer than 300 "
                            "characters (found 100000 characters). Shorten it")


def test_a_correction_name_is_capped():
    assert correct(corrected_by="A" * 100)["corrected_by"] == "A" * 100
    with pytest.raises(InputError, match=r"--by longer than 100 characters \(found 101"):
        correct(corrected_by="A" * 101)


def params_with(tmp_path, **sections):
    from tests.e2e import tiny

    params = yaml.safe_load((tiny.REPO / "params.yaml").read_text())
    for name, values in sections.items():
        params[name] = {**params[name], **values}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
    return path


@pytest.mark.parametrize("group, found", [
    (f"key{RLO}word", "found 'key\\u202eword'"),
    ("g" * 101, "longer than 100 characters (found 101"),
])
def test_a_query_group_name_is_plain_text_and_capped(tmp_path, group, found):
    path = params_with(tmp_path, queries={"groups": ["question", group]})
    with pytest.raises(InputError) as e:
        load_params(path)
    assert f"{path}: queries.groups: " in str(e.value) and found in str(e.value)
    assert RLO not in str(e.value)
