"""The decision report's post-hoc section: the corrections, both keys' sha256 and each arm's
primary measure under both keys, beside the frozen key's numbers and never in their place."""

from __future__ import annotations

from relgrade.evaluation import decision
from tests.test_decision import P, report

FROZEN = {"key_sha256": "a" * 64, "frozen_at": "2026-12-01T10:00:00Z"}
CORRECTIONS = [
    {"query_id": "q1", "chunk_id": "c3", "grade_before": 0, "grade": 2,
     "reason": "it answers the question | in full", "grader": "grader-a", "round": 1,
     "corrected_at": "2026-12-01T11:00:00Z", "corrected_by": "Ana Reviewer"},
    {"query_id": "q2", "chunk_id": "c9", "grade_before": 2, "grade": 1,
     "reason": "partly", "grader": "grader-a", "round": 1,
     "corrected_at": "2026-12-01T12:30:00Z", "corrected_by": None}]
POST_HOC = {
    "measure": P, "frozen": FROZEN,
    "post_hoc": {"key_sha256": "b" * 64, "frozen_at": "2026-12-01T12:31:00Z", "post_hoc": True,
                 "corrections": CORRECTIONS,
                 "corrections_set_aside": [{"query_id": "q3", "chunk_id": "c1", "grade": 1}]},
    "arms": {"bm25": {"frozen": 0.5, "post_hoc": 0.625},
             "dense": {"frozen": 0.75, "post_hoc": 0.7},
             "new": {"frozen": 0.25, "post_hoc": None}},
}


def _section(md: str) -> str:
    return md.split("## Post-hoc: a corrected key beside the frozen one\n", 1)[1].split(
        "\n## ", 1)[0]


def test_the_post_hoc_section_lists_the_corrections_both_keys_and_each_arm_under_both():
    d = decision.build_decision(report(), primary=P, post_hoc=POST_HOC)
    section = _section(decision.to_markdown(d))
    # two corrections of grader-a's grades, one by a named person, the first at 11:00, the
    # last at 12:30; one set aside
    assert ("2 corrections of grader-a's grades by Ana Reviewer (some unnamed), recorded with "
            "`relgrade grade correct` from 2026-12-01T11:00:00Z to 2026-12-01T12:30:00Z. 1 set "
            "aside (made on other content, or of a pair the key no longer holds).") in section
    assert "| frozen | `" + "a" * 64 + "` | 2026-12-01T10:00:00Z |" in section
    assert "| post-hoc | `" + "b" * 64 + "` | 2026-12-01T12:31:00Z |" in section
    # a `|` in a reason is escaped, so it cannot break the row
    assert ("| q1 | c3 | 0 | 2 | grader-a | Ana Reviewer | 2026-12-01T11:00:00Z | it answers "
            "the question \\| in full |") in section
    assert "| q2 | c9 | 2 | 1 | grader-a | — | 2026-12-01T12:30:00Z | partly |" in section
    # 0.625 - 0.5 = +0.125; 0.7 - 0.75 = -0.05; an arm without post-hoc metrics: no change
    assert "| bm25 | 0.5000 | 0.6250 | +0.1250 |" in section
    assert "| dense | 0.7500 | 0.7000 | -0.0500 |" in section
    assert "| new | 0.2500 | — | — |" in section
    html = decision.to_html(d)
    assert '<h2 id="post-hoc">Post-hoc: a corrected key beside the frozen one</h2>' in html
    assert "it answers the question | in full" in html
    assert '<td class="num">+0.1250</td>' in html


def test_the_post_hoc_section_changes_neither_the_verdicts_nor_the_frozen_numbers():
    plain = decision.build_decision(report(), primary=P)
    beside = decision.build_decision(report(), primary=P, post_hoc=POST_HOC)
    assert (beside.header, beside.verdicts, beside.arms, beside.pairs) == \
        (plain.header, plain.verdicts, plain.arms, plain.pairs)
    md, plain_md = decision.to_markdown(beside), decision.to_markdown(plain)
    start = md.index("\n## Post-hoc")
    end = md.find("\n## ", start + 1)
    # the report less its post-hoc section is the report without one, byte for byte
    assert end != -1 and md[:start] + md[end:] == plain_md
    assert "- post-hoc: `no`" in md  # the frozen key is not post-hoc


def test_without_a_post_hoc_key_the_report_has_no_such_section():
    d = decision.build_decision(report(), primary=P, post_hoc=None)
    assert d.post_hoc is None
    assert "Post-hoc" not in decision.to_markdown(d)
    assert 'id="post-hoc"' not in decision.to_html(d)


def test_a_changed_key_allowed_by_params_is_reported_without_corrections():
    changed = dict(POST_HOC, post_hoc={"key_sha256": "c" * 64, "frozen_at": "t",
                                       "post_hoc": True})
    cells = decision.post_hoc_cells(changed)
    assert cells["summary"] == ("A changed key used after metrics were seen, allowed by params "
                                "`grading.post_hoc`; no correction recorded.")
    assert cells["corrections"] == []
    section = _section(decision.to_markdown(decision.build_decision(report(), primary=P,
                                                                    post_hoc=changed)))
    assert "grade before" not in section and "| bm25 | 0.5000 | 0.6250 | +0.1250 |" in section
