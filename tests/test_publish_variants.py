"""The publish scan sees through disguises: case, Unicode forms, invisible characters, breaks.

Each variant plants one private text, changed the way an edit, a copy-paste or a tool changes
text, into a published field; every one must be caught. Short texts (under 4 characters) are
caught where they are a whole field, and prose is refused in fields that hold versions or ids.
"""

from __future__ import annotations

import json
import unicodedata

import pytest

from relgrade.errors import ProtocolError
from relgrade.protocol import publish
from tests.test_publish import ALLOWED, KEY, METRICS, RECORD

QUERY = "Where is the HTTP timeout set?"
ACCENTED = "Où se règle le délai réseau ?"
INTENT = "Where is the default HTTP timeout configured, and to what value?"
REASON = "Sets the config file default."
PRIVATE = {
    "query": [("qu01", QUERY), ("qu02", ACCENTED), ("kw03", "tls"), ("kw04", "memoize")],
    "intent": [("qu01", INTENT)],
    "reason": [("grader-a qu01 src/http.py:TIMEOUT", REASON)],
}


def zw(text, ch):
    """``ch`` put inside every word of ``text``."""
    return " ".join(w[:1] + ch + w[1:] if len(w) > 1 else w for w in text.split(" "))


def fullwidth(text):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c
                   for c in text)


def metrics_with(value, field="note"):
    m = json.loads(json.dumps(METRICS))
    m["bm25"][field] = value
    return publish.bundle_files(KEY, RECORD, m)


def record_with(field, value):
    return publish.bundle_files(KEY, {**RECORD, field: value}, METRICS)


def with_file(name, text):
    files = dict(publish.bundle_files(KEY, RECORD, METRICS))
    files[name] = text.encode("utf-8")
    return files


VARIANTS = {
    "as-is": (lambda: metrics_with(QUERY), "qu01"),
    "upper-case": (lambda: metrics_with(QUERY.upper()), "qu01"),
    "lower-case": (lambda: metrics_with(QUERY.lower()), "qu01"),
    "title-case": (lambda: metrics_with(QUERY.title()), "qu01"),
    "swapped-case": (lambda: metrics_with(QUERY.swapcase()), "qu01"),
    "nfd": (lambda: metrics_with(unicodedata.normalize("NFD", ACCENTED)), "qu02"),
    "nfd-upper": (lambda: metrics_with(unicodedata.normalize("NFD", ACCENTED.upper())), "qu02"),
    "fullwidth": (lambda: metrics_with(fullwidth(QUERY)), "qu01"),
    "no-break-spaces": (lambda: metrics_with(QUERY.replace(" ", "\u00a0")), "qu01"),
    "tabs-and-runs-of-spaces": (lambda: metrics_with(QUERY.replace(" ", " \t  ")), "qu01"),
    "line-break-in-a-string": (lambda: metrics_with(QUERY.replace("HTTP ", "HTTP\n")), "qu01"),
    "crlf-in-a-string": (lambda: metrics_with(QUERY.replace("HTTP ", "HTTP\r\n")), "qu01"),
    "split-over-two-strings": (lambda: metrics_with(["Where is the HTTP", "timeout set?"]),
                               "qu01"),
    "split-over-two-lines-of-a-text-file": (
        lambda: with_file("notes.txt", "see: Where is the\nHTTP timeout set?\n"), "qu01"),
    "zero-width-space": (lambda: metrics_with(zw(QUERY, "\u200b")), "qu01"),
    "zero-width-non-joiner": (lambda: metrics_with(zw(QUERY, "\u200c")), "qu01"),
    "zero-width-joiner": (lambda: metrics_with(zw(QUERY, "\u200d")), "qu01"),
    "word-joiner": (lambda: metrics_with(zw(QUERY, "\u2060")), "qu01"),
    "byte-order-mark": (lambda: metrics_with(zw(QUERY, "\ufeff")), "qu01"),
    "soft-hyphen": (lambda: metrics_with(zw(QUERY, "\u00ad")), "qu01"),
    "zero-width-and-upper-case": (lambda: metrics_with(zw(QUERY.upper(), "\u200b")), "qu01"),
    "ligatures": (lambda: metrics_with(REASON.replace("fi", "\ufb01")), "grader-a qu01 src/http.py:TIMEOUT"),
    "json-escaped-raw-bytes": (
        lambda: {"x.json": json.dumps({"n": QUERY.upper()}, ensure_ascii=True).encode()}, "qu01"),
    "object-key": (lambda: metrics_with({QUERY.lower(): 1}), "qu01"),
    "part-of-a-long-intent-upper-cased": (
        lambda: metrics_with("policy: " + INTENT.upper()[5:55]), "qu01"),
    "long-intent-across-readme-lines": (
        lambda: with_file("README.txt", "note: " + INTENT.replace(" configured", "\nconfigured")
                          + "\n"), "qu01"),
    "short-text-as-a-whole-value": (lambda: metrics_with("tls"), "kw03"),
    "short-text-upper-cased-as-a-whole-value": (lambda: metrics_with("TLS"), "kw03"),
    "short-text-as-rubric-version": (lambda: record_with("rubric_version", "TLS"), "kw03"),
    "short-text-as-a-line-field": (lambda: with_file("notes.txt", "kw01 0 tls 1\n"), "kw03"),
    "one-word-fullwidth": (lambda: metrics_with(fullwidth("memoize")), "kw04"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_disguised_private_text_is_caught(name):
    make, ident = VARIANTS[name]
    leaks = publish.find_private(make(), PRIVATE, allowed=ALLOWED)
    assert ident in {leak.id for leak in leaks}, f"{name} slipped through"


def test_the_variant_matrix_is_large():
    assert len(VARIANTS) >= 21


@pytest.mark.parametrize("planted", ["tls-bench", "mtls", "a tls b", "see tls docs"],
                         ids=["prefix", "inside-a-word", "inside-a-phrase", "inside-a-sentence"])
def test_a_short_text_inside_a_longer_field_is_not_a_leak(planted):
    assert publish.find_private(metrics_with(planted), PRIVATE, allowed=ALLOWED) == []


def test_a_short_text_equal_to_an_object_key_is_not_a_leak():
    private = {"query": [("kw05", "arm")]}  # relgrade's own key in every metrics file
    assert publish.find_private(publish.bundle_files(KEY, RECORD, METRICS), private,
                                allowed=ALLOWED) == []


def test_the_clean_bundle_stays_clean():
    assert publish.find_private(publish.bundle_files(KEY, RECORD, METRICS), PRIVATE,
                                allowed=ALLOWED) == []


@pytest.mark.parametrize("field, value", [
    ("rubric_version", QUERY.upper()),
    ("rubric_version", "v1 final"),
    ("pool_version", "x" * 65),
    ("dropped_queries", ["kw02", "where is it"]),
    ("frozen_at", 5),
], ids=["query-as-rubric-version", "space-in-version", "overlong-pool-version",
        "prose-in-dropped-ids", "number-as-time"])
def test_text_in_a_field_for_a_version_or_id_is_refused(field, value):
    with pytest.raises(ProtocolError, match=f"field {field} must hold a version or id"):
        record_with(field, value)


def test_prose_as_an_arm_name_is_refused():
    m = json.loads(json.dumps(METRICS))
    m["Where is the HTTP timeout"] = dict(m.pop("dense"), arm="dense")
    with pytest.raises(ProtocolError, match="field arm must hold a version or id"):
        publish.bundle_files(KEY, RECORD, m)
