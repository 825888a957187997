"""The default experiment's human-written inputs: query set, intent table and grading rubric.

These files are read by the queries, intents and packets stages; the checks here are the
protocol's rules for them (one locked reading per query, balanced groups, a versioned rubric
whose worked examples obey the grade-row limits) plus the shape this experiment promises:
36 queries about click 8.1.8, 18 keyword and 18 question, at least 7 of each query form.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
QUERIES = ROOT / PARAMS["queries"]["input"]
INTENTS = ROOT / PARAMS["intents"]["input"]
RUBRIC = ROOT / PARAMS["grading"]["rubric"]
REVISION_LOG = RUBRIC.parent / "CHANGELOG.md"

BOUNDARY_CASES = [
    "Right symbol, wrong behaviour",
    "Neighbouring question",
    "Header only or table of contents",
    "Duplicates",
    "Split answer",
    "Construct split across chunks",
    "Implementation, test or doc",
    "Outdated text",
]
FORMS = {"Where": "where", "How": "how", "Why": "why", "Which": "which", "What": "which"}
GROUP_PREFIX = {"keyword": "kw", "question": "qu"}

REASON_LINE = re.compile(r"^\s*(?:[-*]\s+)?Reason:\s*(.*?)\s*$")
GRADE_LINE = re.compile(r"^\s*(?:[-*]\s+)?Grade:\s*(\S+)\s*$")
FILE_NAME = re.compile(r"[\w./-]+\.(?:py|rst|md|txt|toml|cfg|ini)\b")
#: a file of the click 8.1.8 sdist, as a worked example names it
CORPUS_FILE = re.compile(r"`(?:src/click/|docs/|tests/)[\w/.-]+\.(?:py|rst)`|`CHANGES\.rst`")


def read_tsv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a tab-separated file, failing on a ragged row."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        assert len(fields) == len(header), f"{path.name} line {number}: {len(fields)} fields"
        rows.append(fields)
    return header, rows


@pytest.fixture(scope="module")
def queries() -> list[dict]:
    header, rows = read_tsv_rows(QUERIES)
    assert header == ["query_id", "query", "group"]
    return [dict(zip(header, row)) for row in rows]


@pytest.fixture(scope="module")
def intents() -> list[dict]:
    header, rows = read_tsv_rows(INTENTS)
    assert header == ["query_id", "query", "intent"]
    return [dict(zip(header, row)) for row in rows]


@pytest.fixture(scope="module")
def rubric() -> str:
    return RUBRIC.read_text(encoding="utf-8")


def boundary_sections(rubric: str) -> dict[str, str]:
    """The text under each ``###`` heading of the rubric's boundary-case section."""
    part = re.search(r"^## \d+\. Boundary cases\s*$(.*?)(?=^## |\Z)", rubric, re.M | re.S)
    assert part is not None, "the rubric has no '## N. Boundary cases' section"
    pieces = re.split(r"^### (.+?)\s*$", part.group(1), flags=re.M)
    return {pieces[i]: pieces[i + 1] for i in range(1, len(pieces), 2)}


# ---------------------------------------------------------------- queries


def test_query_ids_are_unique(queries):
    counts = Counter(q["query_id"] for q in queries)
    assert [qid for qid, n in counts.items() if n > 1] == []


def test_query_ids_carry_their_group_prefix_and_run_from_01_to_18(queries):
    for group, prefix in GROUP_PREFIX.items():
        ids = sorted(q["query_id"] for q in queries if q["group"] == group)
        assert ids == [f"{prefix}{n:02d}" for n in range(1, 19)]


def test_groups_are_eighteen_keyword_and_eighteen_question(queries):
    assert Counter(q["group"] for q in queries) == {"keyword": 18, "question": 18}
    assert set(PARAMS["queries"]["groups"]) == {"keyword", "question"}


def test_keyword_queries_have_two_to_four_terms(queries):
    lengths = {q["query_id"]: len(q["query"].split()) for q in queries if q["group"] == "keyword"}
    assert {qid: n for qid, n in lengths.items() if not 2 <= n <= 4} == {}


def test_question_queries_are_full_sentences_ending_in_a_question_mark(queries):
    bad = [q["query_id"] for q in queries if q["group"] == "question"
           and (len(q["query"].split()) < 6 or not q["query"].endswith("?")
                or not q["query"][0].isupper())]
    assert bad == []


def test_query_texts_are_unique_and_trimmed(queries):
    texts = [q["query"] for q in queries]
    assert len(set(texts)) == len(texts)
    assert [t for t in texts if t != t.strip() or not t] == []


# ---------------------------------------------------------------- intents


def test_every_query_has_exactly_one_intent_with_identical_query_text(queries, intents):
    per_id = Counter(i["query_id"] for i in intents)
    assert {qid: n for qid, n in per_id.items() if n != 1} == {}
    assert set(per_id) == {q["query_id"] for q in queries}
    text = {q["query_id"]: q["query"] for q in queries}
    assert [i["query_id"] for i in intents if i["query"] != text[i["query_id"]]] == []


def test_no_intent_offers_two_readings(intents):
    def two_readings(intent: str) -> bool:
        lowered = f" {intent.lower()} "
        return " or " in lowered or "either" in lowered or "/" in intent

    assert [i["query_id"] for i in intents if two_readings(i["intent"])] == []


def test_each_intent_is_one_sentence(intents):
    def one_sentence(intent: str) -> bool:
        body = intent[:-1]
        return intent[-1] in "?." and re.search(r"[.?!](\s|$)", body) is None

    assert [i["query_id"] for i in intents if not one_sentence(i["intent"])] == []


def test_each_intent_states_its_form_and_every_form_has_at_least_seven_queries(intents):
    forms = {i["query_id"]: FORMS.get(i["intent"].split()[0]) for i in intents}
    assert [qid for qid, form in forms.items() if form is None] == []
    counts = Counter(forms.values())
    assert {form: counts[form] for form in ("where", "how", "why", "which")
            if counts[form] < 7} == {}


def test_intents_name_no_file_the_query_does_not_name(intents):
    leaks = {i["query_id"]: sorted(set(FILE_NAME.findall(i["intent"]))
                                   - set(FILE_NAME.findall(i["query"])))
             for i in intents}
    assert {qid: names for qid, names in leaks.items() if names} == {}


# ---------------------------------------------------------------- rubric


def test_rubric_version_line_matches_params(rubric):
    first = rubric.splitlines()[0]
    match = re.fullmatch(r"version:\s*(\S+)", first)
    assert match is not None, f"first line is {first!r}, not 'version: ...'"
    assert match.group(1) == PARAMS["grading"]["rubric_version"]


def test_rubric_names_every_boundary_case_heading(rubric):
    assert sorted(set(BOUNDARY_CASES) - set(boundary_sections(rubric))) == []


def test_every_boundary_case_has_a_worked_example_with_grade_and_reason(rubric):
    sections = boundary_sections(rubric)
    missing = []
    for case in BOUNDARY_CASES:
        if case not in sections:
            missing.append(case)
            continue
        lines = sections[case].splitlines()
        grades = [m.group(1) for m in map(GRADE_LINE.match, lines) if m]
        reasons = [m.group(1) for m in map(REASON_LINE.match, lines) if m]
        if not grades or len(grades) != len(reasons) or not CORPUS_FILE.search(sections[case]):
            missing.append(case)
    assert missing == []


def test_worked_example_reasons_fit_the_word_limit(rubric):
    limit = PARAMS["grading"]["max_reason_words"]
    reasons = [m.group(1) for m in map(REASON_LINE.match, rubric.splitlines()) if m]
    assert len(reasons) >= 2 * len(BOUNDARY_CASES)
    assert {r: len(r.split()) for r in reasons if not 0 < len(r.split()) <= limit} == {}


def test_worked_example_grades_are_on_the_scale(rubric):
    scale = {str(g) for g in PARAMS["scale"]["grades"]}
    grades = [m.group(1) for m in map(GRADE_LINE.match, rubric.splitlines()) if m]
    assert grades and [g for g in grades if g not in scale] == []
    assert set(grades) == scale, "the worked examples should show every grade"


def test_example_grade_row_has_the_documented_key_order_and_limits(rubric):
    rows = [json.loads(line) for line in rubric.splitlines()
            if line.startswith('{"query_id"')]
    assert rows, "the rubric shows no example grade row"
    limit = PARAMS["grading"]["max_reason_words"]
    for row in rows:
        assert list(row) == ["query_id", "chunk_id", "reason", "grade"]
        assert isinstance(row["query_id"], str) and isinstance(row["chunk_id"], str)
        assert row["grade"] in PARAMS["scale"]["grades"]
        assert 0 < len(row["reason"].split()) <= limit


def test_rubric_quotes_no_query_or_intent_of_the_experiment(rubric, intents):
    text = rubric.lower()
    quoted = [i["query_id"] for i in intents
              if i["query"].lower() in text or i["intent"].lower() in text]
    assert quoted == []


def test_revision_log_has_the_v1_entry_dated_2026_11_30():
    log = REVISION_LOG.read_text(encoding="utf-8")
    assert re.search(r"^## v1\b.*\b2026-11-30\b", log, re.M) is not None
