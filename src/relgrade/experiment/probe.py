"""``relgrade judge probe``: an experiment's model judge re-asked under the robustness battery.

On the audit sample (the queries of ``paths.audit``: the auditor's queries, or the human
sample in ppi mode), every pair the judge graded under its identity now is asked again
under each probe of params ``judges.probe`` (:mod:`relgrade.protocol.probes`), through the
grader's command (:mod:`relgrade.graders.probe`); the answers are compared with the pairs'
grades of record (:mod:`relgrade.evaluation.robustness`). Probe answers are not grades:
they reach the call cache under their own keys and the report, nothing else.

The report is written to ``judges/probe-GRADER.json`` in the experiment's folder.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.evaluation.robustness import flip_rate, variance_components
from relgrade.experiment.calibration import _latest, judges_params, model_judges
from relgrade.experiment.judges import current_judge
from relgrade.experiment.layout import repro_command
from relgrade.experiment.probe_report import PROBE_FORMAT, report_path
from relgrade.graders import command as graderun
from relgrade.graders.cache import CallCache
from relgrade.graders.exchange import prompt_template, prompt_template_text
from relgrade.graders.probe import ProbeRequest, ask_probes
from relgrade.protocol.probes import CHUNK_PROBES, paraphrase_templates, perturb_batch
from relgrade.rng import derive_seed

__all__ = ["PROBE_FORMAT", "report_path", "probe_grader", "build_requests", "run_probe",
           "report_lines"]


def probe_grader(ex, grader: str | None) -> str:
    """The model grader to probe: ``grader``, else ``grading.key_grader`` when it is a
    model grader with a command, else the experiment's first such grader.

    Raises
    ------
    InputError
        The experiment has no model grader with a command, or ``grader`` is not one.
    """
    judges = model_judges(ex)
    if grader is not None:
        if grader not in judges:
            raise InputError("judge probe re-asks a model grader through its command; this "
                             "grader is not one", path=ex.params.source, item=grader,
                             fix="name a grader of kind model with a command"
                                 + (f" ({', '.join(judges)})" if judges else ""))
        return grader
    if not judges:
        raise InputError("judge probe needs a model grader with a command: the experiment "
                         "has none", path=ex.params.source, item="graders",
                         fix="declare a grader of kind model with a command")
    key = ex.params.grading.key_grader
    return key if key in judges else judges[0]


def _baseline(ex, grader: str, judge: str | None, audit: list[str], *,
              any_judge: bool = False) -> tuple[dict, int]:
    """The grader's grades of record on the audited pairs, on the rubric now: (query_id,
    chunk_id) → grade, for the pairs whose latest grade was made under judge identity
    ``judge`` (any, with ``any_judge``) or whose bank line names no identity (a legacy grade,
    recorded before identities were); and how many of them are legacy grades."""
    rows, bank = _latest(ex, grader)
    rubric_sha = ex.rubric_sha256()
    wanted = set(audit)
    out, legacy = {}, 0
    for pair, b in bank.items():
        if pair[0] not in wanted or pair not in rows or b.get("rubric_sha256") != rubric_sha:
            continue
        made_by = b.get("judge")
        if made_by is None or any_judge or made_by == judge:
            out[pair] = int(rows[pair]["grade"])
            legacy += made_by is None
    return out, legacy


def build_requests(packets: dict, base: dict, *, probes, templates, own_template,
                   samples: int) -> list[ProbeRequest]:
    """Every probe request, in the order probes, variant, sample, query, batch.

    Parameters
    ----------
    packets : dict
        query id → the judge's packet, audited queries only.
    base : dict
        The pairs to ask (their grades of record); other chunks are left out of the batches.
    probes : sequence of str
    templates : list of (tuple, jinja2.Template)
        The paraphrases (numbered 1..K in this order).
    own_template : jinja2.Template
        The judge's own template (chunk probes).
    samples : int
    """
    out = []
    for probe in probes:
        variants = list(enumerate(templates, start=1)) if probe == "paraphrase" \
            else [(0, (None, own_template))]
        for variant, (_, template) in variants:
            for s in range(samples):
                for qid, p in packets.items():
                    for b, batch in enumerate(p["batches"]):
                        chunks = [c for c in batch if (qid, str(c["chunk_id"])) in base]
                        if not chunks:
                            continue
                        if probe in CHUNK_PROBES:
                            chunks = perturb_batch(probe, chunks, query=p["query"])
                        out.append(ProbeRequest(probe=probe, variant=variant, sample=s,
                                                packet=p, batch=b, chunks=tuple(chunks),
                                                template=template))
    return out


def _compile(text: str):
    import jinja2

    from relgrade.graders.exchange import code_fence

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["code_fence"] = code_fence
    return env.from_string(text)


def run_probe(ex, grader: str | None = None, *, probes=None, runner=None) -> dict:
    """Probe a model judge on the audit sample; return the report (not yet written).

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    grader : str, optional
        The judge (see :func:`probe_grader`).
    probes : sequence of str, optional
        The probes to run (default params ``judges.probe.probes``).
    runner : optional
        What runs the grader processes (tests); default a local process runner.

    Returns
    -------
    dict
        JSON values: ``format``, ``grader``, ``judge``, ``seed`` (the paraphrase draw's
        child seed), ``stream``, the params used, ``pairs``/``queries`` probed, per probe
        its :func:`~relgrade.evaluation.robustness.flip_rate` result (``paraphrase`` adds
        ``components``, :func:`~relgrade.evaluation.robustness.variance_components`, and
        ``paraphrase_rules``, the wording chosen per rule for each paraphrase, and
        ``answer_rows``, ``{"columns": ["query_id", "chunk_id", "prompt", "sample", "grade"],
        "rows": [...]}``, every answer under a paraphrase, sorted, so the ppi stage can
        compute each query's metric under each paraphrase; ``interval_seed``, the
        bootstrap's child seed), ``rubric_sha256`` (the rubric the judge was asked on),
        ``failed``
        (probes above ``max_flip_rate``) and ``refused`` (requests refused on every attempt).

    Raises
    ------
    InputError
        An unknown probe; no model grader; no audit sample; no audited pair graded by the
        judge now; every request of a probe refused.
    """
    from relgrade.protocol.probes import PROBES

    params = judges_params(ex).probe
    chosen = list(dict.fromkeys(params.probes if probes is None else probes))
    for p in chosen:
        if p not in PROBES:
            raise InputError("unknown probe", item=p, fix=f"Use one of {', '.join(PROBES)}")
    if not chosen:
        raise InputError("judge probe needs at least one probe", item="--probe")
    grader = probe_grader(ex, grader)
    setup = graderun.grader_setup(ex.params.grader(grader), grader, path=ex.params.source,
                                  folder=ex.root, tree=ex.working_tree())
    audit = ex.audit_ids()
    if not audit:
        raise InputError("judge probe runs on the audit sample, and there is none yet",
                         path=ex.path("audit"),
                         fix=f"Run: {repro_command(ex, 'audit')}")
    judge = current_judge(ex, grader)
    base, legacy = _baseline(ex, grader, judge, audit)
    if not base:
        others, _ = _baseline(ex, grader, None, audit, any_judge=True)
        if others:
            raise InputError("no audited pair has a grade of the judge now to compare with",
                             item=grader, found=f"{len(others)} audited pairs graded under "
                             "another judge identity",
                             fix="The probe compares the judge with its own grades of record: "
                                 "restore the command, template or settings they were made "
                                 "under (relgrade judge status lists the identities)")
        raise InputError("no audited pair has a grade of the judge now to compare with",
                         item=grader, found=f"{len(audit)} audited queries",
                         fix=f"Run: relgrade grade run --grader {grader}")
    all_packets = ex.grader_packets(grader)
    packets = {q: all_packets[q] for q in audit if q in all_packets}
    own = prompt_template_text()
    seed = derive_seed(ex.params.seed, "judge-probe", grader)
    paraphrases = paraphrase_templates(own, params.paraphrases, np.random.default_rng(seed)) \
        if "paraphrase" in chosen else []
    templates = [(c, _compile(t)) for c, t in paraphrases]
    requests = build_requests(packets, base, probes=chosen, templates=templates,
                              own_template=prompt_template(), samples=setup.samples)
    identity = graderun.grader_identity(setup, template_text=own, rubric=ex.rubric(),
                                        tree=ex.working_tree())
    cache_path = ex.call_cache()
    g = ex.params.grading
    run = ask_probes(requests, setup=setup, rubric=ex.rubric(),
                     scale=ex.params.need("scale").grades,
                     max_reason_words=ex.params.need("grading.max_reason_words"),
                     max_reason_chars=g.max_reason_chars, identity=identity,
                     cache=None if cache_path is None else CallCache(cache_path), runner=runner)
    base_df = pd.DataFrame([(q, c, b) for (q, c), b in base.items()],
                           columns=["query_id", "chunk_id", "base"])
    answers = run.answers.merge(base_df, on=["query_id", "chunk_id"], how="inner")
    report = {"format": PROBE_FORMAT, "grader": grader, "judge": judge,
              "rubric_sha256": ex.rubric_sha256(),
              "seed": seed, "stream": "judge-probe", "params": params.model_dump(),
              "pairs": len(base), "queries": len({q for q, _ in base}),
              "legacy_pairs": legacy,
              "samples": setup.samples, "commands": run.commands, "cache_hits": run.cache_hits,
              "probes": {}, "refused": run.failures}
    for probe in chosen:
        a = answers[answers["probe"] == probe]
        if a.empty:
            raise InputError("every request of a probe was refused", item=probe,
                             found=run.failures[0] if run.failures else None)
        interval_seed = derive_seed(ex.params.seed, "judge-probe", grader, probe)
        r = flip_rate(a, rng=np.random.default_rng(interval_seed), resamples=params.resamples,
                      level=params.level)
        r["interval_seed"] = interval_seed
        if probe == "paraphrase":
            r["components"] = variance_components(a.rename(columns={"variant": "prompt"}))
            r["paraphrase_rules"] = [list(c) for c, _ in paraphrases]
            kept = a.rename(columns={"variant": "prompt"}).sort_values(
                ["query_id", "chunk_id", "prompt", "sample"])
            r["answer_rows"] = {"columns": ["query_id", "chunk_id", "prompt", "sample", "grade"],
                            "rows": [[str(q), str(c), int(k), int(s), int(g)] for q, c, k, s, g
                                     in kept[["query_id", "chunk_id", "prompt", "sample",
                                              "grade"]].itertuples(index=False)]}
        report["probes"][probe] = r
    report["failed"] = [p for p, r in report["probes"].items()
                        if r["flip_rate"] > params.max_flip_rate]
    return report


def _f(x, signed=False):
    if x is None:
        return "undefined"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def report_lines(report: dict) -> list[str]:
    """The report as a readable table (one row per probe) and the paraphrase components."""
    p = report["params"]
    out = [f"judge probe: {report['grader']} identity {report['judge'][:12]} on "
           f"{report['pairs']} audited pairs ({report['queries']} queries), "
           f"{report['samples']} sample(s) per request; {report['commands']} grader "
           f"processes, {report['cache_hits']} answers from the call cache",
           f"{'probe':<11} {'flip rate':>9} {'interval':>17} {'shift':>7} {'interval':>17} "
           f"{'pairs':>5}  gate (max {p['max_flip_rate']:g})"]
    for name, r in report["probes"].items():
        fi, si = r["flip_interval"], r["shift_interval"]
        gate = "FAIL" if name in report["failed"] else "ok"
        out.append(f"{name:<11} {_f(r['flip_rate']):>9} "
                   f"{'[' + _f(fi['low']) + ', ' + _f(fi['high']) + ']':>17} "
                   f"{_f(r['shift'], True):>7} "
                   f"{'[' + _f(si['low'], True) + ', ' + _f(si['high'], True) + ']':>17} "
                   f"{r['pairs']:>5}  {gate}")
    if report.get("legacy_pairs"):
        out.insert(1, f"{report['legacy_pairs']} of the {report['pairs']} grades of record "
                      "carry no judge identity (recorded before identities were): compared "
                      f"as the grades of identity {report['judge'][:12]}, the judge now; if "
                      "its command, template or settings changed since, the flips include "
                      "that change")
    para = report["probes"].get("paraphrase")
    if para:
        c = para["components"]
        resid = "" if c["residual"] is None else f", residual (sample) {c['residual']:.4f}"
        inter = "pair x prompt" + (" + residual" if c["residual"] is None else "")
        out.append(f"paraphrase variance components over {c['pairs']} pairs x {c['prompts']} "
                   f"paraphrases x {c['samples']} sample(s) (grade^2): prompt "
                   f"{c['prompt']:.4f}, pair {c['pair']:.4f}, {inter} "
                   f"{c['pair_x_prompt']:.4f}{resid}")
    for f in report["refused"]:
        out.append(f"refused on every attempt (left out): {f}")
    return out
