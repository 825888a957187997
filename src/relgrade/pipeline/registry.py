"""Every DVC stage declared once; each experiment's ``dvc.yaml`` rendered from these declarations.

A :class:`Stage` names its params keys, its data inputs and outputs (as ``${paths.NAME}`` or
other params interpolations, so the paths live in ``params.yaml`` alone) and the modes it
belongs to. Its code deps are not written down: they are the files of the import closure of
its module, :mod:`relgrade.pipeline.stages`.NAME, at module granularity (found with grimp,
the import graph import-linter uses), plus the package data files the stage reads. A stage
therefore reruns when, and only when, code it runs has changed.

An experiment's modes come from its params (:func:`modes_of`):

=========  ================================================================================
mode       when
=========  ================================================================================
single     ``grading.mode: single`` (the default): one key grader, one auditor
triage     ``grading.mode: triage``: a model grader screens, people grade its queue
raters     ``grading.mode: raters``: a rater panel with gold, aggregation, adjudication
ppi        ``grading.mode: ppi``: a model key grader on every pair, people on a uniform
           sample of queries, prediction-powered estimates (the ``ppi`` stage)
sample     ``queries.log`` is set: the ``sample`` stage draws the query set from the log
refresh    ``sample.refresh`` is set: the ``sample`` stage refreshes a slice of a kept set
tail       ``pool.tail_sample > 0``: a sampled tail beyond the pool depth
clicks     a ``clicks`` section and no protocol sections: the click stages only
gold       raters mode with ``gold.command``: the ``gold`` stage writes the gold file
holes      a ``holes`` section: arms that joined after the key froze (the ``holes`` stage)
click_*    a click experiment's parts: ``clicks.simulate`` (the log is simulated),
           ``clicks.rankings`` (IPS estimates of rankings), ``clicks.key`` (a training set)
=========  ================================================================================

The protocol's order (pool → packets → grades → agreement → gate → key → metrics) is carried
by inputs and outputs, so it is an edge of DVC's graph, never DVC's choice:
``grades`` reads the packets folder the ``packets`` stage writes.

:func:`render` gives the ``dvc.yaml`` text of an experiment; :func:`check` compares the
committed file with it (``relgrade pipeline check``, run in the test suite).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from relgrade.errors import InputError
from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import (experiment_label, find_repository, judge_scripts,
                                      probe_report_file)
from relgrade.experiment.params import PARAMS_FILE
from relgrade.io.files import read_yaml

#: Every mode a stage or an entry may be declared for.
MODES = ("single", "triage", "raters", "ppi", "sample", "refresh", "tail", "clicks", "gold",
         "click_simulation", "click_rankings", "click_key", "holes", "stop")
#: The modes of the blind-grading protocol (an experiment has exactly one of them).
PROTOCOL = frozenset({"single", "triage", "raters", "ppi"})

#: The package data files a module reads at run time, and the C source of a compiled
#: module it loads (an extension module is no node of the import graph: ``from relgrade.io
#: import _trec_scan`` counts as an import of ``relgrade.io``), as globs relative to
#: ``src/relgrade``: a stage whose import closure holds the module depends on them too.
DATA_FILES = {
    "relgrade.clicks.log": ("clicks/sql/*.sql", "clicks/_log_scan.c"),
    "relgrade.clicks.spark": ("clicks/sql/spark/*.sql",),
    "relgrade.evaluation.decision": ("evaluation/templates/*.j2",),
    "relgrade.graders.exchange": ("prompts/grader.md",),
    "relgrade.io.trec_scan": ("io/_trec_scan.c",),
    "relgrade.pipeline.design": ("pipeline/templates/DESIGN.md.j2",),
    "relgrade.pipeline.scaffold": ("pipeline/templates/*",),
    "relgrade.web.app": ("web/templates/*", "web/static/*"),
}

#: The first lines of every rendered ``dvc.yaml``.
HEADER = """\
# Rendered by `relgrade pipeline render` from the stage registry
# (src/relgrade/pipeline/registry.py) and this folder's params.yaml: do not edit by hand.
# `relgrade pipeline check` (run by the test suite) fails when this file differs from its
# rendering. Paths come from params.yaml's `paths`; each stage's code deps are the files of
# its module's import closure. Outputs kept in git (cache: false) persist: dvc leaves them
# in place when a stage fails, so a refused run (bad params, pending work) deletes nothing
# committed; a stage that succeeds rewrites them whole.
"""


@dataclass(frozen=True)
class Entry:
    """One dep or output of a stage.

    Attributes
    ----------
    path : str
        The path as dvc.yaml holds it, usually a params interpolation (``${paths.pool}``).
    modes : frozenset of str or None
        The modes the entry belongs to; None: every mode of its stage.
    cache, persist : bool
        dvc's flags of an output (``cache: false`` keeps it in git; ``persist: true``
        leaves it in place while the stage reruns or fails).
    plot : dict or None
        For a plots output: its template, x and y.
    """

    path: str
    modes: frozenset | None = None
    cache: bool = True
    persist: bool = False
    plot: dict | None = None

    def options(self) -> dict:
        """The dvc.yaml options of this output (empty for a plain cached output)."""
        opts: dict = {}
        if not self.cache:
            opts["cache"] = False
        if self.persist:
            opts["persist"] = True
        return opts | dict(self.plot or {})


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline.

    Attributes
    ----------
    name : str
        The stage's name in dvc.yaml (a verb or noun of the protocol).
    module : str
        Its module under :mod:`relgrade.pipeline.stages` and its entry script
        ``stages/MODULE.py``.
    modes : frozenset of str
        The modes the stage belongs to.
    params : tuple of str or Entry
        The params keys it reads.
    deps : tuple of str or Entry
        Its data inputs.
    outs, metrics, plots : tuple of str or Entry
        What it writes.
    per_arm : bool
        The stage runs once per arm (``foreach: ${arms}``; ``${key}`` is the arm).
    resources : tuple of str
        Package data files it reads, relative to ``src/relgrade``.
    doc : str
        One comment line or a few, written above the stage.
    """

    name: str
    module: str
    modes: frozenset
    params: tuple = ()
    deps: tuple = ()
    outs: tuple = ()
    metrics: tuple = ()
    plots: tuple = ()
    per_arm: bool = False
    resources: tuple = ()
    doc: str = ""


def _e(path: str, *modes: str, cache: bool = True, persist: bool = False, **plot) -> Entry:
    return Entry(path, frozenset(modes) if modes else None, cache, persist, plot or None)


def _kept(path: str, *modes: str) -> Entry:
    """An output kept in git and left in place while its stage reruns or fails."""
    return _e(path, *modes, cache=False, persist=True)


_GRADING = frozenset({"single", "triage", "raters", "ppi"})
_PROVENANCE_AUDIT = ("single", "triage", "raters")  # ppi mode draws a uniform human sample
_ALL = frozenset(m for m in MODES if not m.startswith("click"))
_CLICKS = frozenset({"clicks"})
_MODE = ("triage", "raters")
#: ``grading.stop`` in every ppi experiment (the only mode it may be turned on in), not only
#: once it is on: a stage that reads the audited queries (``Experiment.audit_ids``) or the
#: stopping rule's record behaves differently with it, so turning it on by hand reruns the
#: stage, whose check of the pipeline's shape (:mod:`relgrade.pipeline.runner`) then names
#: ``relgrade pipeline render``. DVC refuses a listed key that params.yaml lacks, so
#: ``relgrade init`` writes ``grading.stop: none`` into a ppi experiment's params.
_STOP = _e("grading.stop", "ppi")
#: What the stages before the ppi stage depend on in place of the stopping rule's record: the
#: queries the rule reads now (:meth:`relgrade.experiment.files.Experiment.stop_reads_path`),
#: rewritten by the audit and ppi stages only when that list changes. They read the record
#: itself (``Experiment.audit_ids``); the list changes whenever what they read from it does,
#: but not when a look settles on the queries they already read, so the run that settles
#: leaves them current (the ppi stage, which writes the looks, keeps the record as its dep).
_READS = _e("${paths.stop}.reads", "stop")


def stages() -> tuple[Stage, ...]:
    """Every stage of every mode, in the protocol's order.

    Returns
    -------
    tuple of Stage
    """
    return (
        Stage("sample", "sample", frozenset({"sample"}),
              params=("seed", "queries.log", "sample.n", "sample.allocation", "sample.head_share",
                      "sample.torso_share", _e("sample.refresh", "refresh")),
              deps=("${queries.log}", _e("${sample.refresh.previous}", "refresh")),
              outs=(_kept("${queries.input}"), _kept("${paths.sample_manifest}")),
              doc="The query set drawn from the query log: head/torso/tail strata, traffic weights."),
        Stage("corpus", "corpus", _ALL,
              params=("corpus.input", _e("corpus.allow_empty", "allow_empty")),
              deps=("${corpus.input}",),
              outs=("${paths.chunks}", _kept("${paths.corpus_manifest}")),
              doc="The pinned corpus source, sha256-checked and chunked."),
        Stage("queries", "queries", _ALL, params=("queries.input", "queries.groups"),
              deps=("${queries.input}",),
              outs=("${paths.queries}", _kept("${paths.queries_manifest}")),
              doc="The query file, validated, with its sha256."),
        Stage("retrieve", "retrieve", _ALL, per_arm=True,
              params=("arms", "runs.ties"),  # a fused arm reads the params of the arms it fuses
              deps=("${item.source}", "${paths.chunks}", "${paths.queries}"),
              outs=("${paths.runs}/${key}.trec",),
              doc="One arm's run over the chunks and queries (TREC run format)."),
        Stage("pool", "pool", _ALL,
              params=("seed", "pool.depth", "pool.tail_sample", "pool.tail_depth", "arms",
                      "runs.ties"),
              deps=("${paths.runs}", "${paths.queries}", "${paths.chunks}"),
              outs=("${paths.pool}", _kept("${paths.pool_manifest}"), "${paths.provenance}",
                    _kept("${paths.pool_stats}")),
              doc="Every arm's top results per query, deduplicated; provenance stays private."),
        Stage("intents", "intents", _ALL, params=("intents.input", "intents.review"),
              deps=("${intents.input}", "${intents.review}", "${paths.queries}"),
              outs=("${paths.intents}", _kept("${paths.intents_manifest}")),
              doc="The reviewed intent table, frozen before any packet exists."),
        Stage("audit", "audit", _ALL,
              params=("seed", _e("audit.fraction", *_PROVENANCE_AUDIT),
                      _e("audit.min_queries", *_PROVENANCE_AUDIT), "grading.round",
                      _e("grading.mode", "ppi"), _e("ppi", "ppi"),  # the sample's size
                      _STOP, _e("grading.stop_batch", "stop"),
                      _e("grading.stop_margin", "stop")),  # the stopping rule's record
              deps=("${paths.provenance}", "${paths.pool_manifest}", "${paths.queries}"),
              outs=(_kept("${paths.audit}"), _kept("${paths.audit_lock}")),
              doc="The audit queries (in ppi mode the human sample: a seeded uniform draw of "
                  "queries), drawn once per round and locked (the lock is in git; "
                  "`relgrade audit redraw` rewrites it)."),
        Stage("gold", "gold", frozenset({"gold"}), params=("gold.command", "gold.deps"),
              deps=("${paths.pool}",), outs=("${gold.input}",),
              doc="The gold file written from the pool by params gold.command (a cached "
                  "output: private, rebuilt in a fresh clone, never in git)."),
        Stage("packets", "packets", _ALL,
              params=("seed", "grading.round", "grading.regrade", "grading.batch_size",
                      "grading.rubric_version", "grading.key_grader", "grading.auditor",
                      "graders", "scale.grades", "scale.relevant_min", _e("grading.mode", *_MODE),
                      _e("triage", "triage"), _e("raters.per_pair", "raters"),
                      _e("gold", "raters"),  # a rater removed on gold is dealt no more
                      _STOP, _e("grading.stop_batch", "stop")),
              deps=("${paths.pool}", "${paths.pool_manifest}", "${paths.chunks}",
                    "${paths.intents}", "${paths.intents_manifest}", "${paths.audit}",
                    "${grading.rubric}", _READS,
                    "${paths.grades_in}",  # a partial regrade holds the pairs graded relevant
                    _e("${gold.input}", "raters")),
              outs=("${paths.packets}", "${paths.orders}", _e("${paths.assignment}", "raters"),
                    _e("${paths.triage_queue}", "triage")),  # private: model grades
              doc="One packet per query and role, at most five chunks a batch, in seeded "
                  "orders; the folder records the pool version it was built for."),
        Stage("grades", "grades", _ALL,
              params=("scale.grades", "scale.relevant_min", "grading.round", "grading.regrade",
                      "grading.rubric_version", "grading.max_reason_words",
                      "grading.key_grader", "grading.auditor", "graders",
                      "gates.audit_coverage_min", _e("grading.mode", *_MODE),
                      _e("triage", "triage"), _e("seed", "triage"),
                      _e("gold", "raters"),  # a rater removed on gold owes nothing
                      _STOP, _e("grading.stop_batch", "stop")),
              deps=("${paths.packets}",  # the protocol's order: packets before grades
                    "${paths.grades_in}", "${paths.pool}", "${paths.chunks}", "${paths.intents}",
                    "${paths.intents_manifest}", "${paths.audit}", "${grading.rubric}",
                    _e("${paths.assignment}", "raters"), _e("${paths.triage_queue}", "triage"),
                    _e("${gold.input}", "raters"), _READS),
              outs=(_e("${paths.grades}", "single", "triage", "ppi"),
                    _e("${paths.rater_grades}", "raters"), _kept("${paths.grades_manifest}")),
              doc="The current grades of the pool from the judgment bank, or the pending "
                  "work (what each grader owes and the command to run)."),
        Stage("aggregate", "aggregate", frozenset({"raters"}),
              params=("seed", "scale.grades", "grading.round", "grading.batch_size",
                      "grading.rubric_version", "graders", "raters.per_pair", "gold",
                      "aggregation", "adjudication"),
              deps=("${paths.rater_grades}", "${paths.assignment}", "${paths.pool}",
                    "${paths.chunks}", "${paths.intents}", "${paths.intents_manifest}",
                    "${gold.input}"),
              outs=(_kept("${paths.aggregate}"), "${paths.aggregated}",
                    _kept("${paths.adjudication_queue}"),
                    "${paths.adjudication_packets}"),
              doc="Gold accuracy, rater removal and one aggregated grade per pair; the "
                  "adjudication queue."),
        Stage("adjudicate", "adjudicate", frozenset({"raters"}),
              params=("grading.key_grader", "grading.round", "adjudication.expert"),
              deps=("${paths.rater_grades}", "${paths.aggregated}", "${paths.adjudication_queue}"),
              outs=("${paths.grades}", _kept("${paths.adjudication}")),
              doc="The expert's grades replace the aggregate on the queued pairs."),
        Stage("agreement", "agreement", _ALL,
              params=("seed", "scale.grades", "scale.relevant_min", "grading.key_grader",
                      "grading.auditor", "grading.round", "agreement.bootstrap",
                      "agreement.level", _STOP),
              deps=("${paths.grades}", "${paths.grades_in}", "${paths.audit}", "${paths.queries}",
                    "${paths.orders}", _READS),
              outs=("${paths.disagreements}", _kept("${paths.diagnostics}"),
                    _kept("${paths.agreement}")),
              plots=(_e("${paths.confusion}", cache=False, persist=True, template="confusion",
                        x="grader", y="auditor"),),
              doc="The key grader against the auditor on the audit sample (kept in git; "
                  "`dvc metrics show metrics/agreement.json` prints it)."),
        Stage("gate", "gate", _ALL,
              params=("gates.weighted_kappa_min", "gates.binary_kappa_min",
                      "gates.disagreement_max", "gates.two_step_max",
                      "gates.audit_coverage_min", "gates.require_distinct_families",
                      "grading.key_grader", "grading.auditor", "grading.round",
                      "graders", "arms", _e("grading.mode", "triage", "ppi"), _STOP),
              deps=("${paths.agreement}", "${paths.pool}", "${paths.grades}", "${paths.audit}",
                    _e("${paths.triage_queue}", "triage"), _READS),
              outs=(_kept("${paths.gate}"),),
              doc="Agreement gates, a complete audit and the family rule; a fail stops the "
                  "pipeline (and the stage removes the pass record; a refusal before the "
                  "gates are checked, bad params say, leaves it)."),
        Stage("key", "key", _ALL,
              params=("scale.relevant_min", "grading.key_grader", "grading.round",
                      "grading.rubric", "grading.rubric_version", "grading.post_hoc",
                      "grading.deviations", "graders", _e("grading.mode", "triage", "ppi"),
                      _e("triage", "triage"), _e("seed", "triage"),
                      _e("grading.auditor", "ppi")),
              deps=("${paths.grades}", "${paths.grades_manifest}", "${paths.grades_in}",
                    "${paths.gate}", "${paths.pool_manifest}", "${paths.corpus_manifest}",
                    "${paths.queries_manifest}", "${paths.intents_manifest}", "${paths.chunks}",
                    "${paths.intents}", "${grading.rubric}",
                    _e("${paths.triage_queue}", "triage"), _e("${paths.audit_lock}", "ppi")),
              outs=(_kept("${paths.key}"), _kept("${paths.qrels}"), _kept("${paths.record}"),
                    _kept("${paths.key_made_on}"), _kept("${paths.key_post_hoc}"),
                    _kept("${paths.key_previous}"), _kept("${paths.triage_key}", "triage")),
              doc="The frozen key after a passed gate: sorted, sha256-hashed, with its record. "
                  "The ledger and metrics files are read as witnesses of earlier use, not "
                  "deps (they are written after the key)."),
        Stage("metrics", "metrics", _ALL, per_arm=True,
              params=("pool.tail_sample", "scale.relevant_min", "metrics.cutoffs",
                      "metrics.weighted", "runs.ties"),
              deps=("${paths.key}", "${paths.qrels}", "${paths.record}", "${paths.key_post_hoc}",
                    "${paths.runs}/${key}.trec", "${paths.queries}",
                    "${paths.pool}"),  # inclusion probabilities, for infNDCG and xinfAP
              outs=(_e("${paths.per_query}/${key}.parquet", persist=True),
                    _kept("${paths.metrics_post_hoc}/${key}"),
                    _kept("${paths.metrics}/${key}.json")),
              doc="One arm's measures on the frozen key; the key's use goes to the ledger first."),
        Stage("publish", "publish", _ALL,
              deps=("${paths.key}", "${paths.qrels}", "${paths.record}", "${paths.metrics}",
                    "${paths.queries}", "${paths.intents}", "${paths.chunks}", "${paths.grades}"),
              outs=("${paths.publish}",),
              doc="The public bundle, written only if it holds no private text."),
        Stage("compare", "compare", _ALL,
              params=("seed", "metrics.cutoffs", "metrics.bootstrap", "metrics.permutations",
                      "metrics.level", "metrics.baseline", "metrics.min_relative_change",
                      "metrics.power", "metrics.alpha", "metrics.interval", "metrics.pairs",
                      "metrics.weighted", "metrics.primary", "pool.depth", "scale.relevant_min",
                      "runs.ties", "grading.auditor", "grading.round", _e("grading.mode", *_MODE),
                      _STOP),
              deps=("${paths.per_query}", "${paths.key}", "${paths.qrels}", "${paths.record}",
                    "${paths.runs}", "${paths.grades}", "${paths.audit}", "${paths.provenance}",
                    "${paths.queries}", _e("${paths.pool}", "tail"),
                    _e("${paths.ppi}", "ppi")),  # in ppi mode PPI++ decides
              outs=(_kept("${paths.comparisons}"), _kept("${paths.arms_plot}"),
                    _kept("${paths.deltas_plot}")),
              doc="Intervals, paired tests with Holm's correction, pool bias and label noise; "
                  "in ppi mode PPI++ decides (the ppi stage's estimates), the model key's "
                  "numbers beside it."),
        Stage("ppi", "ppi", frozenset({"ppi"}),
              params=("seed", "ppi", "metrics.primary", "metrics.cutoffs", "metrics.bootstrap",
                      "scale.relevant_min", "metrics.baseline", "metrics.pairs",
                      "runs.ties", "grading.key_grader", "grading.auditor", "grading.round",
                      "graders", "arms", "cost", _STOP, _e("grading.stop_batch", "stop"),
                      _e("grading.stop_margin", "stop")),
              deps=("${paths.per_query}", "${paths.key}", "${paths.record}", "${paths.grades}",
                    "${paths.audit}", "${paths.audit_lock}", "${paths.runs}", "${paths.pool}",
                    "${paths.queries}", _e("${paths.stop}", "stop")),
              # the budget curve is an output here and a plot at the top, where its axes are
              outs=(_kept("${paths.ppi_budget}"),),
              metrics=(_e("${paths.ppi}", cache=False, persist=True),),
              doc="Prediction-powered estimates per arm and paired difference (model key on "
                  "every query, rectified on the human sample) beside model-only and "
                  "human-only; the judge audit per arm; the judging-budget curve."),
        Stage("holes", "holes", frozenset({"holes"}),
              params=("seed", "holes", "metrics.primary", "scale", "runs.ties", "graders",
                      "grading.rubric", "grading.rubric_version", "grading.batch_size",
                      "grading.max_reason_words"),
              deps=("${paths.key}", "${paths.qrels}", "${paths.record}", "${paths.queries}",
                    "${paths.chunks}", "${paths.intents}", "${paths.intents_manifest}",
                    "${paths.grades}", "${paths.per_query}", "${grading.rubric}"),
              # the work folder holds the holes' packets and the grades recorded for them: a
              # grade recorded there changes the output, so dvc repro reruns the stage
              # the record is kept in git; its decision file is the dvc metric (report stage)
              outs=(_kept("${paths.holes_work}"), _kept("${paths.holes}")),
              doc="Arms that joined after the key froze (params holes.arms): their holes "
                  "graded by the model grader, a seeded sample of hole queries by people, "
                  "each arm's PPI++ estimate, hole rate and transport verdict."),
        Stage("report", "report", _ALL,
              params=("metrics.primary", "runs.ties", "scale.relevant_min", "cost", "graders",
                      _e("grading.mode", "ppi")),
              deps=("${paths.comparisons}", "${paths.key}", "${paths.qrels}", "${paths.record}",
                    "${paths.key_previous}", "${paths.runs}", "${paths.grades_manifest}",
                    "${paths.metrics}",  # each arm's mean under the frozen key, beside ...
                    "${paths.key_post_hoc}", "${paths.metrics_post_hoc}",  # ... the post-hoc
                    _e("${paths.ppi}", "ppi"), _e("${paths.holes}", "holes")),
              outs=(_kept("${paths.report_md}"), _kept("${paths.report_html}"),
                    _kept("${paths.decision}")),
              doc="The decision report and one small file per arm (the dvc metrics)."),
        Stage("simulate", "click_simulate", frozenset({"click_simulation"}),
              params=("seed", "clicks.simulate", "clicks.log", "clicks.rankings", "clicks.key"),
              outs=("${clicks.log}", _kept("data/clicks/truth.json"),
                    _kept("${clicks.rankings}"), _kept("${clicks.key}")),
              doc="A seeded, labelled-simulated click log with its truth."),
        Stage("propensity", "propensity", _CLICKS,
              params=("seed", "clicks.log", "clicks.method", "clicks.max_position",
                      "clicks.bootstrap", "clicks.level"),
              deps=("${clicks.log}",),
              metrics=(_kept("${paths.click_propensity}"),),
              plots=(_e("${paths.click_propensity_plot}", cache=False, persist=True,
                        x="position", y="propensity"),),
              doc="The position propensity curve of the click log."),
        Stage("ips", "ips", frozenset({"click_rankings"}),
              params=("seed", "clicks.clip", "clicks.bootstrap", "clicks.level"),
              deps=("${clicks.log}", "${clicks.rankings}", "${paths.click_propensity}"),
              metrics=(_kept("${paths.click_ips}"),),
              doc="IPS and self-normalised IPS estimates of each ranking."),
        Stage("pairs", "click_pairs", _CLICKS, params=("clicks.clip",),
              deps=("${clicks.log}", "${paths.click_propensity}"),
              outs=("${paths.click_pairs}",),
              doc="IPS-weighted skip-above preference pairs."),
        Stage("training_set", "training_set", frozenset({"click_key"}),
              params=("clicks.key", "clicks.exclude_eval_queries"),
              deps=("${clicks.key}", "${paths.click_pairs}"),
              outs=(_kept("${paths.training_set}"),),
              doc="The key's grades and the click pairs, as one training set."),
    )


def modes_of(ex: Experiment) -> frozenset:
    """The modes of an experiment, from its params (see the module's table).

    Parameters
    ----------
    ex : Experiment

    Returns
    -------
    frozenset of str
        Exactly one of ``single``, ``triage``, ``raters``, ``ppi``, plus ``sample``,
        ``refresh``, ``tail``, ``gold``, ``holes``, ``stop`` and ``allow_empty`` (params.yaml
        sets ``corpus.allow_empty``) when they apply; or, for a click experiment,
        ``clicks`` with the ``click_*`` parts it has.
    """
    p = ex.params
    if p.clicks is not None and p.corpus is None:
        parts = {"click_simulation": p.clicks.simulate is not None,
                 "click_rankings": bool(p.clicks.rankings), "click_key": bool(p.clicks.key)}
        return frozenset({"clicks", *(k for k, on in parts.items() if on)})
    modes = {p.grading.mode}
    if p.queries is not None and p.queries.log:
        modes.add("sample")
        if p.sample is not None and p.sample.refresh is not None:
            modes.add("refresh")
    if p.pool is not None and p.pool.tail_sample > 0:
        modes.add("tail")
    if p.grading.mode == "raters" and p.gold is not None and p.gold.command:
        modes.add("gold")
    if p.holes is not None:
        modes.add("holes")
    if p.grading.stop != "none":
        modes.add("stop")
    # DVC refuses a listed key that params.yaml lacks: the corpus stage lists
    # ``corpus.allow_empty`` only where params.yaml sets it (``relgrade init --allow-empty``)
    if p.corpus is not None and "allow_empty" in p.corpus.model_fields_set:
        modes.add("allow_empty")
    return frozenset(modes)


def _applies(entry, modes: frozenset) -> bool:
    return not isinstance(entry, Entry) or entry.modes is None or bool(entry.modes & modes)


def _path(entry) -> str:
    return entry.path if isinstance(entry, Entry) else entry


def _module_file(module: str) -> str:
    """The file of ``relgrade.X.Y`` as the repository names it: ``src/relgrade/X/Y.py`` or
    ``src/relgrade/X/Y/__init__.py`` (a package or not, as installed)."""
    import relgrade

    installed = Path(relgrade.__file__).parent.joinpath(*module.split(".")[1:])
    parts = "/".join(module.split("."))
    return f"src/{parts}/__init__.py" if installed.is_dir() else f"src/{parts}.py"


def import_closure(module: str, graph) -> list[str]:
    """Every relgrade module that runs when ``module`` is imported and run.

    Parameters
    ----------
    module : str
        A dotted module name (``relgrade.pipeline.stages.pool``).
    graph : grimp.ImportGraph
        The import graph of the ``relgrade`` package (every import statement, including those
        inside functions).

    Returns
    -------
    list of str
        Sorted module names: ``module``, what it imports, transitively, and every package
        above each of them (importing ``a.b.c`` runs ``a/__init__.py`` and
        ``a/b/__init__.py``), with what those import.
    """
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(graph.find_modules_directly_imported_by(name) - seen)
        parent = name.rpartition(".")[0]
        if parent:
            todo.append(parent)
    return sorted(seen)


def code_deps(stage: Stage, graph, *, src: Path, root_rel: str) -> list[str]:
    """A stage's code deps: its entry script, the files of its module's import closure and
    its package data files, as paths relative to the experiment's folder.

    Parameters
    ----------
    stage : Stage
    graph : grimp.ImportGraph
        See :func:`import_closure`.
    src : pathlib.Path
        The repository's ``src`` folder (unused: files are named as the installed package
        lays them out, ``src/relgrade/...``).
    root_rel : str
        The repository's folder relative to the experiment's ("" at the top, else
        ``../..``-like, no trailing slash).
    """
    prefix = f"{root_rel}/" if root_rel else ""
    # the entry script imports the stage's module and the stage runner (with its check)
    closure = sorted(set(import_closure(f"relgrade.pipeline.stages.{stage.module}", graph))
                     | set(import_closure("relgrade.pipeline.runner", graph)))
    files = [_module_file(m) for m in closure]
    data = [g for m in closure for g in DATA_FILES.get(m, ())] + list(stage.resources)
    import relgrade

    package = Path(relgrade.__file__).parent
    files += [f"src/relgrade/{p.relative_to(package).as_posix()}" for g in data
              for p in package.glob(g) if p.is_file()]
    return [f"{prefix}stages/{stage.module}.py", *(prefix + f for f in sorted(set(files)))]


def import_graph():
    """The import graph of the installed ``relgrade`` package (grimp)."""
    import grimp

    return grimp.build_graph("relgrade", cache_dir=None)


def _share_deps(ex: Experiment) -> list[str]:
    """The grade folders of the share sources (params ``grading.share_from``), relative to
    the experiment: the stages that read the judgment bank depend on them."""
    out = []
    for entry in ex.params.grading.share_from:
        folder = ex.root / entry
        raw = read_yaml(folder / PARAMS_FILE) if (folder / PARAMS_FILE).is_file() else {}
        grades_in = ((raw or {}).get("paths") or {}).get("grades_in") or "data/grades"
        out.append(Path(os.path.normpath(Path(entry) / grades_in)).as_posix())
    return out


def _fused_file_sources(ex: Experiment) -> list[str]:
    """The runs of the file arms that an rrf arm fuses: every retrieve stage reads them
    (DVC's foreach gives each arm the same deps)."""
    arms = ex.params.arms_dict()
    fused = {str(f) for a in arms.values() if a.get("kind") == "rrf" for f in a.get("fuse") or []}
    return sorted({str(arms[f]["source"]) for f in fused
                   if f in arms and arms[f].get("kind") == "file"})


def probe_report_deps(ex: Experiment) -> list[str]:
    """The key grader's probe report (``judges/probe-GRADER.json``, relative to the
    experiment's folder) when it exists: the ppi stage widens its intervals by it, so
    ``relgrade judge probe`` renders the pipeline again after writing it."""
    grader = ex.params.grading.key_grader
    if not grader:
        return []
    path = probe_report_file(ex.root, grader)
    return [path.relative_to(Path(ex.root)).as_posix()] if path.is_file() else []


def _outputs(entries: Iterable, modes: frozenset) -> list:
    out = []
    for e in entries:
        if not _applies(e, modes):
            continue
        opts = e.options() if isinstance(e, Entry) else {}
        out.append({_path(e): opts} if opts else _path(e))
    return out


def stage_body(stage: Stage, ex: Experiment, modes: frozenset, *, graph, src: Path,
               root_rel: str) -> dict:
    """The dvc.yaml mapping of one stage for experiment ``ex`` (its ``do`` part for a
    per-arm stage); ``graph`` None leaves the code deps out (:func:`shape`)."""
    prefix = f"{root_rel}/" if root_rel else ""
    cmd = f"python {prefix}stages/{stage.module}.py" + (" ${key}" if stage.per_arm else "")
    deps = (code_deps(stage, graph, src=src, root_rel=root_rel) if graph is not None
            else [])
    deps += [_path(d) for d in stage.deps if _applies(d, modes)]
    if stage.name == "retrieve":
        deps += [s for s in _fused_file_sources(ex) if s not in deps]
    if stage.name == "holes":  # the run files of the arms that joined after the freeze
        deps += [str(a.source) for _, a in sorted(ex.params.holes.arms.items())]
    if stage.name == "gold":  # what the gold command reads, as params list it
        deps += [str(d) for d in ex.params.gold.deps if str(d) not in deps]
    params = [_path(p) for p in stage.params if _applies(p, modes)]
    if stage.name in ("gate", "ppi") and ex.params.judges is not None:
        # whether a calibration owed stops the stage, its age and the re-check's size, key by
        # key: the probe's settings (judges.probe) are the probe command's, and rerun no stage,
        # but for judges.probe.widen, which the ppi stage reads
        params += [f"judges.{k}" for k in ("max_age_days", "require_calibration", "recheck")
                   if k in ex.params.judges.as_dict()]
        if stage.name == "ppi" and "widen" in ex.params.judges.as_dict().get("probe", {}):
            params.append("judges.probe.widen")
        # the key judges' scripts: an edited template or script is a new judge identity,
        # whose calibration (or re-check) the stage names as owed
        deps += [d for d in judge_scripts(ex) if d not in deps]
    if stage.name == "ppi":  # the key grader's probe report, once relgrade judge probe wrote it
        deps += probe_report_deps(ex)
    if stage.name in ("grades", "key"):  # what decides which grades a revision kept current
        deps += [d for d in _revision_deps(ex) if d not in deps]
    if stage.name in ("packets", "grades") and ex.params.grading.share_from:
        deps += _share_deps(ex)
        params.append("grading.share_from")
    body: dict = {"cmd": cmd, "deps": deps}
    if params:
        body["params"] = params
    for kind in ("outs", "metrics", "plots"):
        entries = _outputs(getattr(stage, kind), modes)
        if entries:
            body[kind] = entries
    return body


def _revision_deps(ex: Experiment) -> list[str]:
    """The disputes file (params ``paths.disputes``) and the rubric's folder: the versions a
    revision revises and the revision log sit beside the rubric
    (:mod:`relgrade.experiment.revisions`), and whether a grade made under an earlier rubric is
    current is decided from them. The folder, not the files of the chain, so a revision
    written in it leaves the pipeline's shape as it was.

    The disputes file is a dep only once it exists: the first dispute filed creates it, and
    ``relgrade disputes import`` (and the grading page) render the pipeline again then
    (:mod:`relgrade.pipeline.disputes`). Before that no dispute exists, so nothing of it can
    decide a grade's staleness; and DVC neither fails on a missing dep nor warns on an empty
    one."""
    out = (["${paths.disputes}"] if ex.params.paths.disputes
           and ex.path("disputes").is_file() else [])
    if ex.params.grading.rubric:
        folder = Path(ex.params.grading.rubric).parent.as_posix()
        if folder not in ("", "."):
            out.append(folder)
    return out


def render(ex: Experiment, *, repo: Path | None = None, name: str | None = None,
           code: bool = True) -> str:
    """The ``dvc.yaml`` text of experiment ``ex``.

    Parameters
    ----------
    ex : Experiment
        The experiment; its params decide the modes and the interpolated paths.
    repo : pathlib.Path, optional
        The repository's folder (default: found upward from ``ex.root``).
    name : str, optional
        The experiment's name in plot titles (default: from its folder; ``relgrade init``
        gives it while the folder is still being written under a temporary name).
    code : bool, default True
        False leaves every stage's code deps out (no import graph is built): what
        :func:`shape` compares.

    Returns
    -------
    str
        The file's text: :data:`HEADER`, the stages of the experiment's modes in the
        protocol's order, and for a grading experiment the top-level ``metrics`` and
        ``plots`` sections.

    Raises
    ------
    InputError
        ``ex.root`` is not inside a relgrade repository.
    """
    repo = Path(repo) if repo is not None else find_repository(ex.root)
    root_rel = Path(os.path.relpath(repo.resolve(), Path(ex.root).resolve())).as_posix()
    root_rel = "" if root_rel == "." else root_rel
    modes = modes_of(ex)
    graph = import_graph() if code else None
    src = repo / "src"
    parts = [HEADER, "stages:\n"]
    for stage in stages():
        if not stage.modes & modes:
            continue
        body = stage_body(stage, ex, modes, graph=graph, src=src, root_rel=root_rel)
        if stage.per_arm:
            body = {"foreach": "${arms}", "do": body}
        text = yaml.safe_dump({stage.name: body}, sort_keys=False, width=100,
                              default_flow_style=False)
        comment = "".join(f"  # {line}\n" for line in _wrap(stage.doc))
        parts.append(comment + "".join(f"  {line}\n" for line in text.splitlines()) + "\n")
    if "clicks" not in modes:
        top = _TOP + (_TOP_PPI if "ppi" in modes else "")
        # the title is a single-quoted YAML scalar: a quote in the name is doubled
        name = (name or experiment_label(ex.root, repo)).replace("'", "''")
        parts.append(top.replace("{experiment}", name))
    return "".join(parts).rstrip("\n") + "\n"


_TOP = """\
# `dvc metrics show` lists one row per arm: the primary measure's mean and interval, its
# Judged@k and the difference from the baseline with its Holm-adjusted p-value.
metrics:
  - ${paths.decision}

# Plots read by `dvc plots show` (templates in .dvc/plots/, drawn offline through
# .dvc/config's plots.html_template), titled by experiment: `dvc plots show` at the top draws
# every experiment's. `relgrade metrics plots` draws this experiment's only.
plots:
  - ${paths.arms_plot}:
      template: ci_bars
      title: '{experiment}: mean per arm with its bootstrap confidence interval'
  - ${paths.deltas_plot}:
      template: delta_curve
      title: '{experiment}: per-query difference against the baseline, largest first'
"""


_TOP_PPI = """\
  - ${paths.ppi_budget}:
      x: budget
      y: [ppi_tau, uniform_tau, maxmean_tau, mtf_tau, ppi_top_half_tau, ppi_verdicts]
      title: '{experiment}: judging budget (share of the human judgments) against the full
        human-sample decision'
"""


def _wrap(text: str, width: int = 94) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) if text else []


@dataclass(frozen=True)
class Difference:
    """A committed ``dvc.yaml`` that differs from its rendering.

    Attributes
    ----------
    path : pathlib.Path
        The committed file.
    diff : list of str
        Unified diff lines, committed → rendered.
    """

    path: Path
    diff: list = field(default_factory=list)


def check(folder) -> Difference | None:
    """Compare an experiment's committed ``dvc.yaml`` with its rendering.

    Parameters
    ----------
    folder : str or os.PathLike
        The experiment's folder (holding ``params.yaml``).

    Returns
    -------
    Difference or None
        None when the file equals its rendering byte for byte.

    Raises
    ------
    InputError
        The folder has no ``params.yaml`` or its params are invalid.
    """
    folder = Path(folder)
    ex = Experiment.load(folder / PARAMS_FILE)
    want = render(ex)
    path = folder / "dvc.yaml"
    have = path.read_text("utf-8") if path.is_file() else ""
    if have == want:
        return None
    diff = list(difflib.unified_diff(have.splitlines(), want.splitlines(),
                                     fromfile=f"{path} (committed)",
                                     tofile=f"{path} (rendered)", lineterm=""))
    return Difference(path, diff)


def _without_code(pipeline: dict, root_rel: str) -> dict:
    """``pipeline`` (a loaded dvc.yaml) with each stage's code deps (its entry script and
    ``src/relgrade/`` files) left out."""
    prefix = f"{root_rel}/" if root_rel else ""
    code = (f"{prefix}stages/", f"{prefix}src/relgrade/")
    out = dict(pipeline)
    stages_ = {}
    for name, stage in (pipeline.get("stages") or {}).items():
        stage = dict(stage)
        body = dict(stage.get("do", stage))
        body["deps"] = [d for d in body.get("deps") or []
                        if not (isinstance(d, str) and d.startswith(code))]
        if "do" in stage:
            stage["do"] = body
        else:
            stage = body
        stages_[name] = stage
    out["stages"] = stages_
    return out


def shape(folder, *, ex=None, repo=None) -> list[str] | None:
    """Whether an experiment's ``dvc.yaml`` has the shape its params give, cheaply.

    The shape is everything :func:`render` writes except the code deps: the stages of the
    experiment's modes, their params, data deps (a fused arm's external runs, the share
    sources, the gold command's inputs) and outputs. It changes with the params (an arm, a
    mode, ``grading.share_from``), never with the code, and comparing it builds no import
    graph: every stage DVC runs makes this check first (:mod:`relgrade.pipeline.runner`),
    so a params edit that was not rendered stops ``dvc repro`` at its first stage.

    Parameters
    ----------
    folder : str or os.PathLike
        The experiment's folder, holding ``params.yaml`` and ``dvc.yaml``.
    ex : relgrade.experiment.files.Experiment, optional
        The experiment of ``folder``'s params, when the caller has loaded it.
    repo : pathlib.Path, optional
        The repository's top (:func:`relgrade.experiment.layout.find_repository` of the
        experiment), when the caller has found it.

    Returns
    -------
    list of str or None
        None when the shapes agree (or the folder has no ``dvc.yaml``); else the names of
        the stages that differ (added, removed or changed), ``metrics``/``plots`` for the
        top-level sections.

    Raises
    ------
    InputError
        The params are invalid; the folder is not inside a relgrade repository.
    """
    folder = Path(folder)
    path = folder / "dvc.yaml"
    if not path.is_file():
        return None
    ex = Experiment.load(folder / PARAMS_FILE) if ex is None else ex
    repo = find_repository(ex.root) if repo is None else Path(repo)
    root_rel = Path(os.path.relpath(repo.resolve(), Path(ex.root).resolve())).as_posix()
    root_rel = "" if root_rel == "." else root_rel
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when built with it
    want = yaml.load(render(ex, repo=repo, code=False), Loader=loader)
    have = _without_code(yaml.load(path.read_text("utf-8"), Loader=loader) or {}, root_rel)
    if have == want:
        return None
    names = []
    for name in dict.fromkeys([*(want.get("stages") or {}), *(have.get("stages") or {})]):
        if (want.get("stages") or {}).get(name) != (have.get("stages") or {}).get(name):
            names.append(name)
    names += [k for k in ("metrics", "plots") if want.get(k) != have.get(k)]
    return names or ["dvc.yaml"]


def require_experiment(folder) -> Path:
    """``folder`` if it holds an experiment's ``params.yaml``, else an :class:`InputError`."""
    folder = Path(folder)
    if not (folder / PARAMS_FILE).is_file():
        raise InputError("not an experiment folder (no params.yaml)", path=folder,
                         fix="Give the repository's top folder or experiments/NAME")
    return folder
