"""Where an experiment stands, from whatever files exist: the status as data.

:func:`experiment_status` takes the artifacts that have been read (any may be missing) and
returns one JSON-ready dict; :func:`read_status` reads them and calls it;
:func:`click_status` does the same for a click experiment. ``relgrade status``
(:mod:`relgrade.cli.status`) renders them in plain words.

When the pool grows (a new arm, a deeper pool), the grades already recorded stay; the status
names exactly the pairs that lack a grade, grouped by query, so only those get graded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from relgrade.errors import RelgradeError
from relgrade.pipeline import sharing
from relgrade.pipeline.cost import status_cost
from relgrade.pipeline.design import unfilled_parts
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import (disagreements_file, grade_commands, packets_build_command,
                                      repro_command, review_command)
from relgrade.pipeline.judgments import judgments, pending_status
from relgrade.pipeline.memory import arrow_from_jemalloc
from relgrade.pipeline.panel import is_panel
from relgrade.pipeline.since_repro import (inputs_since_repro, params_since_repro,
                                           removed_outputs, stages_behind, stopped_stages)
from relgrade.experiment.params import Params
from relgrade.io import files as io
from relgrade.protocol import bank, grades, triage
from relgrade.protocol.intents import is_unreviewed
from relgrade.protocol.audit import audit_coverage
from relgrade.protocol.gate import (
    AUDIT_GATES,
    ONE_CATEGORY_ADVICE,
    GateResult,
    check_audit_gates,
    check_gates,
    looser_than_protocol,
    relaxed_lines,
)
from relgrade.ranking import id_codes
from relgrade.schema import PANEL_ROLES, TRIAGE_ROLE

_STEPS = ("corpus", "queries", "pool", "intents", "audit", "gate", "key")


def _grader_progress(rows: pd.DataFrame | str | None, *, spec: Mapping,
                     pool: pd.DataFrame | None, audit: list[str] | None,
                     owed: Mapping | None = None) -> dict:
    """One grader's progress: pairs graded of those it owes (the pool, its audit queries' part
    for an auditor, or with ``owed`` the pairs a partial round owes it), and which lack grades.

    ``owed`` is ``{"pairs": set of (query_id, chunk_id), "carried": int, "from_rounds": [int]}``:
    in a partial regrade, the pairs this round owes the grader and how many of its current
    grades the earlier rounds carry over (not counted in ``graded`` nor ``of``).
    """
    out = {"role": spec.get("role"), "kind": spec.get("kind")}
    if isinstance(rows, str):
        return out | {"state": "invalid", "error": rows}
    if rows is None:
        rows = pd.DataFrame({"query_id": pd.Series([], dtype="str"),
                             "chunk_id": pd.Series([], dtype="str")})
    out["state"] = "graded" if len(rows) else "not started"
    auditor = spec.get("role") == "auditor"
    if pool is None or (auditor and audit is None):
        n = len(rows[["query_id", "chunk_id"]].astype(str).drop_duplicates())
        return out | {"graded": n, "of": None} | ({} if pool is None else
                                                  {"waiting": "audit sample"})
    scope = set(audit) if auditor else None
    if owed is None:  # the pool's pairs, over columns (no Python tuple per pair)
        return _pool_progress(out, rows, pool, scope)
    # a partial round: what it owes, the rest carried from before
    have = set(zip(rows["query_id"].astype(str), rows["chunk_id"].astype(str)))
    pairs = owed["pairs"]
    out |= {"carried": int(owed["carried"]), "from_rounds": list(owed["from_rounds"])}
    have -= {pair for pair in have if pair not in owed["pairs"]}
    out["state"] = "graded" if have else "not started"
    by_query: dict[str, list[str]] = {}
    for q, c in sorted(pairs):
        if scope is None or q in scope:
            by_query.setdefault(q, []).append(c)
    total = sum(len(v) for v in by_query.values())
    graded = sum(1 for q, cs in by_query.items() for c in cs if (q, c) in have)
    partial, not_started = {}, []
    for q, cs in by_query.items():
        missing = [c for c in cs if (q, c) not in have]
        if len(missing) == len(cs):
            not_started.append(q)
        elif missing:
            partial[q] = {"missing": missing, "pool": len(cs)}
    if total and graded == total:
        out["state"] = "complete"
    return out | {"graded": graded, "of": total, "partial": partial,
                  "not_started": not_started}


def _pool_progress(out: dict, rows: pd.DataFrame, pool: pd.DataFrame,
                   scope: set | None) -> dict:
    """:func:`_grader_progress` of a full round over columns: the pool's pairs (of the
    ``scope`` queries when given) in (query_id, chunk_id) order, Python's string order, a
    pair listed twice counted twice; which of them ``rows`` grades."""
    pairs = pd.DataFrame({"query_id": pool["query_id"].astype(str),
                          "chunk_id": pool["chunk_id"].astype(str)})
    if scope is not None:
        pairs = pairs[pairs["query_id"].isin(list(scope)).to_numpy(dtype=bool)]
    if not len(pairs):
        return out | {"graded": 0, "of": 0, "partial": {}, "not_started": []}
    hit = bank.pair_member(pairs, rows)
    q, queries = id_codes(pairs["query_id"])  # codes in the ids' code point order
    c, chunks = id_codes(pairs["chunk_id"])
    order = np.lexsort((c, q))
    q, c, lacking = q[order], c[order], ~hit[order]
    size = np.bincount(q, minlength=len(queries))
    short = np.bincount(q[lacking], minlength=len(queries))
    graded, total = int(hit.sum()), len(pairs)
    not_started = queries.take(pa.array(np.flatnonzero(short == size))).to_pylist()
    partial = {}
    some = (short > 0) & (short < size)
    if some.any():
        rows_of = lacking & some[q]
        mq, mc = q[rows_of], c[rows_of]
        cut = np.flatnonzero(np.diff(mq)) + 1
        names = chunks.take(pa.array(mc)).to_pylist()
        for part, start in zip(np.split(np.arange(len(mq)), cut), [0, *cut.tolist()]):
            at = int(mq[start])
            partial[queries[at].as_py()] = {"missing": [names[i] for i in part],
                                            "pool": int(size[at])}
    if graded == total:
        out["state"] = "complete"
    return out | {"graded": graded, "of": total, "partial": partial,
                  "not_started": not_started}


class CountedProgress:
    """One grader's :func:`_pool_progress` summed over blocks of whole queries given in
    query order (code point order, the order the pool is written in): the counts added,
    the partial and not-started queries of each block appended (they then come out in the
    order one pass over the whole pool gives).

    Attributes
    ----------
    rows : int
        The grader's current grades counted so far.
    graded, of : int
        Pool pairs (an auditor's: of the audited queries) graded, and in all.
    partial : dict of str to dict
        Query id → ``{"missing": [chunk ids], "pool": pairs}``, queries begun, not finished.
    not_started : list of str
        Query ids with pool pairs and no grade of the grader.
    """

    def __init__(self):
        self.rows = self.graded = self.of = 0
        self.partial: dict = {}
        self.not_started: list = []

    def add(self, rows: pd.DataFrame, pool: pd.DataFrame, scope: set | None) -> None:
        """Count one block: ``rows`` the grader's current grades (``query_id``,
        ``chunk_id``) of the queries of ``pool`` (``query_id``, ``chunk_id``, whole
        queries); ``scope`` the audited queries for an auditor, else None."""
        block = _pool_progress({}, rows, pool, scope)
        self.rows += len(rows)
        self.graded += block["graded"]
        self.of += block["of"]
        self.partial.update(block["partial"])
        self.not_started.extend(block["not_started"])

    def progress(self, spec: Mapping) -> dict:
        """What :func:`_grader_progress` returns for the grader (``spec``: its params)."""
        out = {"role": spec.get("role"), "kind": spec.get("kind"),
               "state": "graded" if self.rows else "not started"}
        if self.of and self.graded == self.of:
            out["state"] = "complete"
        return out | {"graded": self.graded, "of": self.of, "partial": self.partial,
                      "not_started": self.not_started}


def _status_by_blocks(ex: Experiment, audit) -> dict | None:
    """The bank's part of :func:`read_status` in the common round, read a block of whole
    queries at a time (:func:`relgrade.pipeline.judgments_blocks.judgments_by_blocks`):
    ``{"held", "table", "rows", "counted"}``, ``rows`` holding only the key grader's and the
    auditor's grades of the audited queries (the would-be gate's coverage); None when the
    whole path must answer (another mode, a file out of order, a broken rule, owed work)."""
    from relgrade.pipeline import judgments_blocks

    params = ex.params
    if not judgments_blocks.eligible(ex) or is_panel(ex):
        return None
    graders = {n: g for n, g in params.graders_dict().items() if g["role"] not in PANEL_ROLES}
    scope = {str(q) for q in audit}
    audited_ids = sorted(scope)
    counted = {name: CountedProgress() for name in graders}
    gate_names = {params.grading.key_grader, params.grading.auditor} - {None}
    audited: dict[str, list] = {name: [] for name in gate_names}

    def visit(pool, table):
        for name, c in counted.items():
            mine = table.loc[table["grader"] == name, ["query_id", "chunk_id"]]
            c.add(mine, pool, scope if graders[name]["role"] == "auditor" else None)
            if name in audited:
                on = mine["query_id"].astype(str).isin(audited_ids).to_numpy(dtype=bool)
                audited[name].append(mine[on])

    got = judgments_blocks.judgments_by_blocks(ex, audit_ids=audit, visit=visit)
    if got is None:
        return None
    held, table = got
    empty = pd.DataFrame({"query_id": pd.Series([], dtype="str"),
                          "chunk_id": pd.Series([], dtype="str")})
    rows = {name: pd.concat([empty, *audited[name]], ignore_index=True)
            for name in held.files if name in audited}
    return {"held": held, "table": table, "rows": rows, "counted": counted}


def _passed_gate(gate: Mapping, params: Params) -> dict:
    """A pass record as status reports it: what passed, under which gates, with what warnings.

    ``relaxed`` holds the gates set looser than the protocol's, ``not_applied`` the agreement
    gates a ppi-mode gate reported but did not apply (they relax nothing).

    The thresholds are the record's (those the gate stage used); a record without them
    (written before they were recorded) is read against the params' gates.
    """
    thresholds = dict(gate.get("thresholds") or
                      (params.gates.thresholds() if params.gates else {}))
    relaxed = gate.get("relaxed_gates")
    relaxed, not_applied = relaxed_lines(
        relaxed if relaxed is not None else looser_than_protocol(thresholds))
    return {"state": "passed", "measures": dict(gate.get("measures") or {}),
            "thresholds": thresholds, "relaxed": relaxed,
            "not_applied": not_applied, "ppi": gate.get("mode") == "ppi",
            "family_warnings": list(gate.get("family_warnings") or []),
            "coverage": gate.get("coverage"), "round": gate.get("round")}


def _would_gate(params: Params, agreement: Mapping, *, pool, audit, rows,
                sample_advice: str = ONE_CATEGORY_ADVICE,
                disagreements: str | None = None) -> GateResult:
    """The gate on the files as they are, before the gate stage has run.

    With the pool, the audit sample and both graders' rows at hand the audit's coverage is
    checked too (a grader without a file has graded nothing); otherwise agreement alone.
    ``sample_advice``: the advice for a kappa a one-category sample leaves undefined;
    ``disagreements``: the disagreements file the regrade advice names.
    """
    gates = params.gates.thresholds() if params.gates else {}
    key_grader, auditor = params.grading.key_grader, params.grading.auditor
    both = [rows.get(name) for name in (key_grader, auditor)]
    if pool is None or audit is None or not key_grader or not auditor or \
            any(isinstance(r, str) for r in both):
        return check_gates(agreement, {k: v for k, v in gates.items() if k not in AUDIT_GATES},
                           sample_advice=sample_advice, disagreements=disagreements)
    graded = pd.concat([pd.DataFrame({"query_id": r["query_id"].astype(str),
                                      "chunk_id": r["chunk_id"].astype(str), "grader": name})
                        for name, r in zip((key_grader, auditor), both) if r is not None]
                       + [pd.DataFrame(columns=["query_id", "chunk_id", "grader"])],
                       ignore_index=True)
    coverage = audit_coverage(pool, graded, audit_ids=audit, key_grader=key_grader,
                              auditor=auditor)
    return check_audit_gates(agreement, gates, coverage=coverage, key_grader=key_grader,
                             auditor=auditor, sample_advice=sample_advice,
                             disagreements=disagreements)


def experiment_status(
    *,
    params: Params,
    corpus_manifest: Mapping | None = None,
    queries_manifest: Mapping | None = None,
    pool: pd.DataFrame | None = None,
    pool_manifest: Mapping | None = None,
    intents_manifest: Mapping | None = None,
    audit_query_ids: Iterable[str] | None = None,
    grader_rows: Mapping[str, pd.DataFrame | str] | None = None,
    agreement: Mapping | None = None,
    gate: Mapping | None = None,
    record: Mapping | None = None,
    metrics: Mapping[str, Mapping] | None = None,
    problems: Mapping[str, str] | None = None,
    post_hoc_record: Mapping | None = None,
    ledger: Mapping | None = None,
    dvc: Iterable[Mapping] | None = None,
    triage_pairs: pd.DataFrame | None = None,
    round_owed: Mapping[str, Mapping] | None = None,
    sample_advice: str | Callable[[], str] = ONE_CATEGORY_ADVICE,
    disagreements: str | None = None,
    counted: Mapping[str, "CountedProgress"] | None = None,
) -> dict:
    """The experiment's state, one entry per protocol step.

    Parameters
    ----------
    params : Params
        The experiment's params (``graders``, ``grading``, ``gates``, ``arms`` are read).
    corpus_manifest, queries_manifest, pool_manifest, intents_manifest : mapping, optional
        The stages' manifests, when they exist.
    pool : pandas.DataFrame, optional
        Columns ``query_id``, ``chunk_id``: the pool.
    audit_query_ids : iterable of str, optional
        The audit sample, when chosen.
    grader_rows : mapping of str to pandas.DataFrame or str, optional
        grader → its validated rows for the current round (columns ``query_id``,
        ``chunk_id``), or the error message when its file is invalid. Graders of params
        without an entry have graded nothing.
    agreement : mapping, optional
        The agreement metrics.
    gate : mapping, optional
        The gate's pass record.
    record : mapping, optional
        The key's record.
    metrics : mapping of str to mapping, optional
        arm → its metrics JSON.
    problems : mapping of str to str, optional
        step → why its file could not be read.
    post_hoc_record : mapping, optional
        The record of a post-hoc key standing beside the frozen one.
    ledger : mapping, optional
        ``{"state": "complete", "entries": n}`` or ``{"state": "refused", "error": ...}``
        (see :meth:`~relgrade.experiment.files.Experiment.ledger`).
    dvc : iterable of mapping, optional
        DVC's own files that are broken (see :func:`dvc_health`).
    triage_pairs : pandas.DataFrame, optional
        Triage mode: the people's triage queue (``query_id``, ``chunk_id``), which the key
        grader's and the auditor's progress is counted against; None while the triage
        grader has not graded the pool (they are then waiting for it).
    round_owed : mapping of str to mapping, optional
        A partial regrade: grader → ``{"pairs": set of (query_id, chunk_id) this round owes
        it, "carried": int (its current grades the earlier rounds carry over),
        "from_rounds": [int, ...]}``; its progress counts these pairs, not the pool.
    sample_advice : str or callable, default :data:`relgrade.protocol.gate.ONE_CATEGORY_ADVICE`
        The advice for a kappa left undefined because both graders gave every audited pair
        one category, or a function of no argument that returns it (called only when the
        gate is checked here): :func:`read_status` passes the gate stage's own version,
        which names the params file, the values to raise and the command
        (:func:`relgrade.pipeline.stages.gate.one_category_advice`).
    disagreements : str, optional
        The disagreements file, named in a failed gate's regrade advice
        (:func:`relgrade.experiment.layout.disagreements_file`).
    counted : mapping of str to CountedProgress, optional
        grader → its progress over the pool counted a block of queries at a time
        (:class:`CountedProgress`), used instead of its ``grader_rows`` entry (which then
        needs only the audited queries' rows, for the gate's coverage).

    Returns
    -------
    dict
        Keys ``corpus``, ``queries``, ``pool``, ``intents``, ``audit``, ``grading``
        (grader → progress), ``gate`` (a failed gate with its ``lines`` and the
        ``advice`` the gate stage would print), ``key``, ``metrics`` (arm → state), ``round``,
        ``ledger``, ``dvc`` (list of problems, empty when healthy); each step has a
        ``state`` (e.g. ``frozen``, ``missing``, ``passed``, ``failed``, ``stale``,
        ``unreadable``); ``key`` has ``post_hoc_key`` when a post-hoc key stands beside it,
        and, once a record exists, ``current``: whether the frozen key is the pool's current
        key (False for ``stale``, a key frozen for another pool version; :func:`read_status`
        turns a ``frozen`` key into ``previous`` while pairs are owed, see
        :func:`key_while_owed`).
    """
    problems = dict(problems or {})
    rnd = params.grading.round
    st: dict = {"round": rnd}

    def missing_or_problem(step):
        return ({"state": "unreadable", "error": problems[step]} if step in problems
                else {"state": "missing"})

    st["corpus"] = ({"state": "frozen", "chunks": corpus_manifest.get("chunks"),
                     "sha256": corpus_manifest.get("sha256"),
                     "source": corpus_manifest.get("source")}
                    if corpus_manifest else missing_or_problem("corpus"))
    st["queries"] = ({"state": "frozen", "queries": queries_manifest.get("queries"),
                      "groups": queries_manifest.get("groups"),
                      "sha256": queries_manifest.get("sha256")}
                     if queries_manifest else missing_or_problem("queries"))
    if pool is not None:
        st["pool"] = {"state": "built", "pairs": int(len(pool)),
                      "queries": int(pool["query_id"].nunique()),
                      "version": (pool_manifest or {}).get("pool_version"),
                      "arms": list((pool_manifest or {}).get("arms", []))}
    else:
        st["pool"] = missing_or_problem("pool")
    st["intents"] = ({"state": "reviewed", "reviewer": intents_manifest.get("reviewer"),
                      "reviewed_at": intents_manifest.get("reviewed_at"),
                      "sha256": intents_manifest.get("sha256"),
                      "flagged": list(intents_manifest.get("flagged") or [])}
                     if intents_manifest else missing_or_problem("intents"))
    audit = None if audit_query_ids is None else sorted(str(q) for q in audit_query_ids)
    st["audit"] = ({"state": "chosen", "queries": audit} if audit is not None
                   else missing_or_problem("audit"))

    graders = {n: g for n, g in params.graders_dict().items()
               if g["role"] not in PANEL_ROLES}  # a panel's queues are in st["pending"]
    rows = dict(grader_rows or {})

    def owed_by(name):
        # triage mode: people owe their triage queue, the model owes the pool
        if params.grading.mode != "triage" or graders[name]["role"] == TRIAGE_ROLE:
            return pool
        return triage_pairs

    round_owed, counted = dict(round_owed or {}), dict(counted or {})
    st["grading"] = {name: (counted[name].progress(graders[name]) if name in counted else
                            _grader_progress(rows.get(name), spec=graders[name],
                                             pool=owed_by(name), audit=audit,
                                             owed=round_owed.get(name))) | {"round": rnd}
                     for name in sorted(graders, key=lambda n: (
                         graders[n]["role"] != "grader", n))}
    if params.grading.mode == "triage":
        model = params.triage_grader_name()
        for name, g in st["grading"].items():
            if pool is not None and triage_pairs is None \
                    and graders[name]["role"] != TRIAGE_ROLE and g["state"] != "invalid":
                g["waiting"] = f"triage queue ({model} grades the pool first)"

    stale_round = None
    if agreement is not None and agreement.get("round") not in (None, rnd):
        # agreement of an earlier round: its numbers say nothing about this round's gate
        stale_round, agreement = agreement.get("round"), None
    if gate is not None and gate.get("passed") is True:
        st["gate"] = _passed_gate(gate, params)
    elif agreement is not None:
        try:
            result = _would_gate(params, agreement, pool=pool, audit=audit, rows=rows,
                                 sample_advice=(sample_advice() if callable(sample_advice)
                                                else sample_advice),
                                 disagreements=disagreements)
        except Exception as e:  # an unreadable gate setup is itself worth reporting
            st["gate"] = {"state": "unreadable", "error": str(e)}
        else:
            st["gate"] = ({"state": "failed", "lines": list(result.lines),
                           "advice": list(result.advice)} if not result.passed
                          else {"state": "not run", "would_pass": True})
    elif stale_round is not None:
        st["gate"] = {"state": "not run", "agreement_round": stale_round}
    else:
        st["gate"] = missing_or_problem("gate") if "gate" in problems else {"state": "not run"}

    if record:
        key = {"state": "frozen", "sha256": record.get("key_sha256"),
               "pairs": record.get("pairs"), "queries": record.get("queries"),
               "dropped": list(record.get("dropped_queries") or []),
               "post_hoc": bool(record.get("post_hoc")),
               "pool_version": record.get("pool_version"),
               "frozen_at": record.get("frozen_at")}
        now = (st["pool"].get("version") if st["pool"]["state"] == "built" else None)
        if now and record.get("pool_version") and now != record.get("pool_version"):
            key["state"] = "stale"
            key["pool_now"] = now
        key["current"] = key["state"] == "frozen"
        st["key"] = key
    else:
        st["key"] = missing_or_problem("key")
    if post_hoc_record and post_hoc_record.get("key_sha256"):
        st["key"]["post_hoc_key"] = {"sha256": post_hoc_record["key_sha256"],
                                     "frozen_at": post_hoc_record.get("frozen_at")}
    st["ledger"] = dict(ledger) if ledger is not None else {"state": "not read"}
    st["dvc"] = [dict(d) for d in dvc or ()]

    metrics = dict(metrics or {})
    frozen = (record or {}).get("key_sha256")
    st["metrics"] = {}
    for arm in sorted(set(params.arms or {}) | set(metrics)):
        m = metrics.get(arm)
        if m is None:
            st["metrics"][arm] = {"state": "missing"}
        elif frozen and m.get("key_sha256") != frozen:
            st["metrics"][arm] = {"state": "stale", "key_sha256": m.get("key_sha256")}
        else:
            st["metrics"][arm] = {"state": "present", "key_sha256": m.get("key_sha256"),
                                  "post_hoc": bool(m.get("post_hoc"))}
    st["other_problems"] = {k: v for k, v in problems.items() if k not in _STEPS}
    return st


def dvc_health(lock, rwlock) -> list[dict]:
    """DVC's own files left broken by a killed ``dvc`` command, each with the exact fix.

    A ``dvc repro`` killed while writing can leave ``dvc.lock`` truncated (not YAML, or
    without its ``stages``) or ``.dvc/tmp/rwlock`` empty, after which every DVC command
    fails with a message that does not say what to do.

    Parameters
    ----------
    lock : pathlib.Path
        The experiment's ``dvc.lock`` (absent: never run, which is fine).
    rwlock : pathlib.Path or None
        DVC's ``.dvc/tmp/rwlock`` (absent: no DVC command holds or held a lock).

    Returns
    -------
    list of dict
        One ``{"file", "problem", "fix"}`` per broken file, in that order; empty when both
        are sound.
    """
    out = []
    if lock.exists():
        try:
            doc = io.read_yaml(lock)
        except RelgradeError:
            doc = None
            problem = "is not valid YAML (truncated by an interrupted dvc command?)"
        else:
            problem = "has no `stages` (truncated by an interrupted dvc command?)"
        stages = doc.get("stages") if isinstance(doc, Mapping) else None
        if doc is not None and isinstance(stages, Mapping) and not all(
                isinstance(v, Mapping) and "cmd" in v for v in stages.values()):
            problem, stages = "has a stage without its `cmd` (truncated by an interrupted dvc " \
                              "command?)", None
        if not isinstance(stages, Mapping):
            out.append({"file": lock.as_posix(), "problem": problem,
                        "fix": f"git checkout {lock.as_posix()}"})
    if rwlock is not None and rwlock.exists():
        text = "\n".join(io.read_lines(rwlock)).strip()
        try:
            sound = bool(text) and isinstance(json.loads(text), dict)
        except json.JSONDecodeError:
            sound = False
        if not sound:
            out.append({"file": rwlock.as_posix(),
                        "problem": "is empty or not JSON (left by a killed dvc command)",
                        "fix": f"rm {rwlock.as_posix()}"})
    return out


def _pending_pool(ex: Experiment, added: list[str]) -> dict:
    """What the next ``dvc repro`` does for arms added since the last one: their runs made
    in memory as their retrieve stages make them, the pool they give and the judgments each
    grader will then owe, as ``relgrade arm add`` and ``relgrade pool plan`` price them
    (:func:`relgrade.pipeline.arms.plan_with_runs`): ``{"pairs", "new_pairs",
    "pairs_now", "pool_version", "made_in_memory", "owed": {grader: judgments}}``, or
    ``{"error": message}`` when the pool cannot be planned now."""
    from relgrade.pipeline.arms import plan_with_runs

    try:
        plan = plan_with_runs(ex, made=added)
    except RelgradeError as e:
        return {"error": str(e)}
    return {"pairs": plan["pairs"], "new_pairs": plan["new_pairs"],
            "pairs_now": plan["pairs_now"], "pool_version": plan["pool_version"],
            "made_in_memory": plan["made_in_memory"],
            "owed": {g: int(c["pending"]) for g, c in plan["cost"]["graders"].items()}}


def _review_pending(ex: Experiment, intents: Mapping) -> dict | None:
    """The intents' state when a review is signed that the intents stage has not frozen yet
    (``relgrade intents review`` run, ``dvc repro`` not yet): ``{"state": "signed",
    "reviewer", "reviewed_at", "table_sha256", "flagged", "frozen_sha256" (the table frozen
    now, or None), "repro"}``; None when nothing is pending (no review, the review frozen
    already, or the intents' files unreadable, which their own line reports)."""
    cfg = ex.params.intents
    if cfg is None or intents.get("state") not in ("missing", "reviewed"):
        return None
    path = ex.file(cfg.review)
    if not path.exists():
        return None
    try:
        record = io.read_json(path)
    except RelgradeError:
        return None  # the intents stage names the broken file when it runs
    if is_unreviewed(record) or not isinstance(record, Mapping) or \
            not isinstance(record.get("table_sha256"), str):
        return None
    frozen = intents.get("sha256") if intents.get("state") == "reviewed" else None
    if frozen == record["table_sha256"]:
        return None
    return {"state": "signed", "reviewer": record.get("reviewer"),
            "reviewed_at": record.get("reviewed_at"), "table_sha256": record["table_sha256"],
            "flagged": list(record.get("flagged") or []), "frozen_sha256": frozen,
            "repro": repro_command(ex)}


def _sample_advice(ex: Experiment, pool, audit, triage_pairs) -> str:
    """The gate stage's advice for a one-category audit sample, with the audited queries
    counted against the pool's (in triage mode, people's queue's) as the stage counts
    them; the generic advice while the pool or the audit sample is missing."""
    from relgrade.pipeline.stages.gate import one_category_advice

    queue = triage_pairs if ex.params.grading.mode == "triage" else pool
    if queue is None or audit is None:
        return ONE_CATEGORY_ADVICE
    return one_category_advice(ex, audited=len(set(map(str, audit))),
                               queries=len(set(queue["query_id"].astype(str))))


def read_status(ex: Experiment) -> dict:
    """The experiment's state (see :func:`experiment_status`), read from whatever files exist.

    A file that exists but cannot be read is reported as that step's problem; a grader's
    file for the current round that breaks a rule is reported as that grader's error.

    Parameters
    ----------
    ex : Experiment
        The experiment.

    Returns
    -------
    dict
        As :func:`experiment_status`, plus ``params_changed``: the params keys edited since
        the last ``dvc repro`` and the arms added, removed or edited
        (:func:`relgrade.pipeline.since_repro.params_since_repro`); with a ``holes``
        section also ``holes``: what the
        arms that joined after the key froze owe and their level claim
        (:func:`relgrade.pipeline.new_arms.holes_status`, or ``{"state": "unreadable",
        "error"}``).

    Raises
    ------
    InputError
        A ``paths`` entry the status reads is not declared.
    """
    problems: dict[str, str] = {}

    def load(step, name, reader):
        path = ex.path(name)
        if not path.exists():
            return None
        try:
            return reader(path)
        except RelgradeError as e:
            problems[step] = str(e)
            return None

    params = ex.params
    rubric = _rubric_refused(ex)
    pool = load("pool", "pool", lambda p: io.read_table(p, columns=["query_id", "chunk_id"]))
    # with a stopping rule, the queries of the human sample people owe now (not the rest)
    audit = load("audit", "audit", lambda p: ex.audit_ids())
    # Each grader's current grades of the pool, read through the judgment bank: a grade of a
    # pair that left the pool, or a stale one, is kept in the bank and simply not counted.
    rows: dict = {}
    blocked_by: dict[str, str] = {}
    pending, triage_pairs, round_owed, key_owed = None, None, None, None
    counted = None  # grader → CountedProgress, when the bank was read a block at a time
    # a refused rubric is the rubric's fault: no grade can be judged current, and no
    # grader's file is blamed for it
    assignment = None
    if pool is not None and audit is not None and rubric is None:
        try:
            queue = None
            if is_panel(ex) and not ex.path("assignment").exists():
                # the packets stage has not run on this pool, or failed: say so, and count
                # the raters' work from the queues it would deal (none, if it would refuse)
                assignment, queue = missing_assignment(ex, pool)
            with arrow_from_jemalloc():  # the bank's blocks and copies handed back as freed
                # the common round, nothing owed: counted a block of queries at a time
                by_blocks = None if queue is not None else _status_by_blocks(ex, audit)
                if by_blocks is not None:
                    held, table = by_blocks["held"], by_blocks["table"]
                    counted = by_blocks["counted"]
                else:
                    held = judgments(ex, pool, audit, assignment=queue)
                    # counted, never written: the rows unsorted (no sorted copy of the table)
                    table = grades.current_table(held.bank, graders=params.graders_dict(),
                                                 pool=pool, audit_query_ids=audit,
                                                 round=params.grading.round,
                                                 intents_sha256=None, whole=False,
                                                 **held.now)[0].rows
                key_owed = _key_owed(params, held.pending)
            reused = set() if held.shared is None else set(held.shared["grader"].astype(str))
            # only the pair columns the progress counts read: a copy of every column of
            # each grader's rows, made while the bank is held, was the command's peak
            for name in sorted(set(held.files) | reused):
                rows[name] = (by_blocks["rows"].get(name) if by_blocks is not None else
                              table.loc[table["grader"] == name, ["query_id", "chunk_id"]])
            pending = pending_status(ex, held=held, table=table)
            if held.owed_by is not None and params.grading.mode != "triage":
                round_owed = _round_owed(held, table, [params.grading.key_grader,
                                                       params.grading.auditor])
            on_audit = held.pending[held.pending["query_id"].astype(str).isin(
                [str(q) for q in audit])]
            pending["audit_owed"] = {str(g): int(n) for g, n in
                                     on_audit.groupby("grader").size().items()}
            pending["audit_owed_why"] = {str(w): int(n) for w, n in
                                         on_audit.groupby("why").size().items()}
            if held.shared is not None:  # what the share sources gave, per source and grader
                pending["shared"] = sharing.shared_counts(held.shared)
            if held.triage_queue is not None:
                queue = held.triage_queue
                triage_pairs = triage.people_queue(queue)
                zero = queue["stratum"] == triage.ZERO
                pending["triage"] = {
                    "grader": held.triage_grader, "queue": len(triage_pairs),
                    "model_relevant": int((~zero).sum()), "model_zeros": int(zero.sum()),
                    "sampled_zeros": int((zero & queue["selected"]).sum())}
            elif held.triage_grader is not None:
                pending["triage"] = {"grader": held.triage_grader, "queue": None}
        except RelgradeError as e:
            files = ex.grader_round_files()
            for name in files:
                rows[name] = str(e)
            pending = {"error": str(e)}
            # the refusal names one grader's file: the others are fine, only not countable
            culprit = _grader_named(e, files, ex.root)
            blocked_by = {name: culprit for name in files if culprit not in (None, name)}
    # the bank and the grades table are counted: let them go before the key is read
    held = table = on_audit = None
    try:
        ledger = {"state": "complete", "entries": len(ex.ledger())}
    except RelgradeError as e:
        ledger = {"state": "refused", "error": str(e)}
    record = load("key", "record", io.read_json_object)
    if record is not None and ex.path("key").exists():
        try:
            ex.read_key()
        except RelgradeError as e:
            problems["key"], record = str(e), None
    post_hoc = None
    if getattr(ex.params.paths, "key_post_hoc", None):
        if ex.key_files(post_hoc=True).record.exists():
            try:
                post_hoc = ex.read_key(post_hoc=True)[1]
            except RelgradeError as e:
                problems["post-hoc key"] = str(e)
    metrics_dir = ex.path("metrics")
    metrics = {}
    for p in sorted(metrics_dir.glob("*.json")) if metrics_dir.is_dir() else []:
        try:
            metrics[p.stem] = io.read_json_object(p)
        except RelgradeError as e:
            problems[f"metrics {p.stem}"] = str(e)
    st = experiment_status(
        params=params, pool=pool, audit_query_ids=audit, grader_rows=rows, metrics=metrics,
        corpus_manifest=load("corpus", "corpus_manifest", io.read_json_object),
        queries_manifest=load("queries", "queries_manifest", io.read_json_object),
        pool_manifest=load("pool", "pool_manifest", io.read_json_object),
        intents_manifest=load("intents", "intents_manifest", io.read_json_object),
        agreement=load("gate", "agreement", io.read_json_object),
        gate=load("gate", "gate", io.read_json_object),
        record=record, problems=problems, post_hoc_record=post_hoc, ledger=ledger,
        dvc=dvc_health(*ex.dvc_files()), triage_pairs=triage_pairs, round_owed=round_owed,
        sample_advice=lambda: _sample_advice(ex, pool, audit, triage_pairs),
        disagreements=disagreements_file(ex), counted=counted)
    if rubric is not None:
        st["rubric"] = rubric
        for g in st["grading"].values():
            g.update(state="blocked", error="the rubric is refused")
    for name, culprit in blocked_by.items():
        if name in st["grading"]:
            st["grading"][name].update(state="blocked", blocked_by=culprit,
                                       error=f"{culprit}'s file is invalid")
    try:
        stale_packets = ex.packets_stale()  # another pool, round, intents or rubric
    except RelgradeError as e:
        stale_packets = e
    if stale_packets is not None:
        st.setdefault("other_problems", {})["packets"] = str(stale_packets)
    if assignment is not None:
        st["assignment"] = assignment
    if pending is not None:
        st["pending"] = pending
        owed = {g: n for g, n in pending.get("audit_owed", {}).items() if n}
        if owed and st["gate"]["state"] == "passed":
            # a pass record made before these pairs were owed (an earlier round, grades gone
            # stale, pairs new to the pool) says nothing while they are owed
            st["gate"] = {"state": "waiting", "owed": owed, "last": "passed",
                          "last_round": st["gate"].get("round"),
                          "why": dict(pending.get("audit_owed_why") or {})}
        try:
            st["cost"] = status_cost(params, pending)
        except RelgradeError as e:
            st.setdefault("other_problems", {})["cost"] = str(e)
        adjudication = pending.get("adjudication") or {}
        if key_owed is not None and st["key"].get("state") in ("frozen", "stale") and (
                len(key_owed) or adjudication.get("pending")):
            st["key"] = key_while_owed(st["key"], key_owed, how=grade_commands(ex),
                                       adjudication=adjudication, repro=repro_command(ex))
        elif key_owed is not None and st["key"].get("state") == "stale":
            # every pair of the new pool is graded: the next dvc repro freezes its key
            st["key"].update(owed_pairs=0, repro=repro_command(ex))
    if params.holes is not None:  # arms that joined after the key froze: what they owe
        from relgrade.pipeline.new_arms import holes_status

        try:
            st["holes"] = holes_status(ex)
        except RelgradeError as e:
            st["holes"] = {"state": "unreadable", "error": str(e)}
    if params.grading.stop != "none" and audit is not None:
        try:
            st["stop"] = stop_status(ex)
        except RelgradeError as e:
            st["stop"] = {"state": "unreadable", "error": str(e)}
    signed = _review_pending(ex, st["intents"])
    if signed is not None:
        st["intents"] = signed
    refresh = _refresh_status(ex)
    if refresh is not None:
        st["refresh"] = refresh
    st["design"] = {"unfilled": unfilled_parts(ex)}
    # params edited since the last run: what is above is the last run's
    read: dict = {}  # one parse of dvc.lock, dvc.yaml and params for both comparisons
    st["params_changed"] = params_since_repro(ex, read=read)
    _removed_steps(ex, st, read)
    added = (st["params_changed"].get("arms") or {}).get("added") or []
    if st["params_changed"].get("state") == "changed" and added and pool is not None:
        st["params_changed"]["pending_pool"] = _pending_pool(ex, added)
    # inputs edited since the last run (a grade file, the audit lock): the same
    st["inputs_changed"] = inputs_since_repro(ex, read=read)
    # a dvc repro that stopped (owed grading, an error) left later stages' records as they
    # were: what differs from them is not an edit since that run
    stopped = stopped_stages(ex, read=read)
    for changed in (st["params_changed"], st["inputs_changed"]):
        if stopped and changed.get("state") == "changed":
            changed["stopped"] = stopped
    # a decision stage that stopped after its input was remade: its files are of the old input
    behind = stages_behind(ex, read=read)
    if behind:
        st["behind"] = behind
    warnings = share_warnings(ex)
    if warnings:
        st["warnings"] = warnings
    return st


#: Status step → its params ``paths`` entry, for the steps a missing output leaves unbuilt.
_BUILT_STEPS = {"corpus": "corpus_manifest", "queries": "queries_manifest", "pool": "pool"}


def _removed_steps(ex: Experiment, st: dict, read: dict) -> None:
    """Turn a ``missing`` corpus, queries or pool that the last ``dvc repro`` built (its
    ``dvc.lock`` records the file) into ``removed``: the stage that recorded it, the params
    keys that stage read which changed since (the usual cause: a bad value made the stage
    fail, and DVC had deleted its outputs before running it) and the command to run."""
    if not any(st[step]["state"] == "missing" for step in _BUILT_STEPS):
        return
    gone = removed_outputs(ex, read=read)
    changed = st["params_changed"]
    for step, name in _BUILT_STEPS.items():
        if st[step]["state"] != "missing":
            continue
        path = ex.path(name)
        rel = Path(os.path.relpath(path, ex.dvc_files()[0].parent)).as_posix()
        if rel not in gone:
            continue
        stage = gone[rel]
        keys = (sorted(k for k, v in (changed.get("keys") or {}).items())
                if stage in (changed.get("stages") or ()) else [])
        st[step] = {"state": "removed", "path": rel, "stage": stage, "params": keys,
                    "repro": repro_command(ex)}


def missing_assignment(ex: Experiment, pool: pd.DataFrame) -> tuple[dict, pd.DataFrame]:
    """What the status says when a rater panel's assignment (params ``paths.assignment``) is
    missing, and the queues to count the raters' pending work against meanwhile.

    The packets stage writes the assignment; it is missing when that stage has not run on
    this pool yet, or failed (DVC removes a failed stage's outputs).

    Parameters
    ----------
    ex : Experiment
        The experiment (a rater panel).
    pool : pandas.DataFrame
        The pool on disk (``query_id``, ``chunk_id``).

    Returns
    -------
    (dict, pandas.DataFrame)
        ``{"state": "missing", "path": str, "repro": the ``dvc repro`` of the packets stage
        as typed at the repository's top, "error": the packets stage's refusal or None}``,
        and the queues it would deal
        (:func:`relgrade.pipeline.panel.build_rater_orders`; with no rows when it would
        refuse, ``error`` then says why).
    """
    from relgrade.pipeline.panel import build_rater_orders
    from relgrade.raters.assign import RATER_ORDERS

    out = {"state": "missing", "path": str(ex.path("assignment")),
           "repro": repro_command(ex, "packets"), "error": None}
    try:
        queue = build_rater_orders(ex, pool)
    except RelgradeError as e:
        out["error"] = str(e)
        queue = pd.DataFrame({c: [] for c in RATER_ORDERS})
    return out, queue


def _refresh_status(ex) -> dict | None:
    """The last query-set refresh (the sample manifest's ``refresh`` block) and what the intent
    table (params ``intents.input``) still lacks or holds too many of, or None when the set was
    not refreshed (or the manifest cannot be read)."""
    if not getattr(ex.params.paths, "sample_manifest", None):
        return None
    path = ex.path("sample_manifest")
    try:
        block = io.read_json(path).get("refresh") if path.exists() else None
    except RelgradeError:
        return None
    if not block:
        return None
    written = set()  # the intent table the user edits (params intents.input)
    if ex.params.intents is not None and ex.file(ex.params.intents.input).exists():
        try:
            written = set(io.read_table(ex.file(ex.params.intents.input))["query_id"].astype(str))
        except (RelgradeError, KeyError):
            written = set()
    added, retired = list(block.get("added") or []), list(block.get("retired") or [])
    return {"share": block.get("share"), "replaced": block.get("replaced"),
            "kept": block.get("kept"), "added": added, "retired": retired,
            "log": ex.params.queries.log if ex.params.queries else None,
            "intents_owed": [q for q in added if q not in written],
            "intents_stale": [q for q in retired if q in written],
            "review": review_command(ex)}


def _grader_named(error: RelgradeError, files: Mapping, root) -> str | None:
    """The grader whose grade file or bank sidecar ``error`` names (its ``path``), or None.

    ``files`` maps grader → :class:`relgrade.experiment.files.GraderFiles`; a relative path
    is read from the working folder, then from the experiment's ``root``.
    """
    from pathlib import Path

    named = getattr(error, "path", None)
    if not named:
        return None
    here = Path(named)
    candidates = {here.resolve(), (Path(root) / here).resolve()}
    for name, f in files.items():
        if {f.grades.resolve(), f.bank.resolve()} & candidates:
            return name
    return None


def _key_owed(params: Params, pending: pd.DataFrame) -> pd.DataFrame:
    """The pending work the next key waits for: what the grades stage stops on
    (:attr:`~relgrade.pipeline.judgments.Judgments.pending`), less the auditor's open pairs
    when params accept an incomplete audit (``gates.audit_coverage_min`` below 1: the gate
    weighs them, as the grades stage does)."""
    gates = params.gates
    if gates is not None and gates.audit_coverage_min < 1 and params.grading.auditor:
        return pending[pending["grader"] != params.grading.auditor]
    return pending


def key_while_owed(key: Mapping, owed: pd.DataFrame, *, how: Mapping[str, str] | None = None,
                   adjudication: Mapping | None = None, repro: str | None = None) -> dict:
    """The key's status while pairs of the current pool are owed: the frozen key is the
    previous one, and no current key exists until the owed grades are in.

    The rule is the same in every grading mode: what is owed is what ``dvc repro`` stops on
    before it can freeze a key (the grades stage's pending work: new, stale, audit and
    regrade pairs of the key grader, the auditor, the triage grader or the raters; the
    adjudication queue of a rater panel).

    Parameters
    ----------
    key : mapping
        ``experiment_status(...)["key"]`` of a key with a record (state ``frozen`` or
        ``stale``).
    owed : pandas.DataFrame
        :data:`relgrade.schema.PENDING` (``grader``, ``query_id``, ``chunk_id``, ``why``):
        the pairs the next key waits for.
    how : mapping of str to str, optional
        Per grader, the command that grades its pairs
        (:func:`relgrade.experiment.layout.grade_commands`).
    adjudication : mapping, optional
        A rater panel's ``{"expert", "pending", "queries"}`` (its adjudication queue).
    repro : str, optional
        The ``dvc repro`` that freezes the key once the grades are in, as typed at the
        repository's top (:func:`relgrade.experiment.layout.repro_command`:
        ``dvc repro experiments/NAME/dvc.yaml`` for an experiment below the top); kept as
        ``repro`` (default ``dvc repro``).

    Returns
    -------
    dict
        ``key`` with ``current`` False; a ``frozen`` key becomes ``previous`` (``stale``, a
        key frozen for another pool version, stays ``stale``); ``owed`` (grader → why →
        pairs, in ``owed``'s order; the panel's expert under ``adjudicate``), ``owed_pairs``
        (their total) and ``owed_message`` (the line ``dvc repro`` prints, without its
        ``grading:`` prefix; None when only adjudication is owed).

    Examples
    --------
    >>> owed = pd.DataFrame([("grader-a", "q1", "c1", "stale"),
    ...                      ("auditor-b", "q1", "c1", "stale")],
    ...                     columns=["grader", "query_id", "chunk_id", "why"])
    >>> k = key_while_owed({"state": "frozen", "current": True, "sha256": "ab"}, owed)
    >>> k["state"], k["current"], k["owed"], k["owed_pairs"]
    ('previous', False, {'grader-a': {'stale': 1}, 'auditor-b': {'stale': 1}}, 2)
    """
    out = dict(key)
    counts: dict[str, dict[str, int]] = {}
    for grader, rows in owed.groupby("grader", sort=False):
        counts[str(grader)] = {str(w): int(n) for w, n in
                               rows["why"].value_counts(sort=False).items()}
    adj = dict(adjudication or {})
    if adj.get("pending"):
        counts.setdefault(str(adj.get("expert")), {})["adjudicate"] = int(adj["pending"])
    message = None
    if len(owed):
        message = bank.pending_message(owed, how=how).removeprefix("grading: ")
    out.update(state="previous" if key.get("state") == "frozen" else key.get("state"),
               current=False, owed=counts,
               owed_pairs=int(sum(sum(c.values()) for c in counts.values())),
               owed_message=message, repro=repro or "dvc repro")
    return out


def _round_owed(held, table: pd.DataFrame, names) -> dict:
    """A partial round: per grader of ``names``, the pairs it owes this round
    (:attr:`~relgrade.pipeline.judgments.Judgments.owed_by`) and how many of its current
    grades (``table``) the earlier rounds carry over."""
    rnd = max(held.rounds)
    out = {}
    for name in names:
        owed = held.owed_by.get(str(name), set())
        mine = table[table["grader"] == name]
        have = set(zip(mine["query_id"].astype(str), mine["chunk_id"].astype(str)))
        out[str(name)] = {"pairs": owed, "carried": len(have - owed),
                          "from_rounds": [r for r in held.rounds if r != rnd]}
    return out


def share_warnings(ex: Experiment) -> list[str]:
    """Warnings about params ``grading.share_from``: a pipeline stage that reads grades but
    lacks the dep on a share source's grade files (DVC cannot take deps from a params list,
    so a hand-edited ``share_from`` needs the pipeline rendered again), or a refused source.

    Returns
    -------
    list of str
        One line per missing dep, naming the ``dvc.yaml``, the stage, the dep and the
        ``relgrade pipeline render`` that writes it; empty when nothing is shared or every dep
        is there.
    """
    if not ex.params.grading.share_from:
        return []
    path = ex.root / "dvc.yaml"
    try:
        missing = sharing.missing_deps(ex, io.read_yaml(path)) if path.exists() else []
    except RelgradeError as e:
        return [str(e)]
    from relgrade.experiment.layout import experiment_option

    render = f"relgrade pipeline render{experiment_option(ex)}"
    return [f"{path.as_posix()}: stage {m['stage']} lacks the dep {m['dep']} (a share "
            "source's grades), so dvc will not rerun it when they change; render the "
            f"pipeline from params: `{render}` (at the repository's top)" for m in missing]


def status_failed(st: Mapping) -> bool:
    """Whether the status shows something that must be fixed before any stage can run:
    a broken DVC file, a ledger that lacks a witnessed use, or a refused rubric."""
    return (bool(st.get("dvc")) or st.get("ledger", {}).get("state") == "refused"
            or st.get("rubric", {}).get("state") == "refused")


def _rubric_refused(ex: Experiment) -> dict | None:
    """``{"state": "refused", "file", "error"}`` when the rubric's revision chain is refused
    (:func:`relgrade.experiment.revisions.chain`: a wrong ``changes:`` line, a missing
    revised file, an unrecorded settled dispute ...), else None (also with no rubric file:
    the steps that need it say so)."""
    from relgrade.experiment import revisions

    if ex.params.grading.rubric is None or not ex.rubric_path().is_file():
        return None
    try:
        revisions.chain(ex)
    except RelgradeError as e:
        return {"state": "refused", "file": str(ex.params.grading.rubric), "error": str(e)}
    return None


#: The click outputs :func:`click_status` reports, in this order, when ``paths`` declares them.
CLICK_OUTPUTS = ("click_propensity", "click_ips", "click_pairs", "training_set")


def click_status(ex: Experiment) -> dict:
    """Where a click experiment stands (params with ``clicks`` and no pool to grade).

    Parameters
    ----------
    ex : Experiment
        The experiment.

    Returns
    -------
    dict
        ``{"log": params clicks.log, "outputs": {NAME: str or None}}``: for each of
        :data:`CLICK_OUTPUTS` that params ``paths`` declares, in that order, the output's
        path (POSIX form) when the file exists, else ``None``.
    """
    outputs = {}
    for name in CLICK_OUTPUTS:
        if getattr(ex.params.paths, name, None):
            path = ex.path(name)
            outputs[name] = path.as_posix() if path.exists() else None
    return {"log": ex.params.clicks.log, "outputs": outputs}


def stop_status(ex) -> dict:
    """Where the stopping rule stands (params ``grading.stop: anytime``).

    Returns
    -------
    dict
        ``rule``, ``sample`` (the locked human sample's size), ``reads`` (queries of the
        seeded order the rule reads now: up to its next look, or as far as people graded
        ahead of it), ``owed`` (those of them people have not graded, in the order),
        ``graded`` (queries of the sample people have graded, any order), ``looks`` (query
        counts looked at), ``settled_at`` (None until settled), ``batch``, ``margin`` and
        ``seed`` (params now), ``grader`` (params ``grading.auditor``), ``how`` (the command
        that grades the owed queries, None when none is owed), ``build`` (the ``dvc repro``
        that writes their packets first when the packets folder lacks them, else None),
        ``looked_with`` (when a look was taken with another margin,
        level or seed than params give now: ``{"grading.stop_margin": {"now": 0.1, "was":
        0.05}}``, the ppi stage refuses such a change; else empty).
    """
    p = ex.params
    record = ex.stop_record()
    reads = ex.audit_ids() or []
    graded = ex.stop_graded(record["order"])
    level = p.ppi.level if p.ppi is not None else 0.95
    looked_with = {}
    if record.get("looks"):
        for k, now, was in (("grading.stop_margin", float(p.grading.stop_margin),
                             float(record["margin"])),
                            ("ppi.level", float(level), float(record["level"])),
                            ("seed", int(p.need("seed")), int(record["seed"]))):
            if now != was:
                looked_with[k] = {"now": now, "was": was}
    owed = [q for q in reads if q not in graded]
    auditor = p.grading.auditor
    how = grade_commands(ex).get(auditor) if auditor else None
    build = packets_build_command(ex, auditor, owed) if auditor and owed else None
    return {"state": "settled" if record.get("settled_at") is not None else "grading",
            "rule": record["rule"], "sample": record["sample"], "reads": len(reads),
            "owed": owed, "graded": len(graded), "grader": auditor,
            "how": how if owed else None, "build": build,
            "looks": [int(x["t"]) for x in record.get("looks") or []],
            "settled_at": record.get("settled_at"), "batch": p.grading.stop_batch,
            "margin": p.grading.stop_margin, "seed": p.need("seed"),
            "looked_with": looked_with}
