"""``relgrade status``: where the experiment stands, from whatever files exist.

The status itself (one JSON-ready dict) is computed by :mod:`relgrade.pipeline.status`;
this module renders it as lines such as::

    pool: 540 pairs over 36 queries, version p-0123456789ab, arms bm25, hybrid, tfidf
    grading: 312 of 540 pool pairs graded by grader-a (round 1)
      kw07: 2 of 9 pairs lack grades: c10, c11
    audit: 0 of 180 pairs graded by auditor-b (round 1)
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import aimed_at, counted, handle_errors, holes_lines


@click.command("status")
@params_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status_cmd(params_path, as_json):
    """Say where the experiment stands: frozen inputs, pool, intents, grading, gate, key, metrics.

    For each grader it counts the pool pairs graded in the current round and names, query by
    query, the pairs that still lack a grade (after the pool grew, only those need grading).
    Exits 1, naming the exact fix, when DVC's own files are broken (a truncated dvc.lock,
    an empty .dvc/tmp/rwlock), the ledger lacks a use of a key that metrics files show, or
    the rubric's revision is refused (a wrong `changes:` line, see docs/disputes.md).
    """
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.new_arms import refuse_holes_folder
    from relgrade.pipeline.status import click_status, read_status, status_failed
    from relgrade.text import inert

    ex = Experiment.load(params_path)
    if ex.params.clicks is not None and not ex.params.paths.pool:
        # a click experiment: propensities, IPS estimates and training pairs, no judgments
        lines = click_status_lines(click_status(ex))
        click.echo(json.dumps({"clicks": lines}, indent=2) if as_json
                   else "\n".join(inert(aimed_at(line, params_path)) for line in lines))
        return
    refuse_holes_folder(ex)  # a holes folder's status is its parent experiment's
    st = read_status(ex)
    cache_lines = _call_cache(ex, st) + _judges(ex, st)
    if as_json:
        click.echo(json.dumps(st, indent=2, ensure_ascii=False))
    else:
        for line in status_lines(st) + cache_lines:
            # a fix a line names is typed where the user stands: aimed at this experiment
            click.echo(inert(aimed_at(line, params_path)))
    if status_failed(st):
        raise click.exceptions.Exit(1)


def _call_cache(ex, st) -> list[str]:
    """Per grader of the current round, how its grades were answered (the call cache's hits
    and misses, from the bank); added to ``st`` under ``call_cache``; the lines to print."""
    from relgrade.graders.cache import CACHE_FIELDS, cache_counts, cache_status_line

    if not ex.params.paths.grades_in:
        return []
    counts = {name: cache_counts(ex.bank_table(files, CACHE_FIELDS))
              for name, files in ex.grader_round_files().items()}
    counts = {k: v for k, v in counts.items() if v["hit"] + v["miss"]}
    if counts:
        st["call_cache"] = counts
    return [cache_status_line(name, c) for name, c in counts.items()]


def _judges(ex, st) -> list[str]:
    """Per model grader with a command: its judge identity now and under which identities
    its recorded grades (current round) were made, added to ``st`` under ``judges``. With a
    price table (params ``prices``), per grader with a command (a model grader, or a person
    answering through one: every grader ``grade run`` runs), the price of its owed requests
    or the advice to add one, under ``owed_price``. The lines to print."""
    from relgrade.experiment.judges import current_judge, owed_estimate
    from relgrade.errors import RelgradeError
    from relgrade.graders.cache import JUDGE_FIELDS, judge_counts, judge_status_line

    files = ex.grader_round_files() if ex.params.paths.grades_in else {}
    lines, judges, prices = [], {}, {}
    for name, g in ex.params.graders.items():
        spec = g.as_dict()
        if spec.get("command") is None:
            continue
        if g.kind == "model":  # a judge: its identity; a person's command has none
            try:
                judge = current_judge(ex, name)
            except RelgradeError as e:
                lines.append(f"judge: {name} identity cannot be computed: {e}")
                continue
            counts = (judge_counts(ex.bank_table(files[name], JUDGE_FIELDS)) if name in files
                      else {})
            judges[name] = {"identity": judge, "grades": counts}
            lines.append(judge_status_line(name, judge, counts))
        # every grader `grade run` runs gets its own price (or how to add one), as its
        # `grade run --dry-run` prints it: a person answering through a command too
        if not ex.params.prices:
            continue
        try:
            est = owed_estimate(ex, name)
        except RelgradeError as e:
            lines.append(f"price: {name} owed work cannot be priced now: {e}")
            continue
        prices[name] = {"requests": est.requests, "prompt_tokens": est.prompt_tokens,
                        "output_tokens": est.output_tokens, "cost": est.cost}
        lines += [f"price: {line}" for line in est.lines(name)]
    if judges:
        st["judges"] = judges
        lines += _calibration(ex, st)
    if prices:
        st["owed_price"] = prices
    return lines


def _calibration(ex, st) -> list[str]:
    """Per model grader with a command: whether its judge identity now has a calibration
    against people in the judges' ledger (:func:`relgrade.experiment.calibration.judge_states`),
    added to ``st`` under ``calibration``; a missing or stale one is owed work, named with the
    command that records it. The lines to print."""
    from relgrade.errors import RelgradeError
    from relgrade.experiment.calibration import judge_states, state_line
    from relgrade.pipeline.cost import people_seconds

    try:
        states = judge_states(ex, seconds_of=people_seconds(ex))
    except RelgradeError as e:
        return [f"calibration: the judges' ledger cannot be read: {e}"]
    st["calibration"] = {s["grader"]: {"judge": s["judge"], "state": s["state"],
                                       "why": s["why"], "owed": s["owed"], "ready": s["ready"],
                                       "recheck": s.get("recheck")}
                         for s in states}
    people = [n for n, g in ex.params.graders.items() if g.kind == "human"]
    if states and not people and all(s["state"] != "calibrated" for s in states):
        # nobody to measure against (a simulated panel): one line, not one per grader
        return [f"calibration: no human grader in this experiment to measure its "
                f"{len(states)} model grader{'s' if len(states) != 1 else ''} against "
                "(`relgrade judge status` lists them)"]
    return [state_line(s).replace("judge: ", "calibration: ", 1) for s in states]


def stop_line(stop: Mapping) -> str:
    """The stopping rule's line: settled (nothing more owed) or how far people have to go,
    counted from the grades recorded; the margin and seed are params' now, and a look taken
    under other settings is named."""
    if stop.get("state") == "unreadable":
        return f"stopping rule: unreadable: {stop['error']}"
    looks = ", ".join(map(str, stop["looks"])) or "none yet"
    changed = "".join(
        f"; {k} is {v['now']:g} in params but the looks were taken with {v['was']:g}: the "
        "ppi stage refuses it (restore it, or start a new grading.round)"
        for k, v in (stop.get("looked_with") or {}).items())
    if stop["settled_at"] is not None:
        return (f"stopping rule: settled at {stop['settled_at']} of {stop['sample']} queries "
                f"(looks at {looks}); people owe no further query of the human sample"
                + changed)
    owed = stop["owed"]
    if stop["looks"] and stop["looks"][-1] >= stop["sample"]:
        return (f"stopping rule: the whole sample is graded; the rule did not settle (looks at "
                f"{looks}): verdicts from all {stop['sample']} queries; people owe no further "
                "query of the human sample" + changed)
    if not owed:
        return (f"stopping rule: not settled (looks at {looks}); people have graded the first "
                f"{stop['reads']} of {stop['sample']} queries of the seeded order and owe "
                f"none now: `dvc repro` looks at them ({stop['batch']} a batch, margin "
                f"{stop['margin']:g}, seed {stop['seed']})" + changed)
    run = ""
    if stop.get("how"):
        run = (f"; run `{stop['build']}` (it writes their packets), then `{stop['how']}`"
               if stop.get("build") else f"; run `{stop['how']}`")
    return (f"stopping rule: not settled (looks at {looks}); people owe {len(owed)} of the "
            f"first {stop['reads']} of {stop['sample']} queries of the seeded order "
            f"({', '.join(owed[:8])}{', ...' if len(owed) > 8 else ''}), "
            f"{stop['batch']} a batch (margin {stop['margin']:g}, seed {stop['seed']})"
            + run + changed)


def removed_line(name: str, s: Mapping) -> str:
    """The line of a step whose output an earlier ``dvc repro`` built and is gone now.

    Parameters
    ----------
    name : str
        The step's name (``pool``).
    s : mapping
        Its ``removed`` state: ``path`` (as ``dvc.lock`` records it), ``stage``, ``params``
        (list of the params keys the stage read that changed since it ran) and ``repro``.

    Returns
    -------
    str
        E.g. ``"pool: missing: the last dvc repro built it (dvc.lock records
        data/pool/pool.parquet) and it is gone since: DVC deletes a stage's outputs before
        running the stage, so a pool stage that failed (on a bad params value, say) leaves
        none; params pool.depth changed since it ran; run `dvc repro` to build it again (it
        names the cause again if it is still there)"``.
    """
    changed = (f"; params {', '.join(s['params'])} changed since it ran"
               if s.get("params") else "")
    return (f"{name}: missing: the last dvc repro built it (dvc.lock records {s['path']}) and "
            f"it is gone since: DVC deletes a stage's outputs before running the stage, so a "
            f"{s['stage']} stage that failed (on a bad params value, say) leaves none"
            f"{changed}; run `{s['repro']}` to build it again (it names the cause again if "
            "it is still there)")


def status_lines(st: Mapping) -> list[str]:
    """The status as plain-words lines (see the module docstring).

    Parameters
    ----------
    st : mapping
        As returned by :func:`relgrade.pipeline.status.experiment_status` (or
        :func:`~relgrade.pipeline.status.read_status`).

    Returns
    -------
    list of str
        One line per step; under each grader, one indented line per query whose pool is
        partly graded (the chunk ids that lack a grade) and one for queries not started.
    """
    out: list[str] = [f"dvc: {d['file']} {d['problem']}; fix: {d['fix']}"
                      for d in st.get("dvc", [])]
    out += [f"warning: {w}" for w in st.get("warnings", [])]
    out += params_changed_lines(st.get("params_changed") or {}, dvc_broken=bool(st.get("dvc")))
    out += inputs_changed_lines(st.get("inputs_changed") or {})
    if st.get("behind"):
        from relgrade.pipeline.since_repro import behind_lines

        out += behind_lines(st["behind"])
    for origin, by_grader in ((st.get("pending") or {}).get("shared") or {}).items():
        counts = ", ".join(f"{g} {n}" for g, n in by_grader.items())
        out.append(f"shared: {counted(sum(by_grader.values()), 'pair')} reused from {origin} "
                   f"({counts})")

    def unreadable(name, s):
        return f"{name}: cannot be read: {s['error']}"

    def not_done(name, s, absent):
        # a step short of its done state: the error that kept it from being read, or what is owed
        if s["state"] == "removed":
            return removed_line(name, s)
        return unreadable(name, s) if s["state"] == "unreadable" else f"{name}: {absent}"

    c = st["corpus"]
    out.append(f"corpus: frozen, {c['chunks']} chunks, sha256 {_short(c['sha256'])}"
               if c["state"] == "frozen" else not_done("corpus", c, "not built yet"))
    q = st["queries"]
    if q["state"] == "frozen":
        groups = q.get("groups") or {}
        g = (" (" + ", ".join(f"{k} {v}" for k, v in groups.items()) + ")"
             if isinstance(groups, Mapping) and groups else "")
        out.append(f"queries: frozen, {counted(q['queries'], 'query')}{g}, sha256 {_short(q['sha256'])}")
    else:
        out.append(not_done("queries", q, "not frozen yet"))
    p = st["pool"]
    if p["state"] == "built":
        arms = f", arms {', '.join(p['arms'])}" if p.get("arms") else ""
        out.append(f"pool: {counted(p['pairs'], 'pair')} over {counted(p['queries'], 'query')}, version "
                   f"{p.get('version') or '?'}{arms}")
    else:
        out.append(not_done("pool", p, "not built yet"))
    i = st["intents"]
    if i["state"] == "reviewed":
        flagged = f"; flagged for a second look: {', '.join(i['flagged'])}" if i["flagged"] else ""
        out.append(f"intents: frozen, reviewed by {i['reviewer']} at {i['reviewed_at']}, "
                   f"sha256 {_short(i['sha256'])}{flagged}")
    elif i["state"] == "signed":
        # reviewed, not frozen yet: the next dvc repro's intents stage freezes this review
        flagged = f"; flagged for a second look: {', '.join(i['flagged'])}" if i["flagged"] else ""
        now = (f"; frozen now: sha256 {_short(i['frozen_sha256'])}"
               if i.get("frozen_sha256") else "")
        out.append(f"intents: reviewed by {i['reviewer']} at {i['reviewed_at']}, sha256 "
                   f"{_short(i['table_sha256'])}{flagged}; not frozen yet: `{i['repro']}` "
                   f"freezes them{now}")
    else:
        out.append(not_done("intents", i, "not reviewed yet (no packets before the review)"))
    r = st.get("refresh")
    if r is not None:
        line = (f"refresh: {r['replaced']} of {r['replaced'] + r['kept']} queries replaced from "
                f"{r['log']} (share {r['share']}); added {', '.join(r['added'])}")
        if r["intents_owed"] or r["intents_stale"]:
            parts = ([f"intents owed for {', '.join(r['intents_owed'])}"]
                     if r["intents_owed"] else [])
            parts += ([f"the intents of retired {', '.join(r['intents_stale'])} go"]
                      if r["intents_stale"] else [])
            line += f"; {'; '.join(parts)}: edit the intent table, then {r['review']}"
        out.append(line)
    a = st["audit"]
    out.append(f"audit sample: {counted(len(a['queries']), 'query')} chosen ({', '.join(a['queries'])})"
               if a["state"] == "chosen" else not_done("audit sample", a, "not chosen yet"))
    if "stop" in st:
        out.append(stop_line(st["stop"]))

    tri = (st.get("pending") or {}).get("triage")
    if tri is not None:
        out.append(f"triage: people's queue waits for {tri['grader']} to grade every pool pair"
                   if tri["queue"] is None else
                   f"triage: people's queue of {tri['queue']} pairs: the {tri['model_relevant']} "
                   f"{tri['grader']} graded relevant plus a sample of {tri['sampled_zeros']} of "
                   f"its {tri['model_zeros']} 0s")
    from relgrade.schema import TRIAGE_ROLE  # pandas and pyarrow: not for --help

    if st.get("rubric", {}).get("state") == "refused":
        out.append(f"rubric: refused: {st['rubric']['error']}")
    for name, g in st["grading"].items():
        step = "audit" if g["role"] == "auditor" else "grading"
        what = ("pairs" if g["role"] == "auditor" else "pool pairs" if tri is None
                or g["role"] == TRIAGE_ROLE else "triage queue pairs")
        if g["state"] == "blocked" and g.get("blocked_by"):  # another grader's file
            out.append(f"{step}: {name}'s grades cannot be counted until "
                       f"{g['blocked_by']}'s file is fixed (see its line)")
            continue
        if g["state"] == "blocked":  # the rubric's fault, not the grade file's
            out.append(f"{step}: {name}'s grades cannot be counted until the rubric is fixed "
                       "(see `rubric:` above)")
            continue
        if g["state"] == "invalid":
            out.append(f"{step}: {name}'s round {g['round']} file is invalid: {g['error']}")
            continue
        if g.get("of") is None:
            wait = g.get("waiting", "pool")
            out.append(f"{step}: {g['graded']} pairs graded by {name} (round {g['round']}); "
                       f"waiting for the {wait}")
            continue
        since = f"round {g['round']}"
        if "carried" in g:  # a partial round: what it owes, the rest carried from before
            what = f"pair{'' if g['of'] == 1 else 's'} this round owes"
            rounds = g.get("from_rounds") or []
            since += (f"; {g['carried']} carried from round{'s' if len(rounds) > 1 else ''} "
                      f"{', '.join(map(str, rounds))}")
        out.append(f"{step}: {g['graded']} of {g['of']} {what} graded by {name} ({since})")
        for qid, info in g["partial"].items():
            out.append(f"  {qid}: {len(info['missing'])} of {counted(info['pool'], 'pair')} "
                       "lack grades: "
                       f"{', '.join(info['missing'])}")
        if g["not_started"] and g["graded"]:
            out.append(f"  not started: {counted(len(g['not_started']), 'query')}: "
                       f"{', '.join(g['not_started'])}")

    gt = st["gate"]
    if gt["state"] == "passed":
        ms = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in gt["measures"].items() if k not in ("pairs", "missing"))
        cov = gt.get("coverage")
        if isinstance(cov, Mapping) and "pairs" in cov:
            ms = (f"{ms}; " if ms else "") + f"audit coverage {cov.get('both')} of {cov['pairs']} pairs"
        how = "passed under relaxed gates" if gt.get("relaxed") else "passed"
        if gt.get("ppi") or gt.get("not_applied"):
            ms = "ppi mode: agreement reported, not gated" + (f"; {ms}" if ms else "")
        out.append(f"gate: {how} ({ms})" if ms else f"gate: {how}")
        out += [f"  relaxed: {line}" for line in gt.get("relaxed") or []]
        out += [f"  not applied in ppi mode: {line}" for line in gt.get("not_applied") or []]
        out += [f"  warning: {line}" for line in gt.get("family_warnings") or []]
    elif gt["state"] == "waiting":
        owed = ", ".join(f"{g} owes {n}" for g, n in gt["owed"].items())
        out.append(f"gate: waiting for the audit queries' grades ({owed}); "
                   + _last_pass(gt, st["round"]))
    elif gt["state"] == "failed":
        out.append("gate: failed: " + "; ".join(gt["lines"]))
        out += [f"  advice: {line}" for line in gt.get("advice") or []]
    elif gt["state"] == "unreadable":
        out.append(unreadable("gate", gt))
    elif gt.get("would_pass"):
        out.append("gate: not run yet; the agreement metrics pass the gates")
    elif gt.get("agreement_round") is not None:
        out.append(f"gate: not run yet for round {st['round']} (the agreement metrics are "
                   f"round {gt['agreement_round']}'s)")
    else:
        out.append("gate: not run yet (no agreement metrics)")

    k = st["key"]
    if k["state"] == "previous":
        out += previous_key_lines(k)
    elif k["state"] == "stale":
        out += stale_key_lines(k)
    elif k["state"] == "frozen":
        dropped = ", ".join(k["dropped"]) or "none"
        size = (f", {counted(k['pairs'], 'pair')} over {counted(k['queries'], 'query')}"
                if k.get("pairs") else "")
        label = " (post-hoc)" if k["post_hoc"] else ""
        out.append(f"key: frozen{label}, sha256 {k['sha256']}{size}; dropped queries: {dropped}")
    else:
        out.append(not_done("key", k, "not frozen yet"))
    if k.get("post_hoc_key"):
        out.append(f"key: a post-hoc key {k['post_hoc_key']['sha256']} stands beside the frozen "
                   "one (its metrics are labelled post-hoc; the decision stays with the frozen key)")

    for arm, m in st["metrics"].items():
        if m["state"] == "present":
            label = ", post-hoc" if m.get("post_hoc") else ""
            if k["state"] == "previous" and not m.get("post_hoc"):
                label = ", the previous key"
            elif k["state"] == "stale" and not m.get("post_hoc"):
                label = ", the old pool's key"
            out.append(f"metrics {arm}: present (key {_short(m['key_sha256'])}{label})")
        elif m["state"] == "stale":
            out.append(f"metrics {arm}: stale (computed from key {_short(m['key_sha256'])}, "
                       "not the frozen key)")
        else:
            out.append(f"metrics {arm}: missing")
    out += panel_lines(st.get("pending") or {})
    if st.get("holes"):
        out += holes_lines(st["holes"])
    if st.get("cost"):
        from relgrade.pipeline.cost import cost_lines  # pandas: not for --help

        out += cost_lines(st["cost"])
        held = (st.get("holes") or {}).get("cost") or {}
        if held.get("pending"):  # the lines above are the key's: the holes' work is beside
            out.append(f"  holes (beside the key's judging cost above): {held['pending']} "
                       f"pending ({held['pending_hours']:.2f} annotator-hours + "
                       f"{held['pending_calls']} model calls), as the holes stage asks")
    if st.get("design", {}).get("unfilled"):
        out.append("design: unfilled: " + "; ".join(st["design"]["unfilled"]))
    missing = st.get("assignment")
    if missing:
        why = (f"the packets stage failed: {missing['error']}; the raters' pending work is "
               "not counted until it runs" if missing.get("error") else
               "the packets stage has not run on this pool; the raters' pending work is "
               "counted from the queues it would deal")
        out.append(f"assignment: missing ({missing['path']}): {why}. "
                   f"Run: {missing['repro']}")
    for step, error in st.get("other_problems", {}).items():
        out.append(f"{step}: cannot be read: {error}")
    if st.get("ledger", {}).get("state") == "refused":
        out.append(f"ledger: refused: {st['ledger']['error']}")
    return out


def _names(kind: str, names) -> str:
    return f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _value(v) -> str:
    return json.dumps(v, ensure_ascii=False) if isinstance(v, (str, list)) else str(v)


def params_changed_lines(pc: Mapping, *, dvc_broken: bool = False) -> list[str]:
    """What params changed since the last ``dvc repro``, and what that means for the lines
    that follow (the pool, the grading counts and the cost are the last run's).

    Parameters
    ----------
    pc : mapping
        :func:`relgrade.pipeline.since_repro.params_since_repro`'s result (empty: nothing
        to say), with ``pending_pool`` when arms were added and a pool exists
        (:func:`relgrade.pipeline.status.read_status`: the pool the next ``dvc repro``
        makes with them, priced).
    dvc_broken : bool, default False
        DVC's own files are reported broken already (their ``dvc:`` line names the fix), so
        an unreadable lock is not reported twice.

    Returns
    -------
    list of str
        No line unless params changed (or the lock cannot be read); else a ``params:`` line
        naming the change, and a line on what it means; with ``pending_pool``, a line with
        the pending work: the pool with the added arms and the judgments each grader then
        owes.

    Examples
    --------
    >>> pc = {"state": "changed", "keys": {"arms": {}, "pool.depth": {"was": 3, "now": 5}},
    ...       "stages": ["retrieve@a", "pool"], "repro": "dvc repro",
    ...       "arms": {"added": ["x"], "removed": [], "changed": []}}
    >>> for line in params_changed_lines(pc): print(line)
    params: changed since the last dvc repro: arm x added; pool.depth 3 -> 5
      the pool, grading and cost below are the last run's: arm x has no run and no pool pairs yet, so its pairs are neither counted nor priced; `dvc repro` makes its run and pools it, then stops at the grading owed, which `relgrade status` then counts and prices
    """
    if pc.get("state") == "unreadable" and not dvc_broken:
        return [f"params: cannot be compared with the last dvc repro: {pc['error']}"]
    if pc.get("state") != "changed":
        return []
    arms = pc.get("arms") or {}
    parts = [f"{_names('arm', arms[what])} {word}"
             for what, word in (("added", "added"), ("removed", "removed"),
                                ("changed", "edited")) if arms.get(what)]
    for key, change in pc["keys"].items():
        if key == "arms" and parts:
            continue
        if "now" not in change:
            parts.append(f"{key} deleted")
        elif isinstance(change["now"], Mapping) or isinstance(change.get("was"), Mapping):
            parts.append(f"{key} edited")
        else:
            parts.append(f"{key} {_value(change['was'])} -> {_value(change['now'])}")
    out = [f"params: changed since {_since(pc)}: {'; '.join(parts)}"]
    repro = pc["repro"]
    if arms.get("added"):
        added = _names("arm", arms["added"])
        its = "its" if len(arms["added"]) == 1 else "their"
        plan = pc.get("pending_pool")
        # priced in memory below: the lines after this one leave them out, that one does not
        priced = bool(plan) and "error" not in plan
        counts = (f"they leave {its} pairs out (the next line prices them)" if priced else
                  f"{its} pairs are neither counted nor priced")
        out.append(f"  the pool, grading and cost below are the last run's: {added} "
                   f"{'has' if len(arms['added']) == 1 else 'have'} no run and no pool "
                   f"pairs yet, so {counts}; `{repro}` "
                   f"makes {its} run{'' if its == 'its' else 's'} and pools "
                   f"{'it' if its == 'its' else 'them'}, then stops at the grading owed, "
                   "which `relgrade status` then counts and prices")
        if plan and "error" in plan:
            out.append(f"  pending: the pool with {added} cannot be planned now: "
                       f"{plan['error']}")
        elif plan:
            owed = ", ".join(f"{g} {n}" for g, n in plan["owed"].items())
            out.append(f"  pending, priced from {its} run{'' if its == 'its' else 's'} made in "
                       f"memory: the pool with {added} holds {plan['pairs']} pairs, "
                       f"{plan['new_pairs']} of them new (today {plan['pairs_now']}); then "
                       f"owed: {owed or 'nothing'} judgments")
    else:
        out.append(f"  `{repro}` reruns {_names('stage', pc['stages'])}; what is below is "
                   "the last run's")
    return out


def _since(changed: Mapping) -> str:
    """Since when a params or inputs change counts: the last ``dvc repro``, or, when that
    run stopped (``changed["stopped"]``: stages whose outputs it left gone), the last run of
    the stages that recorded the change, naming where it stopped."""
    stopped = changed.get("stopped")
    if not stopped:
        return "the last dvc repro"
    return (f"{_names('stage', changed['stages'])} last ran (the last dvc repro stopped at "
            f"{_names('stage', stopped)}: see its Pending or Error line)")


def inputs_changed_lines(ic: Mapping) -> list[str]:
    """What inputs changed since the last ``dvc repro`` (a grader's file edited by hand, the
    audit lock rewritten), and which stages ``dvc repro`` reruns for them.

    Parameters
    ----------
    ic : mapping
        :func:`relgrade.pipeline.since_repro.inputs_since_repro`'s result (empty: nothing
        to say). An unreadable lock is said by the ``params:`` or ``dvc:`` line already.

    Returns
    -------
    list of str
        No line unless a file differs from the lock; else an ``inputs:`` line naming each
        path (relative to the experiment's folder) and how it changed, and a line naming the
        stages that recorded them.

    Examples
    --------
    >>> ic = {"state": "changed", "repro": "dvc repro", "stages": ["audit", "grades"],
    ...       "paths": {"data/audit/lock.json": {"change": "edited", "stages": ["audit"]},
    ...                 "data/grades": {"change": "edited", "stages": ["grades"]}}}
    >>> for line in inputs_changed_lines(ic): print(line)
    inputs: changed since the last dvc repro: data/audit/lock.json edited; data/grades edited
      `dvc repro` reruns stages audit, grades and those after them; their outputs below are the last run's
    """
    if ic.get("state") != "changed":
        return []
    parts = [f"{path} {c['change']}" for path, c in ic["paths"].items()]
    return [f"inputs: changed since {_since(ic)}: {'; '.join(parts)}",
            f"  `{ic['repro']}` reruns {_names('stage', ic['stages'])} and those after them; "
            "their outputs below are the last run's"]


def previous_key_lines(k: Mapping) -> list[str]:
    """The key while pairs of the current pool are owed (state ``previous``, see
    :func:`relgrade.pipeline.status.key_while_owed`): no current key, what is owed and how to
    grade it, then the previous key, kept, with its hash and pool version.

    Examples
    --------
    >>> previous_key_lines({"state": "previous", "sha256": "ab" * 32, "pool_version": "p-1",
    ...     "pairs": 9, "queries": 3, "dropped": [], "post_hoc": False, "owed_pairs": 2,
    ...     "owed": {"g": {"stale": 2}},
    ...     "owed_message": "2 pairs need g (2 stale); run `relgrade grade run --grader g`"})
    ... # doctest: +NORMALIZE_WHITESPACE
    ['key: no current key until the owed grades are in: 2 pairs need g (2 stale); run
      `relgrade grade run --grader g`, then `dvc repro`',
     'key: previous key kept (not current): sha256 abababababababababababababababababababababababababababababababab,
      pool p-1, 9 pairs over 3 queries; dropped queries: none']
    """
    size = (f", {counted(k['pairs'], 'pair')} over {counted(k['queries'], 'query')}"
            if k.get("pairs") else "")
    label = " (post-hoc)" if k.get("post_hoc") else ""
    dropped = ", ".join(k.get("dropped") or []) or "none"
    return [f"key: no current key until the owed grades are in: {_owed_text(k)}",
            f"key: previous key kept{label} (not current): sha256 {k['sha256']}, pool "
            f"{k.get('pool_version') or '?'}{size}; dropped queries: {dropped}"]


def stale_key_lines(k: Mapping) -> list[str]:
    """The key when the frozen one is of another pool version (state ``stale``): no current
    key (what is owed, or, with ``owed_pairs`` 0, the ``repro`` that freezes the new pool's
    key), then the frozen key, kept for the old pool.

    Examples
    --------
    >>> stale_key_lines({"state": "stale", "sha256": "ab" * 32, "pool_version": "p-1",
    ...     "pool_now": "p-2", "pairs": 9, "queries": 3, "dropped": [], "post_hoc": False})
    ... # doctest: +NORMALIZE_WHITESPACE
    ['key: no current key for pool p-2: grade the new pairs, then freeze a new key',
     'key: frozen key kept for the old pool (not current): sha256
      abababababababababababababababababababababababababababababababab, pool p-1, 9 pairs over
      3 queries; dropped queries: none']
    """
    if k.get("owed_pairs"):
        first = f"key: no current key until the owed grades are in: {_owed_text(k)}"
    elif k.get("owed_pairs") == 0:
        first = (f"key: no current key for pool {k.get('pool_now') or '?'} yet: its pairs are "
                 f"graded; `{k.get('repro') or 'dvc repro'}` freezes its key")
    else:
        first = (f"key: no current key for pool {k.get('pool_now') or '?'}: grade the new "
                 "pairs, then freeze a new key")
    size = (f", {counted(k['pairs'], 'pair')} over {counted(k['queries'], 'query')}"
            if k.get("pairs") else "")
    label = " (post-hoc)" if k.get("post_hoc") else ""
    dropped = ", ".join(k.get("dropped") or []) or "none"
    return [first, f"key: frozen key kept for the old pool{label} (not current): sha256 "
                   f"{k['sha256']}, pool {k.get('pool_version') or '?'}{size}; dropped "
                   f"queries: {dropped}"]


def _owed_text(k: Mapping) -> str:
    """What a key waits for, in words, ending with what to run: the experiment's own
    ``dvc repro`` as typed at the repository's top (``k["repro"]``, e.g. ``dvc repro
    experiments/NAME/dvc.yaml``), like every other command the status prints."""
    parts = [k["owed_message"]] if k.get("owed_message") else []
    for grader, why in (k.get("owed") or {}).items():
        if why.get("adjudicate"):
            parts.append(f"{counted(why['adjudicate'], 'queued pair')} to adjudicate by {grader}")
    return "; ".join(parts) + f", then `{k.get('repro') or 'dvc repro'}`"


def _last_pass(gt: Mapping, round_now) -> str:
    """Why a pass record does not stand while audit pairs are owed: it is another round's, or
    it predates the owed pairs (counted by why they are owed: ``gt["why"]``, the
    :data:`relgrade.schema.PENDING` reasons)."""
    last = gt.get("last_round")
    if last is not None and round_now is not None and int(last) != int(round_now):
        return (f"the last gate record (passed) is for round {last}; the gate runs again "
                f"for round {round_now} once these are graded")
    why = {k: int(v) for k, v in (gt.get("why") or {}).items()}
    counts = ((why.get("new", 0) + why.get("audit", 0), "has no grade", "have no grade"),
              (why.get("stale", 0), "is stale (a chunk, intent or rubric changed)",
               "are stale (a chunk, intent or rubric changed)"),
              (why.get("regrade", 0), "is to regrade", "are to regrade"))
    parts = [f"{n} {one if n == 1 else many}" for n, one, many in counts if n]
    return ("the last gate record (passed) predates them"
            + (": " + ", ".join(parts) if parts else "")
            + "; the gate runs again once they are graded")


def panel_lines(pending: Mapping) -> list[str]:
    """A rater panel's pending work in plain words: what each rater still owes of its queue
    and the adjudication queue the expert owes (nothing without a panel)."""
    if "adjudication" not in pending:
        return []
    out = []
    removed = pending.get("removed_on_gold") or []
    if removed:
        out.append(f"raters: removed on gold: {', '.join(removed)} (their grades are "
                   "discarded; any pair they left ungraded goes to a rater who stays at the next "
                   "`dvc repro`)")
    for name in pending.get("raters", []):
        if name in removed:
            continue
        c = pending["graders"][name]
        owed = c["pending_new"] + c["pending_stale"]
        if owed:
            out.append(f"raters: {name} owes {counted(owed, 'pair')} of its queue "
                       f"({c['current']} graded); run `relgrade grade run --grader {name}` "
                       "or `relgrade serve`")
    adj = pending["adjudication"]
    if adj["pending"]:
        who = adj["expert"] or "no expert declared (set adjudication.expert)"
        out.append(f"adjudication: {counted(adj['pending'], 'queued pair')} owed by {who} "
                   f"(queries {', '.join(adj['queries'])})")
    else:
        out.append("adjudication: nothing pending")
    return out


def click_status_lines(cs: Mapping) -> list[str]:
    """Where a click experiment stands, as lines.

    Parameters
    ----------
    cs : mapping
        As returned by :func:`relgrade.pipeline.status.click_status`.

    Returns
    -------
    list of str
        One line saying it is a click experiment, then one line per click output declared in
        ``paths`` (``click_propensity``, ``click_ips``, ``click_pairs``, ``training_set``):
        ``NAME: PATH`` when it exists, ``NAME: not built yet (dvc repro)`` otherwise.
    """
    lines = [f"click experiment: log {cs['log']} (no pool, grading or key)"]
    for name, path in cs["outputs"].items():
        state = path if path is not None else "not built yet (dvc repro)"
        lines.append(f"{name.replace('_', ' ')}: {state}")
    return lines


def _short(sha) -> str:
    return str(sha)[:12] if sha else "?"
