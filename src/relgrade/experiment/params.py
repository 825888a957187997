"""The experiment's params (``params.yaml``), typed and checked once, when they are read.

:func:`load_params` reads the file and returns a :class:`Params`: one pydantic model per
section (``seed``, ``paths``, ``scale``, ``corpus``, ``queries``, ``arms``, ``runs``,
``pool``, ``intents``, ``audit``, ``grading``, ``graders``, ``gates``, ``metrics``,
``clicks``, ``cost``, ``triage``). Every
value is checked against its allowed range before any stage or command does work, and a
bad one is one :class:`~relgrade.errors.InputError` naming the params file that was read,
the key path (``grading.batch_size``), what was found and what is allowed::

    params.yaml: seed: must be an integer >= 0 (found -1)

An unknown key (a typo such as ``gate:`` for ``gates:``) is refused in the top level and in
every section whose keys relgrade knows. Sections are optional in the file (a command reads
only the ones it needs); :meth:`Params.need` refuses a missing one by name.

This module is the only code that reads params; library functions take the typed values.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from relgrade.errors import InputError, found_clause
from relgrade.evaluation.settings import Settings
from relgrade.io.files import read_yaml
from relgrade.schema import check_scale
from relgrade.text import check_free_text, hidden_at

#: The params file a stage script or command reads unless told otherwise.
PARAMS_FILE = Path("params.yaml")


# --- value types ---------------------------------------------------------------------


def _number(*, integer: bool, ge=None, gt=None, le=None, lt=None, what: str | None = None):
    """A number type with its allowed range; the value is kept exactly as written."""
    bounds = [f">= {ge}" if ge is not None else None, f"> {gt}" if gt is not None else None,
              f"<= {le}" if le is not None else None, f"< {lt}" if lt is not None else None]
    text = " and ".join(b for b in bounds if b)
    if what is None:
        what = f"{'an integer' if integer else 'a number'} {text}".strip()

    def check(value):
        ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
        ok = ok and (integer or math.isfinite(value))
        ok = ok and (ge is None or value >= ge) and (gt is None or value > gt)
        ok = ok and (le is None or value <= le) and (lt is None or value < lt)
        if not ok:
            raise PydanticCustomError("relgrade_value", "must be {allowed}", {"allowed": what})
        return value

    return PlainValidator(check, json_schema_input_type=int if integer else float)


def _flag(value):
    if not isinstance(value, bool):
        raise PydanticCustomError("relgrade_value", "must be {allowed}",
                                  {"allowed": "true or false"})
    return value


Seed = Annotated[int, _number(integer=True, ge=0)]
Positive = Annotated[int, _number(integer=True, ge=1)]
NonNegative = Annotated[int, _number(integer=True, ge=0)]
Share = Annotated[float, _number(integer=False, ge=0, le=1, what="a number in [0, 1]")]
Probability = Annotated[float, _number(integer=False, gt=0, lt=1, what="a number in (0, 1)")]
Flag = Annotated[bool, PlainValidator(_flag, json_schema_input_type=bool)]

#: What an environment variable's name may be (POSIX: letters, digits, ``_``, no digit first).
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _env_keys(value):
    """A list of distinct environment variable names (params ``graders.NAME.env_keys``)."""
    allowed = "a list of distinct environment variable names (letters, digits and _)"
    if not isinstance(value, list) or not all(
            isinstance(v, str) and re.match(ENV_NAME, v) for v in value) \
            or len(set(value)) != len(value):
        raise PydanticCustomError("relgrade_value", "must be {allowed}", {"allowed": allowed})
    return value


EnvKeys = Annotated[list[str], PlainValidator(_env_keys, json_schema_input_type=list)]


class _Section(BaseModel):
    """A params section: unknown keys refused, values kept as written."""

    # built when first used, not at import: a section nested in Params is built once, as
    # part of Params' validator, not also as a validator of its own (about 0.03 CPU-s of
    # every process that loads params; benchmarks/README.md, "Pooling")
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def as_dict(self) -> dict:
        """The section as the plain mapping it was written as (keys not given are left out)."""
        return self.model_dump(exclude_unset=True)


# --- sections ------------------------------------------------------------------------


class Paths(_Section):
    """``paths``: where every stage reads and writes, relative to the params file's folder."""

    chunks: str | None = None
    corpus_manifest: str | None = None
    queries: str | None = None
    queries_manifest: str | None = None
    sample_manifest: str | None = None
    runs: str | None = None
    pool: str | None = None
    pool_manifest: str | None = None
    provenance: str | None = None
    pool_stats: str | None = None
    intents: str | None = None
    intents_manifest: str | None = None
    audit: str | None = None
    audit_lock: str | None = None
    # the stopping rule's record (grading.stop: anytime)
    stop: str | None = None
    packets: str | None = None
    orders: str | None = None
    grades_in: str | None = None
    grades: str | None = None
    grades_manifest: str | None = None
    agreement: str | None = None
    confusion: str | None = None
    diagnostics: str | None = None
    disagreements: str | None = None
    gate: str | None = None
    key: str | None = None
    key_made_on: str | None = None
    qrels: str | None = None
    record: str | None = None
    key_post_hoc: str | None = None
    key_previous: str | None = None
    ledger: str | None = None
    metrics: str | None = None
    per_query: str | None = None
    metrics_post_hoc: str | None = None
    comparisons: str | None = None
    arms_plot: str | None = None
    deltas_plot: str | None = None
    report_md: str | None = None
    report_html: str | None = None
    decision: str | None = None
    publish: str | None = None
    click_propensity: str | None = None
    click_propensity_plot: str | None = None
    click_ips: str | None = None
    click_pairs: str | None = None
    training_set: str | None = None
    triage_queue: str | None = None
    triage_key: str | None = None
    # prediction-powered estimates (grading.mode: ppi)
    ppi: str | None = None
    ppi_budget: str | None = None
    # arms that joined after the key froze (a `holes` section)
    holes: str | None = None
    holes_work: str | None = None
    # a rater panel (grading.mode: raters)
    assignment: str | None = None
    rater_grades: str | None = None
    aggregate: str | None = None
    aggregated: str | None = None
    adjudication_queue: str | None = None
    adjudication_packets: str | None = None
    adjudication: str | None = None
    # grading at scale: every accepted grader answer, by request (private: holds reasons)
    call_cache: str | None = None
    # disputes filed against the rubric (git-tracked, append-only; docs/disputes.md)
    disputes: str | None = None


class Scale(_Section):
    """``scale``: the grades allowed and the smallest grade read as relevant."""

    grades: list[Annotated[int, _number(integer=True, ge=0)]] = Field(min_length=2)
    relevant_min: NonNegative = 1

    @model_validator(mode="after")
    def _relevant_on_the_scale(self):
        # the rule the key stage applies (schema.check_scale), checked when params load
        try:
            check_scale(self.grades, relevant_min=self.relevant_min)
        except InputError as e:
            raise PydanticCustomError("relgrade_scale", "{rule}",
                                      {"rule": str(e).rstrip(".")}) from None
        return self


class Corpus(_Section):
    """``corpus``: the source spec or chunks file; whether an empty corpus is allowed."""

    input: str
    allow_empty: Flag = False


#: The longest query group name, in characters.
MAX_GROUP_CHARS = 100


class Queries(_Section):
    """``queries``: the query file and the query groups it may use.

    With ``log`` (a query log: TSV, Parquet or JSONL with ``query`` and ``count``, or one
    query per line), the ``sample`` stage draws the query set from it into ``input``.
    """

    input: str
    groups: list[str] = Field(min_length=1)
    log: str | None = None

    @model_validator(mode="after")
    def _plain_groups(self):
        for group in self.groups:
            try:
                check_free_text(group, limit=MAX_GROUP_CHARS, what="a group name")
            except ValueError as e:
                raise PydanticCustomError("relgrade_group", "queries.groups: {rule}",
                                          {"rule": str(e)}) from None
            if hidden_at(group) is not None:
                raise PydanticCustomError(
                    "relgrade_group", "queries.groups: a group name holds no control, format "
                    "or line-separator character (found {found})",
                    {"found": repr(group)})
        return self


class SampleRefresh(_Section):
    """``sample.refresh``: the query set is a refresh of ``previous``, not a fresh draw.

    The ``sample`` stage keeps ``1 - share`` of the set in ``previous`` and draws the rest
    from ``queries.log`` (see :mod:`relgrade.query_sampling.refresh`); ``relgrade queries
    refresh`` writes this section. Keep it while the refreshed set is in use: without it the
    stage draws a whole new set.
    """

    share: Probability
    previous: str


class Sample(_Section):
    """``sample``: how the query set is drawn from ``queries.log`` (stage ``sample``).

    ``n`` distinct queries, split over head, torso and tail by ``allocation`` (``equal``,
    ``proportional`` or a mapping ``{head: a, torso: b, tail: c}`` of relative shares); the
    strata cut the traffic at ``head_share`` and ``head_share + torso_share``. The seed is
    derived from the experiment's ``seed`` (see :mod:`relgrade.query_sampling`).
    """

    n: Positive
    allocation: Literal["equal", "proportional"] | dict[str, Annotated[
        float, _number(integer=False, ge=0, what="a number >= 0")]] = "equal"
    head_share: Annotated[float, _number(integer=False, gt=0, lt=1,
                                         what="a number in (0, 1)")] = 0.5
    torso_share: Annotated[float, _number(integer=False, gt=0, lt=1,
                                          what="a number in (0, 1)")] = 0.3
    refresh: SampleRefresh | None = None


class Drift(_Section):
    """``drift``: what ``relgrade drift`` tolerates and how it resamples.

    ``max_shift``: the total variation distance between the query set's and the current
    log's strata above which the set is flagged; ``bootstrap`` resamples of the log's issued
    queries give the distance's interval at ``level``
    (see :mod:`relgrade.query_sampling.drift`).
    """

    max_shift: Probability = 0.1
    bootstrap: Positive = 2000
    level: Probability = 0.95


class _Arm(_Section):
    depth: Positive
    source: str | None = None
    family: str | None = None


class Bm25Arm(_Arm):
    """An arm ranked by BM25 (``k1``, ``b`` optional)."""

    kind: Literal["bm25"]
    k1: Annotated[float, _number(integer=False, ge=0)] | None = None
    b: Share | None = None


class Bm25fArm(_Arm):
    """An arm ranked by BM25F over header and text (``header_weight``, ``k1``, ``b`` optional)."""

    kind: Literal["bm25f"]
    header_weight: Annotated[int, _number(integer=True, ge=1, what="an integer >= 1")] = 3
    k1: Annotated[float, _number(integer=False, ge=0)] | None = None
    b: Share | None = None


class TfidfArm(_Arm):
    """An arm ranked by TF-IDF cosine similarity."""

    kind: Literal["tfidf"]


class EmbedArm(_Arm):
    """An arm ranked by sentence embeddings (the ``embed`` extra)."""

    kind: Literal["embed"]


class RrfArm(_Arm):
    """Reciprocal rank fusion of the computed arms in ``fuse``."""

    kind: Literal["rrf"]
    fuse: list[str] = Field(min_length=1)
    k: Annotated[float, _number(integer=False, ge=0)] = 60
    fuse_depth: Positive | None = None


class FileArm(_Arm):
    """An external run read from ``source``."""

    kind: Literal["file"]
    source: str = Field(min_length=1)


Arm = Annotated[Bm25Arm | Bm25fArm | TfidfArm | RrfArm | FileArm | EmbedArm, Field(discriminator="kind")]
ARM_KINDS = ("bm25", "bm25f", "tfidf", "rrf", "file", "embed")


class Runs(_Section):
    """``runs``: how ties in a run are broken."""

    ties: Literal["score", "rank"] = "score"


class Pool(_Section):
    """``pool``: depth per arm, the optional random tail sample, and the engine that reads,
    checks and cuts the runs (``local``, or ``spark`` on ``spark_master``: the same
    outputs, see docs/experiments.md)."""

    depth: Positive
    tail_sample: NonNegative = 0
    tail_depth: Positive | None = None
    engine: Literal["local", "spark"] = "local"
    spark_master: str | None = None


class Intents(_Section):
    """``intents``: the intent table and its review record."""

    input: str
    review: str


class Audit(_Section):
    """``audit``: the share and the least number of queries double graded."""

    fraction: Annotated[float, _number(integer=False, gt=0, le=1, what="a number in (0, 1]")]
    min_queries: Positive


class Grading(_Section):
    """``grading``: rubric, round, batch size, reason length, key grader and auditor."""

    rubric: str | None = None
    rubric_version: str | None = None
    round: Positive = 1
    batch_size: Annotated[int, _number(integer=True, ge=1, le=5, what="an integer from 1 to 5")] = 5
    max_reason_words: Positive | None = None
    max_reason_chars: Positive = 300
    key_grader: str | None = None
    auditor: str | None = None
    post_hoc: Flag = False
    #: ``all``: the round regrades the whole pool blind; ``relevant``: only the pairs graded
    #: >= 1 in the previous round (the protocol's partial regrade), merged with its 0s.
    regrade: Literal["all", "relevant"] = "all"
    deviations: list[str] = Field(default_factory=list)
    #: ``single``: one key grader grades every pair (today's protocol); ``triage``: a model
    #: grader of role ``triage`` grades every pair and people grade what it marks relevant
    #: plus a sample of its 0s (see the ``triage`` section and docs/triage.md); ``raters``: a
    #: panel of graders with role ``rater`` grades each pair ``raters.per_pair`` times and the
    #: key grader's grades are the aggregation stage's output (see docs/raters.md); ``ppi``:
    #: the key grader (a model) grades every pair, the auditor (people, or a designated
    #: trusted grader) grades a seeded uniform sample of queries in full, and the ``ppi``
    #: stage gives prediction-powered estimates (see the ``ppi`` section and docs/ppi.md).
    mode: Literal["single", "triage", "raters", "ppi"] = "single"
    #: Other experiments whose judgment banks this one reuses, each a folder relative to this
    #: experiment's (``../other``; ``../..`` for the repository's top experiment): their
    #: current grades count for the grader of the same name here (see docs/experiments.md).
    share_from: list[str] = Field(default_factory=list)
    #: The most a ``grade run`` may spend, in the currency units of the ``prices`` table
    #: (> 0; needs a price for the grader): the request that would cross it is not sent
    #: (see docs/grading-at-scale.md).
    max_cost: Annotated[float, _number(integer=False, gt=0, what="a cost > 0")] | None = None
    #: ``none``: people grade the whole human sample; ``anytime``: they grade it in a seeded
    #: order, ``stop_batch`` queries at a time, and stop once an anytime-valid confidence
    #: sequence settles every Holm verdict (ppi mode; see docs/ppi.md, "Stopping early").
    stop: Literal["none", "anytime"] = "none"
    #: Queries people grade between two looks of the stopping rule (>= 1).
    stop_batch: Positive = 5
    #: Indifference margin of the stopping rule, in the measure's units (>= 0): a difference
    #: whose sequence lies within [-margin, margin] is settled as "no difference that
    #: matters"; 0 settles only by significance.
    stop_margin: Annotated[float, _number(integer=False, ge=0, le=1,
                                          what="a number in [0, 1]")] = 0.0


class Price(_Section):
    """``prices.NAME``: what a grader (or a model) costs, per 1000 tokens, in currency units."""

    input_per_1k: Annotated[float, _number(integer=False, ge=0, what="a price >= 0")]
    output_per_1k: Annotated[float, _number(integer=False, ge=0, what="a price >= 0")]


class Raters(_Section):
    """``raters``: how many raters grade each pair (``grading.mode: raters``)."""

    per_pair: Annotated[int, _number(integer=True, ge=3, le=5, what="an integer from 3 to 5")]


class Gold(_Section):
    """``gold``: pairs with known grades hidden in every rater's queue.

    ``input`` is the gold file (``query_id``, ``chunk_id``, ``grade``; pool pairs only),
    private: kept under ``data/private/`` and tracked by DVC, never by git; ``fraction`` the
    share of the pool drawn as gold questions, and so of each rater's queue (a gold question
    goes to ``raters.per_pair`` raters like any pool pair); a rater whose gold
    accuracy (exact) is below ``min_accuracy`` on at least ``min_gold`` gold answers is
    removed; ``within_one`` adds the within-one-grade accuracy to the report.
    """

    input: str
    fraction: Annotated[float, _number(integer=False, gt=0, le=0.5,
                                       what="a number in (0, 0.5]")]
    min_accuracy: Share = 0.6
    min_gold: NonNegative = 3
    within_one: Flag = True
    #: A command (run in the experiment's folder, after the pool stage) that writes the gold
    #: file ``input`` from the pool: the ``gold`` stage runs it, so the gold file is a
    #: DVC-cached output, rebuilt in a fresh clone and never kept in git.
    command: str | None = None
    #: Files the command reads (its script, a truth table), relative to the experiment: the
    #: ``gold`` stage depends on them.
    deps: list[str] = Field(default_factory=list)


class Aggregation(_Section):
    """``aggregation``: majority vote or Dawid-Skene, and Dawid-Skene's stopping rule."""

    method: Literal["majority", "dawid-skene"] = "majority"
    tol: Annotated[float, _number(integer=False, ge=0)] = 1e-7
    max_iter: Positive = 2000


class Adjudication(_Section):
    """``adjudication``: which pairs an expert resolves, and who.

    A pair goes to the ``expert`` (a grader with role ``expert``) when its kept raters'
    grades lie more than ``max_spread`` apart, or when a majority vote ties.
    """

    max_spread: NonNegative = 1
    expert: str | None = None


class Grader(BaseModel):
    """``graders.NAME``: one grader's setup.

    ``role`` and ``kind`` are checked here, and the settings of grading at scale:
    ``executor`` (``local`` or ``ray``), ``address`` (a Ray cluster), ``model_id`` (the
    provider's model for batch files), ``max_tokens`` and ``temperature``, and ``env_keys``:
    the environment variables the grader's command reads (distinct names; their values are
    part of its call cache key, and with ``executor: ray`` they are sent to each task, see
    :mod:`relgrade.graders.cache`), and ``identity_keys``: further settings of the entry that
    decide its answers (part of its judge identity). Further settings
    (``family``, ``model``, ``person``, ``command``, ``timeout``, ``retries``, ``workers``,
    ``samples``, ``input``, ``token``, ``connect_timeout``) are kept as written and checked by the code that uses
    them.
    """

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    role: Literal["grader", "auditor", "triage", "rater", "expert"]
    kind: Literal["model", "human", "import"]
    executor: Literal["local", "ray"] | None = None
    address: str | None = None
    model_id: str | None = None
    max_tokens: Positive | None = None
    temperature: Annotated[float, _number(integer=False, ge=0, le=2,
                                          what="a number in [0, 2]")] | None = None
    env_keys: EnvKeys | None = None
    #: Further settings of this entry that decide the grader's answers (say ``temperature``
    #: read by its command): their values are part of its judge identity.
    identity_keys: list[str] | None = None

    def as_dict(self) -> dict:
        """The grader's entry as the plain mapping it was written as."""
        return self.model_dump(exclude_unset=True)


class Triage(_Section):
    """``triage``: LLM triage (``grading.mode: triage``, see :mod:`relgrade.protocol.triage`).

    ``grader`` names the model grader of role ``triage`` that grades every pool pair (the
    only grader of that role when left out); ``zero_sample`` is the share of its 0s that
    people grade, in (0, 1]; ``level`` the confidence level of its miss-rate interval. The
    sample is drawn with the experiment ``seed``.
    """

    grader: str | None = None
    zero_sample: Annotated[float, _number(integer=False, gt=0, le=1,
                                          what="a number in (0, 1]")]
    level: Probability = 0.95


class PPIJudgeAudit(_Section):
    """``ppi.judge_audit``: the leniency spread flagged (grades) and the arms' depth audited."""

    max_spread: Annotated[float, _number(integer=False, ge=0)] = 0.15
    k: Positive = 10
    bootstrap: Annotated[int, _number(integer=True, ge=100)] = 1000


#: Default budgets of the judging-budget curve (shares of the human judgments).
BUDGET_FRACTIONS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]


class PPIBudget(_Section):
    """``ppi.budget``: the shares of the human judgments the budget curve replays."""

    fractions: list[Annotated[float, _number(integer=False, gt=0, le=1,
                                             what="a number in (0, 1]")]] = Field(
        default_factory=lambda: list(BUDGET_FRACTIONS), min_length=1)


class PPI(_Section):
    """``ppi``: prediction-powered estimates (``grading.mode: ppi``, see docs/ppi.md).

    The human sample is a seeded uniform draw of queries (seed derived from ``seed``):
    ``human_fraction`` of them, in (0, 1], or ``human_queries`` of them (at least 3, for
    every interval kind: the ppi stage's rank-sets need 3, as ``relgrade init`` does; a
    fraction that gives fewer on the pool is refused by the audit stage before it draws);
    give one. ``level`` is the confidence level of every interval and ``1 - level`` the
    family-wise error rate of the Holm verdicts; ``interval`` is ``jackknife`` (the default:
    one lambda shared by the arms and, per difference, the smaller of one lambda shared by
    the differences and the difference's own, the jackknife variance that
    counts its tuning on the sample, Student's t on n - 1 degrees of freedom, never wider
    than human-only; it holds its level at 20 sample queries in benchmarks/README.md),
    ``regression`` (lambda per arm, PPI++'s small-sample regression variance, Student's t
    on n - 2), ``t`` (unbiased variances and Student's t on
    n - 1 degrees of freedom) or ``normal`` (ppi-python's plug-in interval).
    ``measures`` defaults to ``metrics.primary``.
    """

    human_fraction: Annotated[float, _number(integer=False, gt=0, le=1,
                                             what="a number in (0, 1]")] | None = None
    human_queries: Annotated[int, _number(integer=True, ge=3,
                                          what="an integer >= 3 (the ppi stage's intervals "
                                               "and rank-sets need 3 queries)")] | None = None
    level: Probability = 0.95
    interval: Literal["jackknife", "regression", "t", "normal"] = "jackknife"
    measures: list[str] | None = None
    judge_audit: PPIJudgeAudit = Field(default_factory=PPIJudgeAudit)
    budget: PPIBudget = Field(default_factory=PPIBudget)

    @model_validator(mode="after")
    def _one_size(self):
        if (self.human_fraction is None) == (self.human_queries is None):
            raise PydanticCustomError(
                "relgrade_ppi", "give exactly one of ppi.human_fraction and ppi.human_queries "
                "(found {found})", {"found": "both" if self.human_fraction is not None
                                    else "neither"})
        return self


class Gates(_Section):
    """``gates``: the agreement thresholds, each in [0, 1]; the audit's coverage; the family rule.

    ``audit_coverage_min`` is the least share of the audited queries' pool pairs graded by
    both the key grader and the auditor (the protocol asks for all of them: 1.0).
    ``require_distinct_families`` makes the model-family rule (auditor of another family
    than the graders, graders of another family than the arms) a failure, not a warning.
    """

    weighted_kappa_min: Share
    binary_kappa_min: Share
    disagreement_max: Share
    two_step_max: Share
    audit_coverage_min: Share = 1.0
    require_distinct_families: Flag = False

    def thresholds(self) -> dict:
        """Every gate with its value in force (defaults included), for the gate stage."""
        return self.model_dump()


class Metrics(_Section):
    """``metrics``: cutoffs, resampling, confidence and test levels, baseline, design."""

    cutoffs: list[Positive] = Field(min_length=1)
    bootstrap: Annotated[int, _number(integer=True, ge=1000)] = 10_000
    permutations: Annotated[int, _number(integer=True, ge=1000)] | None = None
    level: Probability = 0.95
    baseline: str | None = None
    min_relative_change: Annotated[float, _number(integer=False, gt=0)] = 0.02
    power: Probability = 0.8
    alpha: Probability = 0.05
    #: ``auto``: Student t below 30 queries off the most common value, the studentized
    #: bootstrap from there (docs/report.md, benchmarks/README.md); or one method by name.
    interval: Literal["auto", "t", "bootstrap-t", "bca", "percentile"] = "auto"
    #: The verdict's test: ``mean`` (the mean difference is 0) or ``sign-flip`` (each
    #: difference symmetric about 0, the randomization test's assumption).
    test: Literal["mean", "sign-flip"] = "mean"
    #: Power and queries-needed figures only when the spread rests on at least this many
    #: non-zero differences; below, the report says the set cannot yet tell.
    power_min_nonzero: Annotated[int, _number(integer=True, ge=2)] = 10
    pairs: Literal["baseline", "all"] | None = None
    weighted: Flag = False
    primary: str | None = None


class Agreement(_Section):
    """``agreement``: the bootstrap intervals of the agreement statistics.

    Resamples of judged pairs (``bootstrap``) and the confidence ``level``; the seed is
    derived from the experiment's ``seed`` and recorded in ``metrics/agreement.json``.
    """

    bootstrap: Annotated[int, _number(integer=True, ge=1000)] = 2000
    level: Probability = 0.95


class ClickSimulation(_Section):
    """``clicks.simulate``: the seeded position-based simulation that writes a labelled
    simulated log, its true p(k) = 1/k and relevances (see :mod:`relgrade.clicks.simulate`)."""

    sessions: Positive
    queries: Positive
    positions: Annotated[int, _number(integer=True, ge=2)]
    rankers: Positive = 3
    randomized_share: Share = 0.0


class Clicks(_Section):
    """``clicks``: the click log and how its propensities, IPS estimates, pairs and training
    set are made (see docs/clicks.md)."""

    log: str
    method: Literal["randomization", "harvesting"] = "randomization"
    max_position: Annotated[int, _number(integer=True, ge=2)] = 10
    bootstrap: Positive = 1000
    level: Probability = 0.95
    clip: Annotated[float, _number(integer=False, ge=1)] = 10.0
    rankings: str | None = None
    key: str | None = None
    exclude_eval_queries: Flag = True
    memory_limit: str | None = None
    engine: Literal["duckdb", "spark"] = "duckdb"
    spark_master: str | None = None
    simulate: ClickSimulation | None = None


class Cost(_Section):
    """``cost``: what one judgment costs a grader, in seconds (the protocol's ≈ 30 s).

    A grader may override it with ``graders.NAME.seconds_per_judgment``
    (see :mod:`relgrade.pipeline.cost`).
    """

    seconds_per_judgment: Annotated[float, _number(integer=False, gt=0)] = 30


class JudgesProbe(_Section):
    """``judges.probe``: the robustness battery of ``relgrade judge probe`` (docs/judges.md).

    ``probes`` are run on the audit sample: ``paraphrase`` asks under ``paraphrases``
    seeded rewordings of the prompt template (seed derived from ``seed``), the others under
    perturbed chunks. A probe whose flip rate exceeds ``max_flip_rate`` fails the command;
    the intervals resample queries ``resamples`` times at ``level``. With ``widen`` (the
    default) the ppi stage widens its PPI++ intervals by the paraphrase component of the
    key grader's report, when that report was measured under the judge identity now
    (docs/ppi.md); ``widen: false`` records the component and widens nothing.
    """

    probes: list[Literal["paraphrase", "stuff", "inject", "pad", "reverse"]] = Field(
        default_factory=lambda: ["paraphrase", "stuff", "inject", "pad", "reverse"],
        min_length=1)
    paraphrases: Annotated[int, _number(integer=True, ge=2)] = 4
    max_flip_rate: Share = 0.1
    resamples: Annotated[int, _number(integer=True, ge=100)] = 1000
    level: Probability = 0.95
    widen: Flag = True


class Recheck(_Section):
    """``judges.recheck``: the size of a judge's targeted re-check (see docs/judges.md).

    People re-check a sample of the key judge's graded pairs stratified by its grade, sized
    so that the weighted kappa's interval at ``level`` has half-width ``kappa_halfwidth``
    (:func:`relgrade.protocol.recheck.plan_recheck`), held within ``[min_pairs,
    max_pairs]``; without a recorded confusion to plan with, people are assumed to give the
    judge's grade with probability ``planning_agreement``.
    """

    kappa_halfwidth: Annotated[float, _number(integer=False, gt=0, le=1)] = 0.08
    level: Annotated[float, _number(integer=False, gt=0, lt=1)] = 0.95
    min_pairs: Annotated[int, _number(integer=True, gt=0)] = 50
    max_pairs: Annotated[int, _number(integer=True, gt=0)] = 400
    planning_agreement: Annotated[float, _number(integer=False, gt=0, lt=1)] = 0.75

    @model_validator(mode="after")
    def _floor_below_ceiling(self):
        if self.min_pairs > self.max_pairs:
            raise PydanticCustomError(
                "relgrade_scale", "{rule}",
                {"rule": f"min_pairs ({self.min_pairs}) must not exceed max_pairs "
                         f"({self.max_pairs})"})
        return self


class Judges(_Section):
    """``judges``: how long a model judge's calibration against people holds, and how large
    its re-check is.

    A calibration in the judges' ledger (``judges/ledger.jsonl``, see docs/judges.md)
    measured more than ``max_age_days`` days before now is stale: the judge owes a re-check.
    A model judge of the key with no calibration, or a stale one, is printed as pending work
    by the gate and ppi stages; with ``require_calibration`` they stop there (exit 3) until
    it is recorded. ``recheck`` sizes the re-check (:class:`Recheck`).
    """

    max_age_days: Annotated[float, _number(integer=False, gt=0)] = 90
    require_calibration: Flag = False
    probe: JudgesProbe = Field(default_factory=JudgesProbe)
    recheck: Recheck = Field(default_factory=Recheck)


class Holes(_Section):
    """``holes``: arms that joined after the key froze, scored on the frozen key with their
    holes graded (see docs/new-arm.md).

    ``arms`` are run files (kind ``file``), kept out of ``arms`` so that the pool, the key and
    every old arm's numbers stay as they are; ``model_grader`` grades every hole of the
    measure's cutoff, ``human_grader`` every hole of a seeded uniform sample of
    ``human_fraction`` of the queries with holes (seed derived from ``seed``). The transport
    check refuses the level claim when the model grader's bias on the sampled holes differs
    from its bias on the old arms' pairs by more than ``transport_tolerance`` grades at
    ``transport_alpha``. ``measure`` defaults to ``metrics.primary``; ``level`` is the
    confidence level of every interval.
    """

    arms: dict[str, FileArm] = Field(min_length=1)
    model_grader: str = Field(min_length=1)
    human_grader: str = Field(min_length=1)
    human_fraction: Annotated[float, _number(integer=False, gt=0, le=1,
                                             what="a number in (0, 1]")]
    transport_alpha: Probability = 0.05
    transport_tolerance: Annotated[float, _number(integer=False, ge=0)] = 0.1
    measure: str | None = None
    level: Probability = 0.95


_SECTIONS: dict[str, type[BaseModel]] = {
    "paths": Paths, "scale": Scale, "corpus": Corpus, "queries": Queries, "runs": Runs,
    "pool": Pool, "intents": Intents, "audit": Audit, "grading": Grading, "gates": Gates,
    "metrics": Metrics, "clicks": Clicks, "cost": Cost, "judges": Judges, "agreement": Agreement,
    "sample": Sample, "triage": Triage, "raters": Raters, "gold": Gold,
    "aggregation": Aggregation, "adjudication": Adjudication, "ppi": PPI, "holes": Holes}


# --- the whole file ------------------------------------------------------------------


class Params(BaseModel):
    """The experiment's params, every section typed.

    Attributes
    ----------
    source : pathlib.Path
        The params file that was read (named in every error about it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: Seed | None = None
    paths: Paths
    scale: Scale | None = None
    corpus: Corpus | None = None
    queries: Queries | None = None
    arms: dict[str, Arm] | None = None
    runs: Runs = Field(default_factory=Runs)
    pool: Pool | None = None
    intents: Intents | None = None
    audit: Audit | None = None
    grading: Grading = Field(default_factory=Grading)
    graders: dict[str, Grader] = Field(default_factory=dict)
    gates: Gates | None = None
    metrics: Metrics | None = None
    clicks: Clicks | None = None
    cost: Cost = Field(default_factory=Cost)
    judges: Judges | None = None
    agreement: Agreement = Field(default_factory=Agreement)
    sample: Sample | None = None
    drift: Drift | None = None
    triage: Triage | None = None
    raters: Raters | None = None
    gold: Gold | None = None
    aggregation: Aggregation = Field(default_factory=Aggregation)
    adjudication: Adjudication = Field(default_factory=Adjudication)
    ppi: PPI | None = None
    holes: Holes | None = None
    prices: dict[str, Price] = Field(default_factory=dict)

    _source: Path = PrivateAttr(default=PARAMS_FILE)

    @model_validator(mode="after")
    def _fused_arms_exist(self):
        for name, arm in (self.arms or {}).items():
            if isinstance(arm, RrfArm):
                for other in arm.fuse:
                    if other not in self.arms:
                        raise PydanticCustomError(
                            "relgrade_arm", "arms.{name}.fuse names {other}, which is not an "
                            "arm", {"name": name, "other": other})
        return self

    @model_validator(mode="after")
    def _triage_has_its_grader(self):
        if self.grading.mode != "triage":
            return self
        if self.triage is None:
            raise PydanticCustomError(
                "relgrade_triage", "grading.mode is triage but there is no `triage` section: "
                "set triage.zero_sample (and triage.grader)", {})
        name = self.triage_grader_name()
        if name is None:
            several = sorted(n for n, g in self.graders.items() if g.role == "triage")
            if several:
                raise PydanticCustomError(
                    "relgrade_triage", "several graders have role triage ({names}): name "
                    "the one that grades the pool in triage.grader",
                    {"names": ", ".join(several)})
            raise PydanticCustomError(
                "relgrade_triage", "grading.mode is triage but no grader has role triage: "
                "declare the model grader under graders with role: triage", {})
        grader = self.graders.get(name)
        if grader is None or grader.role != "triage":
            found = "not declared" if grader is None else f"role {grader.role}"
            raise PydanticCustomError(
                "relgrade_triage", "triage.grader {name} must be a grader with role triage "
                "(found {found})", {"name": name, "found": found})
        if self.grading.regrade != "all":
            raise PydanticCustomError(
                "relgrade_triage", "grading.regrade relevant cannot be combined with "
                "grading.mode triage: a triage round regrades through the model", {})
        if self.grading.key_grader == name:
            raise PydanticCustomError(
                "relgrade_triage", "grading.key_grader {name} is the triage grader: people "
                "grade the triage queue, so the key grader must be another grader",
                {"name": name})
        return self

    def triage_grader_name(self) -> str | None:
        """The triage grader: ``triage.grader``, else the only grader of role ``triage``."""
        if self.triage is not None and self.triage.grader:
            return self.triage.grader
        named = sorted(n for n, g in self.graders.items() if g.role == "triage")
        return named[0] if len(named) == 1 else None

    @model_validator(mode="after")
    def _stop_has_a_human_sample(self):
        if self.grading.stop != "none" and self.grading.mode != "ppi":
            raise PydanticCustomError(
                "relgrade_stop", "grading.stop: {stop} needs a human sample to stop on: set "
                "grading.mode: ppi (found mode {mode})",
                {"stop": self.grading.stop, "mode": self.grading.mode})
        if self.grading.stop != "none" and self.paths.stop is None:
            raise PydanticCustomError(
                "relgrade_stop", "grading.stop: {stop} needs paths.stop, the file that records "
                "the grading order and the rule's looks (e.g. data/audit/stop.json)",
                {"stop": self.grading.stop})
        return self

    @model_validator(mode="after")
    def _ppi_has_its_sample(self):
        if self.grading.mode != "ppi":
            return self
        if self.ppi is None:
            raise PydanticCustomError(
                "relgrade_ppi", "grading.mode is ppi but there is no `ppi` section: set "
                "ppi.human_fraction (or ppi.human_queries)", {})
        key, auditor = self.grading.key_grader, self.grading.auditor
        if not key or not auditor:
            raise PydanticCustomError(
                "relgrade_ppi", "grading.mode ppi needs grading.key_grader (the model grader "
                "that grades every pair) and grading.auditor (who grades the human sample)",
                {})
        if key == auditor:
            raise PydanticCustomError(
                "relgrade_ppi", "grading.auditor {name} is also the key grader: in ppi mode "
                "the human sample must be graded by another grader than the model grader "
                "(found both {name})", {"name": key})
        if self.grading.regrade != "all":
            raise PydanticCustomError(
                "relgrade_ppi", "grading.regrade must be all when grading.mode is ppi: the "
                "human sample is graded in full (found {regrade})",
                {"regrade": repr(self.grading.regrade)})
        return self

    @model_validator(mode="after")
    def _holes_are_new_arms(self):
        if self.holes is None:
            return self
        h = self.holes
        if self.grading.mode == "ppi":
            raise PydanticCustomError(
                "relgrade_holes", "a holes section needs a key graded by people: in ppi mode "
                "the key is the model grader's (add the arm to arms and grade its pairs)", {})
        for name in sorted(h.arms):
            if name in (self.arms or {}):
                raise PydanticCustomError(
                    "relgrade_holes", "holes.arms.{name} is also under arms: an arm that "
                    "joined after the key froze stays out of arms, so the pool and the key "
                    "stay as they are", {"name": name})
        for what, name in (("model_grader", h.model_grader), ("human_grader", h.human_grader)):
            if name not in self.graders:
                raise PydanticCustomError(
                    "relgrade_holes", "holes.{what} {name} is not declared under graders",
                    {"what": what, "name": name})
        if h.model_grader == h.human_grader:
            raise PydanticCustomError(
                "relgrade_holes", "holes.human_grader {name} is also the model grader: the "
                "holes' sample must be graded by another grader", {"name": h.model_grader})
        for what, name, wrong, right in (("model_grader", h.model_grader, "human", "model"),
                                         ("human_grader", h.human_grader, "model", "human")):
            if self.graders[name].kind == wrong:
                raise PydanticCustomError(
                    "relgrade_holes", "holes.{what} {name} is a grader of kind {kind} "
                    "(graders.{name}.kind): the {what} must be of kind {right} (or import); "
                    "swap the two or name another grader",
                    {"what": what, "name": name, "kind": wrong, "right": right})
        missing = [n for n in ("holes", "holes_work") if not getattr(self.paths, n)]
        if missing:
            raise PydanticCustomError(
                "relgrade_holes", "a holes section needs paths.{names} (relgrade init writes "
                "them): add `holes: metrics/holes.json` and `holes_work: data/holes` under "
                "paths", {"names": " and paths.".join(missing)})
        return self

    @model_validator(mode="after")
    def _panel_is_complete(self):
        if self.grading.mode != "raters":
            return self
        raters = sorted(n for n, g in self.graders.items() if g.role == "rater")
        if self.grading.regrade != "all":
            raise PydanticCustomError(
                "relgrade_panel", "grading.regrade must be all when grading.mode is raters: "
                "a rater panel regrades a round whole (found {regrade})",
                {"regrade": repr(self.grading.regrade)})
        if self.raters is None:
            raise PydanticCustomError(
                "relgrade_panel", "grading.mode is raters but the params have no `raters` "
                "section: set raters.per_pair (3 to 5)", {})
        if self.raters.per_pair > len(raters):
            raise PydanticCustomError(
                "relgrade_panel", "raters.per_pair must be at most the number of graders "
                "with role rater (found per_pair {n}; raters: {names})",
                {"n": self.raters.per_pair, "names": ", ".join(raters) or "none"})
        key = self.grading.key_grader
        if not key or key in self.graders:
            raise PydanticCustomError(
                "relgrade_panel", "grading.key_grader must name the aggregate of the raters, "
                "a name not declared under graders (found {key})", {"key": repr(key)})
        expert = self.adjudication.expert
        if expert is not None and (expert not in self.graders
                                   or self.graders[expert].role != "expert"):
            raise PydanticCustomError(
                "relgrade_panel", "adjudication.expert must name a grader with role expert "
                "(found {expert})", {"expert": repr(expert)})
        return self

    @property
    def source(self) -> Path:
        return self._source

    def need(self, name: str):
        """The value at ``name`` (a section, or a dotted key such as ``grading.auditor``).

        Raises
        ------
        InputError
            The params file does not set ``name``: it names the file and the key.
        """
        value = self
        for part in name.split("."):
            value = getattr(value, part, None)
            if value is None:
                break
        if value is None or value == {}:
            raise InputError("is required here but not set", path=self.source, item=name,
                             fix=f"Set `{name}` in the params file")
        return value

    def arms_dict(self) -> dict[str, dict]:
        """``arms`` as plain mappings (arm name → its settings as written)."""
        return {name: arm.as_dict() for name, arm in self.need("arms").items()}

    def grader(self, name: str) -> dict:
        """Grader ``name``'s entry as written (its ``role`` and ``kind`` already checked).

        Raises
        ------
        InputError
            ``name`` is not declared under ``graders``.
        """
        if name not in self.graders:
            raise InputError("grader not declared in params `graders`", path=self.source,
                             item=name,
                             found=f"graders {', '.join(sorted(self.graders)) or 'none'}",
                             fix=f"Add `{name}` with role, kind and family under `graders`")
        return self.graders[name].as_dict()

    def graders_dict(self) -> dict[str, dict]:
        """``graders`` as plain mappings (grader name → its entry as written)."""
        return {name: g.as_dict() for name, g in self.graders.items()}

    def compare_settings(self) -> Settings:
        """How comparisons are run: ``seed`` and the ``metrics`` section.

        Raises
        ------
        InputError
            ``seed`` or ``metrics`` is absent, or ``metrics.pairs`` is ``baseline`` (the
            default when ``metrics.baseline`` is set) without a baseline.
        """
        m = self.need("metrics")
        seed = self.need("seed")
        pairs = m.pairs or ("baseline" if m.baseline else "all")
        if pairs == "baseline" and not m.baseline:
            raise InputError("must name an arm when metrics.pairs is baseline",
                             path=self.source, item="metrics.baseline", found=repr(m.baseline))
        return Settings(seed=seed, n_resamples=m.bootstrap,
                        n_permutations=m.bootstrap if m.permutations is None else m.permutations,
                        level=m.level, method=m.interval, alpha=m.alpha, power=m.power,
                        min_relative_change=m.min_relative_change,
                        baseline=None if m.baseline in (None, "") else str(m.baseline),
                        pairs=pairs, test=m.test, power_min_nonzero=m.power_min_nonzero)


def _found(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _as_input_error(err: ValidationError, path: Path) -> InputError:
    """The first problem pydantic found, as one :class:`InputError` about ``path``; the
    others are named in its fix (``1 more problem in this file: grading.key_grader: is
    required``), each as its key and rule, so nothing found is left unsaid."""
    problems = err.errors(include_url=False)
    # a typo'd key is the cause of the "is required" pydantic reports beside it: name it first
    problems.sort(key=lambda p: p["type"] != "extra_forbidden")
    item, rule, found, fix = _problem(problems[0])
    if len(problems) > 1:
        more = len(problems) - 1
        others = "; ".join(_short(*_problem(e)[:3]) for e in problems[1:])
        fix = (fix + ". " if fix else "") + (f"{more} more problem{'s' if more > 1 else ''} "
                                             f"in this file: {others}")
    return InputError(rule, path=path, item=item, found=found, fix=fix)


def _short(item: str | None, rule: str, found: str | None) -> str:
    """One problem in a few words: ``KEY: RULE (found VALUE)``."""
    return (f"{item}: " if item else "") + rule + (f" {found_clause(str(found))}"
                                                   if found is not None else "")


def _problem(e: dict) -> tuple[str | None, str, str | None, str | None]:
    """One pydantic error as (the dotted key, the rule broken, what was found, the fix)."""
    loc = [f"[{p}]" if isinstance(p, int) else str(p) for p in e["loc"]]
    kind, ctx = e["type"], e.get("ctx") or {}
    found = None if kind in ("missing", "extra_forbidden") else _found(e.get("input"))
    fix = None
    if kind == "relgrade_value":
        rule = f"must be {ctx['allowed']}"
    elif kind == "extra_forbidden":
        rule = "unknown key"
        known = _known_keys(loc[:-1])
        fix = f"Known keys here: {', '.join(known)}" if known else None
    elif kind == "missing":
        rule = "is required"
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        loc = loc + ["kind"]
        rule = f"unknown arm kind; must be one of {', '.join(ARM_KINDS)}"
        found = _found(ctx.get("tag")) if kind == "union_tag_invalid" else None
    elif kind == "literal_error":
        rule = f"must be one of {ctx.get('expected', '')}".replace("'", "")
    elif kind in ("model_type", "dict_type", "model_attributes_type"):
        rule = "must be a mapping"
    elif kind == "list_type":
        rule = "must be a list"
    elif kind in ("string_type",):
        rule = "must be a string"
    elif kind == "too_short":
        rule = f"must hold at least {ctx.get('min_length')} item(s)"
    elif kind.startswith("relgrade_"):
        rule, loc, found = e["msg"], [], None
    else:
        rule = e["msg"][0].lower() + e["msg"][1:]
    # inside a discriminated union pydantic adds the tag to the location: drop it
    loc = [p for i, p in enumerate(loc)
           if not (i > 0 and loc[i - 1] in _arm_names(e) and p in ARM_KINDS)]
    return ".".join(loc).replace(".[", "[") or None, rule, found, fix


def _known_keys(parent: list[str]) -> list[str]:
    """The keys allowed at ``parent`` (a top-level section, or the top level)."""
    model = Params
    if parent:
        model = _SECTIONS.get(parent[0]) if len(parent) == 1 else None
    return list(model.model_fields) if model is not None else []


def _arm_names(e) -> set[str]:
    loc = [str(p) for p in e["loc"]]
    return {loc[1]} if len(loc) > 1 and loc[0] == "arms" else set()


def load_params(path) -> Params:
    """Read and check the params file at ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The params file (``params.yaml``, or the one given with ``--params``).

    Returns
    -------
    Params
        Every section typed; ``Params.source`` is ``path``.

    Raises
    ------
    InputError
        The file is missing, is not YAML, is not a mapping, has an unknown top-level key
        or section key, lacks ``paths``, or holds a value outside its allowed range: the
        message names ``path``, the key path, what was found and what is allowed.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "other.yaml"
    >>> _ = f.write_text("seed: -1\\npaths: {}\\n")
    >>> try:
    ...     load_params(f)
    ... except InputError as e:
    ...     print(str(e).replace(str(f), "other.yaml"))
    other.yaml: seed: must be an integer >= 0 (found -1)
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("params file not found", path=path,
                         fix="Give the experiment's folder with --experiment or its params file with --params")
    return parse_params(read_yaml(path), source=path)


def parse_params(raw, *, source=PARAMS_FILE) -> Params:
    """Check params already read (a mapping of sections) as :func:`load_params` does.

    Parameters
    ----------
    raw : object
        The parsed YAML document.
    source : str or os.PathLike, default "params.yaml"
        The file ``raw`` came from, named in errors.

    Returns
    -------
    Params

    Raises
    ------
    InputError
        As :func:`load_params`, except for a missing or unreadable file.
    """
    source = Path(source)
    if not isinstance(raw, dict):
        raise InputError("params file must be a mapping of sections", path=source,
                         found=type(raw).__name__)
    if "paths" not in raw:
        raise InputError("params file has no `paths` section", path=source,
                         fix="Add `paths:` naming where every stage reads and writes")
    try:
        params = Params.model_validate(raw)
    except ValidationError as e:
        raise _as_input_error(e, source) from None
    params._source = source
    return params
