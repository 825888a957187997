"""The key: the key grader's grades of the whole pool, frozen, sorted and hashed.

The key holds one row per pool pair, ``(query_id, chunk_id, grade)``, taken from the key
grader (params ``grading.key_grader``) for the current round only. The auditor's grades never
enter it, not even on the audit queries: those queries would otherwise carry a different
grader than the rest. A query whose whole pool has no grade at or above ``relevant_min`` is
dropped and listed, since every arm would score 0 on it.

The key's hash
--------------
The canonical byte form of a key is one line per row, rows sorted by ``query_id`` and then
``chunk_id`` in Python string order (Unicode code point order), each line the JSON object
``{"query_id":"...","chunk_id":"...","grade":N}`` with the keys in that order, no spaces,
non-ASCII characters written as UTF-8 rather than escaped, and ids as JSON strings, followed
by a single LF. An empty key is zero bytes. ``key_sha256`` is the lowercase hex sha256 of
those bytes. The key file (params ``paths.key``) is written in exactly this form, so
``sha256sum key.jsonl`` reproduces the hash.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Mapping

import pandas as pd

from relgrade.canonical import canonical_json
from relgrade.errors import InputError, ProtocolError


def _sorted_rows(key: pd.DataFrame) -> list[tuple[str, str, int]]:
    # plain lists first: iterating an Arrow-backed column element by element is slow
    rows = sorted(zip(key["query_id"].astype(str).tolist(),
                      key["chunk_id"].astype(str).tolist(),
                      (int(g) for g in key["grade"].tolist())))
    for a, b in zip(rows, rows[1:]):
        if a[:2] == b[:2]:
            raise InputError("a key holds one grade per pair",
                             item=f"pair ({a[0]}, {a[1]})", found="two rows")
    return rows


def build_key(
    grades: pd.DataFrame,
    *,
    key_grader: str,
    round: int,
    pool: pd.DataFrame,
    relevant_min: int,
) -> tuple[pd.DataFrame, list[str]]:
    """Build the key from the key grader's grades of the pool.

    Parameters
    ----------
    grades : pandas.DataFrame
        The long grades table: columns ``query_id``, ``chunk_id``, ``grader``, ``round``,
        ``grade`` (at least), one row per (pair, grader, round).
    key_grader : str
        Whose grades make the key (params ``grading.key_grader``).
    round : int
        The grading round (params ``grading.round``).
    pool : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``: every pair the key must grade.
    relevant_min : int
        The lowest grade that counts as relevant (params ``scale.relevant_min``).

    Returns
    -------
    key : pandas.DataFrame of shape (n_pairs, 3)
        Columns ``query_id`` (str), ``chunk_id`` (str), ``grade`` (int64), sorted by
        (query_id, chunk_id) in Python string order, without the dropped queries.
    dropped_query_ids : list of str
        Queries whose whole pool has no grade >= ``relevant_min``, sorted.

    Raises
    ------
    InputError
        A pool pair lacks a grade from the key grader (the message says how many and in
        which queries); the key grader graded a pair outside the pool, or one pair twice; or
        no query is left after dropping.

    Notes
    -----
    Dropping follows the protocol: a query with nothing relevant in its pool scores 0 for
    every arm, and keeping it only pulls the arms' means towards each other.
    """
    mine = grades[(grades["grader"].astype(str) == key_grader)
                  & (grades["round"].astype("int64") == int(round))]
    rows = _sorted_rows(mine)
    have = {(q, c): g for q, c, g in rows}
    pool_pairs = sorted(zip(pool["query_id"].astype(str), pool["chunk_id"].astype(str)))
    pool_set = set(pool_pairs)
    outside = [p for p in have if p not in pool_set]
    if outside:
        q, c = outside[0]
        raise InputError("the key grader graded a pair outside the pool", item=f"pair ({q}, {c})",
                         found=f"{len(outside)} such pairs",
                         fix="Rerun the grades stage against the current pool")
    missing: dict[str, int] = {}
    for p in pool_pairs:
        if p not in have:
            missing[p[0]] = missing.get(p[0], 0) + 1
    if missing:
        n = sum(missing.values())
        shown = ", ".join(f"{q} ({k})" for q, k in list(missing.items())[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise InputError(f"{n} pool pairs lack a grade from the key grader, in "
                         f"{len(missing)} queries: {shown}{more}", item=key_grader,
                         fix=f"Grade them (`relgrade grade` grades only the missing pairs) "
                             f"for round {int(round)}")
    best: dict[str, int] = {}
    for q, _, g in rows:
        best[q] = max(best.get(q, g), g)
    dropped = sorted(q for q, g in best.items() if g < relevant_min)
    kept = [r for r in rows if r[0] not in set(dropped)]
    if not kept:
        raise InputError("no query has a chunk graded relevant: the key would be empty",
                         item=key_grader, found=f"{len(dropped)} queries dropped",
                         fix="Check the grades and params scale.relevant_min")
    key = pd.DataFrame({
        "query_id": pd.Series([r[0] for r in kept], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in kept], dtype="str"),
        "grade": pd.Series([r[2] for r in kept], dtype="int64"),
    })
    return key, dropped


def key_bytes(key: pd.DataFrame) -> bytes:
    """The key's canonical byte form (see the module docstring).

    Parameters
    ----------
    key : pandas.DataFrame
        Columns ``query_id``, ``chunk_id``, ``grade``; any row order.

    Returns
    -------
    bytes
        One LF-terminated UTF-8 JSON line per row, in (query_id, chunk_id) order.

    Raises
    ------
    InputError
        Two rows for one pair.

    Examples
    --------
    >>> key_bytes(pd.DataFrame({"query_id": ["q2", "q1"], "chunk_id": ["7", "é"],
    ...                         "grade": [0, 2]}))
    b'{"query_id":"q1","chunk_id":"\\xc3\\xa9","grade":2}\\n{"query_id":"q2","chunk_id":"7","grade":0}\\n'
    """
    return "".join(
        canonical_json({"query_id": q, "chunk_id": c, "grade": g}) + "\n"
        for q, c, g in _sorted_rows(key)
    ).encode("utf-8")


def key_sha256(key: pd.DataFrame) -> str:
    """The key's hash: hex sha256 of :func:`key_bytes` (64 lowercase hex characters)."""
    return hashlib.sha256(key_bytes(key)).hexdigest()


#: Columns of a key's made-on table: what each key row's grade was made on.
MADE_ON_COLUMNS = ("query_id", "chunk_id", "content_sha256", "intent_sha256", "rubric_sha256")


def made_on_bytes(key: pd.DataFrame, made_on: pd.DataFrame) -> bytes:
    """What every key row's grade was made on, in canonical byte form.

    The key's own bytes (and so its hash) hold only ``(query_id, chunk_id, grade)``; this
    table, written beside it and hashed into its record (``made_on_sha256``), says on which
    chunk content, intent line and rubric file each grade was made.

    Parameters
    ----------
    key : pandas.DataFrame
        The key (``query_id``, ``chunk_id``, ``grade``).
    made_on : pandas.DataFrame
        ``query_id``, ``chunk_id``, ``content_sha256``, ``intent_sha256``, ``rubric_sha256``
        for at least every key pair (more rows are ignored).

    Returns
    -------
    bytes
        One LF-terminated canonical JSON line per key row (keys in the order of
        :data:`MADE_ON_COLUMNS`), rows in the key's (query_id, chunk_id) order.

    Raises
    ------
    InputError
        A key pair has no made-on row.

    Examples
    --------
    >>> k = pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"], "grade": [2]})
    >>> m = pd.DataFrame({"query_id": ["q"], "chunk_id": ["c"], "content_sha256": ["h"],
    ...                   "intent_sha256": ["i"], "rubric_sha256": ["r"]})
    >>> made_on_bytes(k, m)
    b'{"query_id":"q","chunk_id":"c","content_sha256":"h","intent_sha256":"i","rubric_sha256":"r"}\\n'
    """
    table = {(str(r.query_id), str(r.chunk_id)): r for r in made_on.itertuples(index=False)}
    lines = []
    for q, c, _ in _sorted_rows(key):
        r = table.get((q, c))
        if r is None:
            raise InputError("a key pair without what its grade was made on",
                             item=f"pair ({q}, {c})")
        lines.append(canonical_json({"query_id": q, "chunk_id": c,
                                     "content_sha256": str(r.content_sha256),
                                     "intent_sha256": str(r.intent_sha256),
                                     "rubric_sha256": str(r.rubric_sha256)}) + "\n")
    return "".join(lines).encode("utf-8")


def content_revision(old_key: pd.DataFrame, old_made_on: pd.DataFrame,
                     new_key: pd.DataFrame, new_made_on: pd.DataFrame) -> dict:
    """How a new key differs from the frozen one, pair by pair, and whether content explains it.

    A key used for metrics may not change afterwards (the void rule), except where what was
    graded changed: a pair whose chunk text, intent line or rubric changed was regraded on
    something new, which is pending work, not a second look at the same evidence.

    Parameters
    ----------
    old_key, new_key : pandas.DataFrame
        The frozen key and the new one (``query_id``, ``chunk_id``, ``grade``).
    old_made_on, new_made_on : pandas.DataFrame
        Their made-on tables (see :func:`made_on_bytes`).

    Returns
    -------
    dict
        ``regraded``: pairs of both keys whose made-on row differs (content, intent or rubric
        changed), as ``[{"query_id", "chunk_id", "content_sha256", "grade_before", "grade"}]``
        with the new content hash; ``changed``: pairs whose grade differs although they were
        graded on the same content, intent and rubric, ``[(query_id, chunk_id), ...]``;
        ``added`` and ``removed``: pairs in only one of the keys. A new key is a revision by
        content alone when ``changed``, ``added`` and ``removed`` are all empty.

    Examples
    --------
    >>> old = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [2, 0]})
    >>> new = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"], "grade": [0, 0]})
    >>> m = lambda h: pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["a", "b"],
    ...                             "content_sha256": [h, "B"], "intent_sha256": ["i", "i"],
    ...                             "rubric_sha256": ["r", "r"]})
    >>> r = content_revision(old, m("A"), new, m("A2"))
    >>> r["regraded"], r["changed"]
    ([{'query_id': 'q', 'chunk_id': 'a', 'content_sha256': 'A2', 'grade_before': 2, 'grade': 0}], [])
    """
    def table(key, made_on):
        made = {(str(r.query_id), str(r.chunk_id)): (str(r.content_sha256),
                                                      str(r.intent_sha256),
                                                      str(r.rubric_sha256))
                for r in made_on.itertuples(index=False)}
        return {(q, c): (g, made.get((q, c))) for q, c, g in _sorted_rows(key)}

    old, new = table(old_key, old_made_on), table(new_key, new_made_on)
    regraded, changed = [], []
    for pair in sorted(old.keys() & new.keys()):
        (g0, m0), (g1, m1) = old[pair], new[pair]
        if m0 != m1:
            regraded.append({"query_id": pair[0], "chunk_id": pair[1],
                             "content_sha256": None if m1 is None else m1[0],
                             "grade_before": g0, "grade": g1})
        elif g0 != g1:
            changed.append(pair)
    return {"regraded": regraded, "changed": changed,
            "added": sorted(new.keys() - old.keys()), "removed": sorted(old.keys() - new.keys())}


def qrels_frame(key: pd.DataFrame) -> pd.DataFrame:
    """The key in canonical order as a qrels table (``query_id``, ``chunk_id``, ``grade``)."""
    rows = _sorted_rows(key)
    return pd.DataFrame({
        "query_id": pd.Series([r[0] for r in rows], dtype="str"),
        "chunk_id": pd.Series([r[1] for r in rows], dtype="str"),
        "grade": pd.Series([r[2] for r in rows], dtype="int64"),
    })


def require_gate(gate: Mapping | None, *, source) -> None:
    """Refuse to freeze a key unless the agreement gate passed.

    Raises
    ------
    ProtocolError
        ``gate`` is ``None`` (no gate record) or its ``passed`` is not ``true``.
    """
    if gate is None:
        raise ProtocolError(f"no key before the gate passes: {source} does not exist; run the "
                            "agreement and gate stages first")
    passed = gate.get("passed") if isinstance(gate, Mapping) else None
    if passed is not True:
        raise ProtocolError(f"no key before the gate passes: {source} records passed="
                            f"{json.dumps(passed)}; revise the rubric or intents and regrade")


def grader_setup(grades_manifest: Mapping) -> dict:
    """Each grader's setup from the grades manifest, without the coverage details."""
    keep = ("kind", "family", "model", "person", "role", "rubric_version", "round", "file",
            "sha256", "rows")
    return {name: {k: e[k] for k in keep if k in e}
            for name, e in grades_manifest.get("graders", {}).items()}


def build_record(
    key: pd.DataFrame,
    *,
    frozen_at: str,
    rubric_version: str,
    round: int,
    manifests: Mapping[str, Mapping],
    pool_sha256: str,
    dropped_queries: Iterable[str],
    post_hoc: bool,
    deviations: Iterable[str] = (),
    provenance: Mapping | None = None,
) -> dict:
    """The key's record: what it is, when it was frozen, from what, and how it departs.

    Parameters
    ----------
    key : pandas.DataFrame
        The key (see :func:`build_key`).
    frozen_at : str
        UTC time, ISO 8601.
    rubric_version : str
        Params ``grading.rubric_version``.
    round : int
        Params ``grading.round``.
    manifests : mapping of str to mapping
        The stages' manifests the key was built from: ``corpus``, ``queries`` and
        ``intents`` (their ``sha256`` is recorded), ``pool`` (its ``pool_version``) and
        ``grades`` (the grader setup and each grade file's ``sha256``).
    pool_sha256 : str
        The pool table's file hash.
    dropped_queries : iterable of str
        Queries left out of the key (see :func:`build_key`).
    post_hoc : bool
        Whether the key is a post-hoc correction of one already used for metrics.
    deviations : iterable of str, optional
        Departures from the protocol (params ``grading.deviations``), carried with the key
        so every number built on it has them.
    provenance : mapping, optional
        What else the key was made with (see :func:`record_provenance`), appended after
        ``deviations``.

    Returns
    -------
    dict
        ``key_sha256``, ``frozen_at``, ``rubric_version``, ``round``, ``grader_setup``,
        ``pool_version``, ``input_sha256`` (``corpus``, ``queries``, ``intents``, ``pool``,
        ``grades``: grader → file hash), ``dropped_queries``, ``post_hoc``, ``pairs`` and
        ``queries`` in the key, ``deviations``; in that order; then the entries of
        ``provenance``.

    Raises
    ------
    KeyError
        A manifest named above is missing from ``manifests``.
    """
    grades = manifests["grades"]
    inputs = {name: manifests[name].get("sha256") for name in ("corpus", "queries", "intents")}
    inputs["pool"] = pool_sha256
    inputs["grades"] = {g: e["sha256"] for g, e in grades["graders"].items() if e["sha256"]}
    return {
        "key_sha256": key_sha256(key),
        "frozen_at": frozen_at,
        "rubric_version": str(rubric_version),
        "round": int(round),
        "grader_setup": grader_setup(grades),
        "pool_version": manifests["pool"]["pool_version"],
        "input_sha256": inputs,
        "dropped_queries": sorted(dropped_queries),
        "post_hoc": bool(post_hoc),
        "pairs": int(len(key)),
        "queries": int(key["query_id"].nunique()),
        "deviations": [str(d) for d in deviations],
    } | dict(provenance or {})


def record_provenance(
    *,
    qrels_sha256: str,
    rubric_sha256: str | None,
    prompt_template_sha256: str | None,
    graders: Mapping[str, Mapping],
    gate: Mapping,
    audit_lock_sha256: str | None = None,
    judges: Mapping[str, Mapping[str, int]] | None = None,
    prompt_templates: Mapping[str, Mapping[str, int]] | None = None,
    prompt_template_note: str | None = None,
) -> dict:
    """The record's integrity fields: what the key was made with, beyond its inputs.

    Parameters
    ----------
    qrels_sha256 : str
        The qrels file's hash as written (the record is written last and holds it, so a
        key, qrels and record that were not written together are refused when read; see
        :func:`check_whole`).
    rubric_sha256 : str or None
        The rubric file's hash (params ``grading.rubric``).
    prompt_template_sha256 : str or None
        The hash of the prompt template the key's model grades were made with, when they
        name one and the same (from their bank lines); None otherwise, with
        ``prompt_template_note`` saying why.
    graders : mapping of str to mapping
        Params ``graders``: each grader's ``command`` is recorded (None for graders
        without one: people and imports).
    gate : mapping
        The gate's pass record: its ``thresholds`` (the gates used) and ``measures`` (the
        agreement they were checked on); its ``warnings`` when it has any.
    audit_lock_sha256 : str, optional
        The audit lock's hash, when the experiment has one.
    judges : mapping of str to mapping of str to int, optional
        Per model grader, judge identity (64 hex) → grades of the round made under it
        (``"identity not recorded"`` for grades whose bank line names none); see
        :func:`relgrade.graders.cache.judge_counts`.
    prompt_templates : mapping of str to mapping of str to int, optional
        Per model grader, prompt template sha256 → grades of the round made with it
        (``"template not recorded"`` for grades whose bank line names none); see
        :func:`relgrade.graders.cache.template_counts`.
    prompt_template_note : str, optional
        Why ``prompt_template_sha256`` is None (no model grade, grades that name no
        template, several templates).

    Returns
    -------
    dict
        ``qrels_sha256``, ``rubric_sha256``, ``prompt_template_sha256``, ``grader_commands``
        (grader → command, sorted by grader), ``gates``, ``agreement``, then
        ``gate_warnings``, ``audit_lock_sha256``, ``judges``, ``prompt_templates`` (sorted
        by grader) and ``prompt_template_note`` when given.

    Examples
    --------
    >>> record_provenance(qrels_sha256="q", rubric_sha256="r", prompt_template_sha256="t",
    ...                   graders={"b": {"role": "auditor"}, "a": {"command": "grade.sh"}},
    ...                   gate={"thresholds": {"binary_kappa_min": 0.8},
    ...                         "measures": {"binary_kappa": 0.9}})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'qrels_sha256': 'q', 'rubric_sha256': 'r', 'prompt_template_sha256': 't',
     'grader_commands': {'a': 'grade.sh', 'b': None}, 'gates': {'binary_kappa_min': 0.8},
     'agreement': {'binary_kappa': 0.9}}
    """
    out = {
        "qrels_sha256": qrels_sha256,
        "rubric_sha256": rubric_sha256,
        "prompt_template_sha256": prompt_template_sha256,
        "grader_commands": {name: graders[name].get("command") for name in sorted(graders)},
        "gates": dict(gate.get("thresholds") or {}),
        "agreement": dict(gate.get("measures") or {}),
    }
    if gate.get("warnings"):
        out["gate_warnings"] = list(gate["warnings"])
    if audit_lock_sha256:
        out["audit_lock_sha256"] = audit_lock_sha256
    if judges:
        out["judges"] = {name: dict(judges[name]) for name in sorted(judges)}
    if prompt_templates:
        out["prompt_templates"] = {g: dict(prompt_templates[g]) for g in sorted(prompt_templates)}
    if prompt_template_note:
        out["prompt_template_note"] = str(prompt_template_note)
    return out


#: What the record says when no model grade of the round names a prompt template.
NO_TEMPLATE_RECORDED = ("the key's model grades name no prompt template (recorded before "
                        "grade lines named it, or graded outside relgrade): the template "
                        "they were made with is not known")


def grades_template(templates: Mapping[str, Mapping[str, int]], *,
                    not_recorded: str = "template not recorded") -> tuple[str | None, str | None]:
    """The prompt template a key's model grades were made with, from their bank lines.

    Parameters
    ----------
    templates : mapping of str to mapping of str to int
        Per model grader, template sha256 → grades made with it, ``not_recorded`` → grades
        whose bank line names none (:func:`relgrade.graders.cache.template_counts`).
    not_recorded : str, default "template not recorded"
        The key of grades naming no template.

    Returns
    -------
    (str or None, str or None)
        ``(sha256, None)`` when every grade names one and the same template; else
        ``(None, note)``: no model grader graded, no grade names a template
        (:data:`NO_TEMPLATE_RECORDED`), or the grades name several (or some name none).

    Examples
    --------
    >>> grades_template({"m": {"t" * 64: 12}})[0] == "t" * 64
    True
    >>> grades_template({"m": {"template not recorded": 12}})[1] == NO_TEMPLATE_RECORDED
    True
    >>> grades_template({"m": {"a" * 64: 3, "template not recorded": 2}})[1]
    'the model grades were made with 1 prompt template and 2 grades name none (see prompt_templates)'
    >>> grades_template({})
    (None, 'no model grader graded this round: no prompt template made a grade of the key')
    """
    counts: dict[str, int] = {}
    for per in templates.values():
        for sha, n in per.items():
            counts[sha] = counts.get(sha, 0) + int(n)
    named = sorted(k for k in counts if k != not_recorded)
    if not counts:
        return None, "no model grader graded this round: no prompt template made a grade of the key"
    if not named:
        return None, NO_TEMPLATE_RECORDED
    if len(named) == 1 and not_recorded not in counts:
        return named[0], None
    none = counts.get(not_recorded, 0)
    return None, (f"the model grades were made with {len(named)} prompt "
                  f"template{'s' if len(named) > 1 else ''}"
                  + (f" and {none} grade{'s' if none > 1 else ''} name none" if none else "")
                  + " (see prompt_templates)")


def qrels_text(key: pd.DataFrame) -> str:
    """The key as TREC qrels text, ``query_id 0 chunk_id grade`` per line, canonical order."""
    return "".join(f"{q} 0 {c} {g}\n" for q, c, g in _sorted_rows(key))


def check_whole(record: Mapping, *, key_sha256: str, qrels_sha256: str | None,
                record_source, key_source, qrels_source) -> None:
    """Refuse a key, qrels and record that were not written together.

    The key stage writes the key file, then the qrels file, then the record last; the
    record holds the sha256 of both. A process killed between those writes, or a file
    edited or swapped by hand, leaves hashes that disagree, and nothing may be scored on
    them.

    Parameters
    ----------
    record : mapping
        The key's record (``key_sha256``, and ``qrels_sha256`` for records written since
        the qrels hash was recorded; an older record without it checks the key only).
    key_sha256, qrels_sha256 : str or None
        The hex sha256 of the key file and of the qrels file as they are on disk
        (``qrels_sha256`` None: no qrels file).
    record_source, key_source, qrels_source : str or os.PathLike
        The three files, named in the message.

    Raises
    ------
    ProtocolError
        The key file's hash is not the record's ``key_sha256``, or the record has a
        ``qrels_sha256`` and the qrels file is missing or hashes otherwise. The message names
        the file, both hashes and the fix (rerun the key stage).
    """
    fix = ("the key stage was interrupted between its writes, or a file was edited or "
           "swapped by hand. Rerun the key stage (`dvc repro key`) to write the three "
           "files again")
    if key_sha256 != record.get("key_sha256"):
        raise ProtocolError(f"{key_source}: the key's sha256 {key_sha256} is not the "
                            f"{record.get('key_sha256')} of its record {record_source}: {fix}")
    want = record.get("qrels_sha256")
    if want is not None and qrels_sha256 != want:
        found = "missing" if qrels_sha256 is None else f"sha256 {qrels_sha256}"
        raise ProtocolError(f"{qrels_source}: the qrels file ({found}) is not the one its "
                            f"record {record_source} froze (sha256 {want}): {fix}")
