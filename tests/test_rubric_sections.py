"""Rubric sections, revisions and which grades a revision makes stale (relgrade.protocol.rubric),
with expected values worked out by hand from the small rubrics below."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.protocol import bank
from relgrade.protocol import rubric as rb

V1 = """version: v1

# Rubric, v1

Read the packet.

## 1. The scale

0, 1 or 2.

## 2. Boundary cases

Cases below.

### Duplicates

Grade each copy alone.

### Split answer

Each half earns a 1.

## 3. Traps

Do not compare chunks.
"""


def _v2(changes="duplicates", *, text="Grade each copy alone; a verbatim copy earns the same."):
    body = V1.split("\n\n", 1)[1].replace("Rubric, v1", "Rubric, v2")
    body = body.replace("Grade each copy alone.", text)
    front = "version: v2\nrevises: v1\n" + (f"changes: {changes}\n" if changes is not None else "")
    return front + "\n" + body


def test_sections_are_the_headings_below_the_title_with_ids_from_their_text():
    r = rb.parse(V1)
    assert list(r.sections) == ["preamble", "the-scale", "boundary-cases", "duplicates",
                                "split-answer", "traps"]
    assert r.front == {"version": "v1"}
    s = r.sections["duplicates"]
    assert (s.heading, s.level, s.line, s.parent) == ("Duplicates", 3, 15, "boundary-cases")
    # a section's hash is over its own text only, outer blank lines dropped
    assert s.sha256 == hashlib.sha256(b"Grade each copy alone.").hexdigest()
    assert r.sections["boundary-cases"].sha256 == hashlib.sha256(b"Cases below.").hexdigest()
    # the preamble leaves out the title line
    assert r.sections["preamble"].sha256 == hashlib.sha256(b"Read the packet.").hexdigest()


def test_a_catalogue_and_its_cases_apply_to_the_grades_naming_them_the_rest_to_every_grade():
    r = rb.parse(V1)
    assert {k: s.general for k, s in r.sections.items()} == {
        "preamble": True, "the-scale": True, "boundary-cases": False, "duplicates": False,
        "split-answer": False, "traps": True}


def test_two_headings_with_one_id_are_refused_naming_the_second_line():
    with pytest.raises(InputError) as e:
        rb.parse("# T\n## Traps\nx\n## traps!\ny\n", source="rubric/v9.md")
    assert str(e.value) == ("rubric/v9.md:4: two rubric sections have the id traps (the first "
                            "on line 2) (found traps!). Give each heading its own wording")


def test_a_heading_inside_a_code_block_is_no_section():
    r = rb.parse("# T\n## A\n```\n## not a heading\n```\n")
    assert list(r.sections) == ["preamble", "a"]


def test_a_revision_touches_the_changed_case_its_catalogue_and_nothing_else():
    old, new = rb.parse(V1), rb.parse(_v2())
    assert rb.changed_sections(old, new) == ["duplicates"]
    assert rb.touched(old, new, ["duplicates"]) == frozenset({"duplicates", "boundary-cases"})
    # the catalogue's own text: every case inside it
    assert rb.touched(old, new, ["boundary-cases"]) == frozenset(
        {"boundary-cases", "duplicates", "split-answer"})
    # a general section: every grade (None)
    assert rb.touched(old, new, ["the-scale"]) is None


@pytest.mark.parametrize("changes, message", [
    (None, "rubric/v2.md:3: changes: a rubric revision names the sections it changed (found "
           "revises v1, no section named). Add a line `changes: SECTION-ID, ...` (ids: "
           "`relgrade disputes sections`)"),
    ("", "rubric/v2.md:3: changes: a rubric revision names the sections it changed (found "
         "revises v1, no section named). Add a line `changes: SECTION-ID, ...` (ids: "
         "`relgrade disputes sections`)"),
    ("duplicate", "rubric/v2.md:3: changes: unknown section id in a rubric revision's changes "
                  "(found duplicate). Name sections by their ids (`relgrade disputes "
                  "sections`)"),
    ("split-answer", "rubric/v2.md:3: changes: sections changed since v1 but not named in the "
                     "revision's changes (found duplicates). Name them, or undo the edit "
                     "(compare with rubric/v1.md)"),
    ("duplicates, traps", "rubric/v2.md:3: changes: sections named in the revision's changes "
                          "are unchanged since v1 (found traps). Name only the sections the "
                          "revision changed"),
], ids=["no-changes-line", "empty-changes", "unknown-id", "undeclared-change",
        "unchanged-named"])
def test_a_revision_whose_changes_are_missing_unknown_or_untrue_is_refused(changes, message):
    with pytest.raises(InputError) as e:
        rb.check_revision(rb.parse(V1), rb.parse(_v2(changes)), source="rubric/v2.md",
                          old_source="rubric/v1.md")
    assert str(e.value) == message


def _bank(reasons, sha):
    return pd.DataFrame({"query_id": "q", "chunk_id": [f"c{i}" for i in range(len(reasons))],
                         "reason": reasons, "rubric_sha256": sha, "content_sha256": "h",
                         "intent_sha256": "i", "grader": "g"})


def test_only_grades_naming_a_touched_section_or_none_are_stale_after_a_revision():
    chain = [("sha-v2", rb.parse(_v2()), "rubric/v2.md"), ("sha-v1", rb.parse(V1), "rubric/v1.md")]
    c = rb.carry(chain)
    assert c.touched == {"sha-v1": frozenset({"duplicates", "boundary-cases"})}
    b = _bank(["§duplicates copy", "§split-answer half", "no section named",
               "§boundary-cases general", "§traps §split-answer", "§nosuch section",
               "§split-answer", "§split-answer"], "sha-v1")
    b.loc[6, "rubric_sha256"] = "sha-v2"  # made under the current rubric
    b.loc[7, "rubric_sha256"] = "sha-v0"  # a rubric outside the chain
    status = bank.currency(b, content=pd.Series({f"c{i}": "h" for i in range(8)}),
                           intents=pd.Series({"q": "i"}), rubric_sha256="sha-v2", carry=c)
    assert status.tolist() == ["rubric", "current", "rubric", "rubric", "current", "rubric",
                               "current", "rubric"]
    # without the chain, any other rubric is stale, as before
    plain = bank.currency(b, content=pd.Series({f"c{i}": "h" for i in range(8)}),
                          intents=pd.Series({"q": "i"}), rubric_sha256="sha-v2")
    assert plain.tolist() == ["rubric"] * 6 + ["current", "rubric"]


def test_a_dispute_on_a_pair_names_a_section_for_every_grade_of_that_pair():
    chain = [("sha-v2", rb.parse(_v2()), "rubric/v2.md"), ("sha-v1", rb.parse(V1), "rubric/v1.md")]
    b = _bank(["no section named", "no section named"], "sha-v1")
    c = rb.carry(chain).with_disputes(pd.DataFrame(
        {"query_id": ["q", "q"], "chunk_id": ["c0", "c1"], "section": ["split-answer",
                                                                        "duplicates"]}))
    assert c.carried(b).tolist() == [True, False]


def test_a_change_of_a_general_section_anywhere_in_the_chain_makes_every_grade_stale():
    v2 = rb.parse(_v2())
    v3_text = _v2().replace("version: v2\nrevises: v1\nchanges: duplicates",
                            "version: v3\nrevises: v2\nchanges: traps").replace(
        "Do not compare chunks.", "Never compare chunks.")
    chain = [("sha-v3", rb.parse(v3_text), "rubric/v3.md"), ("sha-v2", v2, "rubric/v2.md"),
             ("sha-v1", rb.parse(V1), "rubric/v1.md")]
    c = rb.carry(chain)
    assert c.touched == {}
    assert [r.version for r in c.revisions] == ["v3", "v2"]
    assert rb.revision_record(c) == [
        {"version": "v3", "revises": "v2", "changes": ["traps"], "settles": []},
        {"version": "v2", "revises": "v1", "changes": ["duplicates"], "settles": []}]


def test_the_sections_a_reason_cites_are_its_section_marks():
    assert rb.cited("§duplicates and §split-answer, not §") == ["duplicates", "split-answer"]
    assert rb.cited("a reason naming none") == []
