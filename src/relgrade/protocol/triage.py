"""LLM triage (``grading.mode: triage``): a model grades every pair, people grade what matters.

The rule, in four steps over tables:

1. :func:`select_for_people`: every pair the model graded at least ``relevant_min`` goes to
   people (inclusion probability 1); of the model's 0s (below ``relevant_min``) a simple
   random sample without replacement of ``ceil(zero_sample * n_zeros)`` pairs goes to
   people too, each with inclusion probability ``n_sampled / n_zeros``. The draw is seeded
   from the experiment seed and the round, over the zero pairs in code-point order, so it
   depends only on the set of the model's 0s and the recorded seed.
2. :func:`check_people_grades`: people grade exactly their queue; a grade for any other
   pair is refused.
3. :func:`merge_key`: the key takes people's grade where there is one and the model's 0
   elsewhere, with who gave each grade.
4. :func:`miss_rate`: the share of the sampled 0s that people graded relevant, with a
   Wilson score interval: an estimate of how often the model's 0 hides a relevant pair.
   The unsampled 0s stay model-judged; :data:`MODEL_JUDGED_NOTE` says so wherever the
   verdicts are reported.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from relgrade.errors import InputError
from relgrade.rng import derive_seed
from relgrade.schema import PAIR, QRELS, TRIAGE_KEY, TRIAGE_QUEUE, require

#: Strata of the triage queue.
RELEVANT, ZERO = "relevant", "zero"

#: Who gave a key row's grade.
PEOPLE, MODEL = "people", "model"

#: The interval method of :func:`miss_rate`.
METHOD = "wilson"

#: The sentence printed beside verdicts computed on a triage key.
MODEL_JUDGED_NOTE = ("Triage key: pairs the model graded 0 and people did not sample keep "
                     "the model's 0; they are model-judged, not checked by people.")


def check_zero_sample(zero_sample, *, item: str = "triage.zero_sample", path=None) -> float:
    """Refuse a zero-sample fraction outside (0, 1].

    Parameters
    ----------
    zero_sample : float
        The share of the model's 0s that people grade (params ``triage.zero_sample``).
    item, path : optional
        The params key and file, for the message.

    Returns
    -------
    float

    Raises
    ------
    InputError
        ``zero_sample`` is not a finite number in (0, 1].

    Examples
    --------
    >>> check_zero_sample(0.25)
    0.25
    >>> try:
    ...     check_zero_sample(0)
    ... except InputError as e:
    ...     print(e)
    triage.zero_sample: must be a number in (0, 1] (found 0). Sample at least some of the model's 0s: 0 would leave its miss rate unmeasured
    """
    ok = (not isinstance(zero_sample, bool) and isinstance(zero_sample, (int, float))
          and math.isfinite(zero_sample) and 0 < zero_sample <= 1)
    if not ok:
        raise InputError("must be a number in (0, 1]", path=path, item=item,
                         found=repr(zero_sample),
                         fix="Sample at least some of the model's 0s: 0 would leave its miss "
                             "rate unmeasured")
    return float(zero_sample)


def _pairs(df: pd.DataFrame, *, what: str, path=None) -> pd.DataFrame:
    """``df``'s pairs sorted by (query_id, chunk_id), string ids, int64 grades; refuse a
    pair listed twice."""
    require(df, QRELS, what=what, path=path)
    qids = [str(q) for q in df["query_id"]]
    cids = [str(c) for c in df["chunk_id"]]
    order = sorted(range(len(qids)), key=lambda i: (qids[i], cids[i]))
    for a, b in zip(order, order[1:]):
        if qids[a] == qids[b] and cids[a] == cids[b]:
            raise InputError(f"pair graded twice in the {what}", path=path,
                             item=f"{qids[a]}/{cids[a]}", fix="Keep one grade per pair")
    grades = np.asarray(df["grade"], dtype=np.int64)[order]
    return pd.DataFrame({"query_id": pd.Series([qids[i] for i in order], dtype=object),
                         "chunk_id": pd.Series([cids[i] for i in order], dtype=object),
                         "grade": grades})


def draw_zeros(n_zeros: int, *, zero_sample: float, seed: int,
               round: int = 1) -> tuple[np.ndarray, float]:  # noqa: A002
    """The seeded draw of the model's 0s that people grade.

    Parameters
    ----------
    n_zeros : int
        How many pairs the model graded 0 (below relevant_min).
    zero_sample : float
        Share to sample, in (0, 1].
    seed : int
        The experiment seed; the generator is ``default_rng(derive_seed(seed, "triage",
        round))``.
    round : int, default 1
        The grading round.

    Returns
    -------
    chosen : numpy.ndarray of shape (ceil(zero_sample * n_zeros),), int64
        Positions (0-based, ascending) of the sampled 0s among the 0s in (query_id,
        chunk_id) order.
    probability : float
        Every 0's inclusion probability, ``len(chosen) / n_zeros`` (0.0 when there is no 0).

    Raises
    ------
    InputError
        ``zero_sample`` is outside (0, 1].

    Examples
    --------
    >>> chosen, p = draw_zeros(7, zero_sample=0.3, seed=1)
    >>> len(chosen), round(p, 4)
    (3, 0.4286)
    """
    zero_sample = check_zero_sample(zero_sample)
    n_zeros = int(n_zeros)
    if n_zeros == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    n_sampled = math.ceil(zero_sample * n_zeros)
    rng = np.random.default_rng(derive_seed(seed, "triage", int(round)))
    chosen = np.sort(rng.choice(n_zeros, size=n_sampled, replace=False)).astype(np.int64)
    return chosen, n_sampled / n_zeros


def select_for_people(model: pd.DataFrame, *, relevant_min: int, zero_sample: float,
                      seed: int, round: int = 1) -> pd.DataFrame:  # noqa: A002
    """Which of the model's graded pairs people grade, and each pair's inclusion probability.

    Parameters
    ----------
    model : pandas.DataFrame of shape (n_pairs, >= 3)
        The triage grader's grades: ``query_id``, ``chunk_id``, ``grade`` (int), one row per
        pool pair.
    relevant_min : int
        The smallest relevant grade (params ``scale.relevant_min``); a model grade below it
        is a "0".
    zero_sample : float
        Share of the model's 0s sent to people, in (0, 1] (params ``triage.zero_sample``).
    seed : int
        The experiment seed (params ``seed``); the draw is :func:`draw_zeros`.
    round : int, default 1
        The grading round (params ``grading.round``).

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, 6)
        :data:`relgrade.schema.TRIAGE_QUEUE`: ``query_id``, ``chunk_id`` (str),
        ``model_grade`` (int64), ``stratum`` (``"relevant"`` or ``"zero"``), ``selected``
        (bool: people grade it), ``inclusion_probability`` (float64: 1.0 for the relevant
        stratum, ``n_sampled / n_zeros`` for every 0), sorted by (query_id, chunk_id).

    Raises
    ------
    InputError
        ``zero_sample`` is outside (0, 1]; ``model`` lacks a column or grades a pair twice.

    Notes
    -----
    ``n_sampled = ceil(zero_sample * n_zeros)``: a simple random sample without replacement
    (Cochran, *Sampling Techniques*, 3rd ed., 1977, ch. 2), so every 0 has the same
    inclusion probability ``n_sampled / n_zeros`` and the sample's share of misses is an
    unbiased estimate of the share among all the model's 0s.

    Examples
    --------
    >>> model = pd.DataFrame({"query_id": ["q"] * 4, "chunk_id": ["a", "b", "c", "d"],
    ...                       "grade": [2, 0, 0, 0]})
    >>> q = select_for_people(model, relevant_min=1, zero_sample=0.5, seed=1)
    >>> int(q["selected"].sum()), q["inclusion_probability"].round(4).tolist()
    (3, [1.0, 0.6667, 0.6667, 0.6667])
    """
    zero_sample = check_zero_sample(zero_sample)
    pairs = _pairs(model, what="triage grader's grades")
    relevant = pairs["grade"].to_numpy() >= int(relevant_min)
    zeros = np.flatnonzero(~relevant)
    chosen, p_zero = draw_zeros(len(zeros), zero_sample=zero_sample, seed=seed, round=round)
    selected = relevant.copy()
    selected[zeros[chosen]] = True
    out = pd.DataFrame({
        "query_id": pairs["query_id"], "chunk_id": pairs["chunk_id"],
        "model_grade": pairs["grade"],
        "stratum": np.where(relevant, RELEVANT, ZERO).astype(object),
        "selected": selected,
        "inclusion_probability": np.where(relevant, 1.0, p_zero).astype(np.float64)})
    return out[TRIAGE_QUEUE]


def typed_queue(table: pd.DataFrame, *, path=None) -> pd.DataFrame:
    """A triage queue read back from text (every column a string), with its dtypes restored.

    Parameters
    ----------
    table : pandas.DataFrame
        :data:`relgrade.schema.TRIAGE_QUEUE` columns, as strings (a TSV file's cells) or
        already typed.
    path : optional
        The file it came from, for the message.

    Returns
    -------
    pandas.DataFrame
        The same rows: ids str, ``model_grade`` int64, ``selected`` bool,
        ``inclusion_probability`` float64.

    Raises
    ------
    InputError
        A column is missing; ``selected`` is not True/False, ``stratum`` not relevant/zero,
        ``model_grade`` not an integer or ``inclusion_probability`` not in [0, 1] (the line
        is named, counting the header as line 1).
    """
    require(table, TRIAGE_QUEUE, what="triage queue", path=path)
    rows = {c: [] for c in TRIAGE_QUEUE}
    for i, r in enumerate(table[TRIAGE_QUEUE].itertuples(index=False), start=2):
        sel, stratum = str(r.selected), str(r.stratum)
        try:
            grade, prob = int(str(r.model_grade)), float(str(r.inclusion_probability))
        except ValueError:
            grade, prob = None, float("nan")
        if sel not in ("True", "False") or stratum not in (RELEVANT, ZERO) or grade is None \
                or not 0 <= prob <= 1:
            raise InputError("triage queue row is not (ids, integer grade, relevant|zero, "
                             "True|False, probability in [0, 1])", path=path, line=i,
                             found=f"{r.model_grade}, {stratum}, {sel}, "
                                   f"{r.inclusion_probability}",
                             fix="Rebuild it with dvc repro packets")
        rows["query_id"].append(str(r.query_id))
        rows["chunk_id"].append(str(r.chunk_id))
        rows["model_grade"].append(grade)
        rows["stratum"].append(stratum)
        rows["selected"].append(sel == "True")
        rows["inclusion_probability"].append(prob)
    # the same column construction as select_for_people, so both give equal frames
    return pd.DataFrame({
        "query_id": pd.Series(rows["query_id"], dtype=object),
        "chunk_id": pd.Series(rows["chunk_id"], dtype=object),
        "model_grade": np.asarray(rows["model_grade"], dtype=np.int64),
        "stratum": np.asarray(rows["stratum"], dtype=object),
        "selected": np.asarray(rows["selected"], dtype=bool),
        "inclusion_probability": np.asarray(rows["inclusion_probability"], dtype=np.float64)})


def people_queue(queue: pd.DataFrame) -> pd.DataFrame:
    """The pairs people owe: the selected rows of ``queue`` (``query_id``, ``chunk_id``)."""
    require(queue, TRIAGE_QUEUE, what="triage queue")
    return queue.loc[queue["selected"].astype(bool), PAIR].reset_index(drop=True)


def check_people_grades(people: pd.DataFrame, queue: pd.DataFrame, *, grader: str,
                        path=None) -> pd.DataFrame:
    """Refuse a person's grade for a pair outside their triage queue.

    Parameters
    ----------
    people : pandas.DataFrame
        The people's grades: ``query_id``, ``chunk_id``, ``grade``.
    queue : pandas.DataFrame
        :data:`relgrade.schema.TRIAGE_QUEUE` (:func:`select_for_people`).
    grader : str
        Who gave ``people`` (named in the message).
    path : optional
        Their grade file, for the message.

    Returns
    -------
    pandas.DataFrame
        ``people``'s ``query_id``, ``chunk_id`` (str) and ``grade`` (int64).

    Raises
    ------
    InputError
        A pair is graded twice, or is not in the queue (not in the pool's model grades, or a
        model 0 that was not sampled).
    """
    people = _pairs(people, what=f"grades of {grader}", path=path)
    sel = queue["selected"].to_numpy(dtype=bool)
    wanted = set(zip(queue["query_id"].to_numpy()[sel], queue["chunk_id"].to_numpy()[sel]))
    outside = [(q, c) for q, c in zip(people["query_id"], people["chunk_id"])
               if (q, c) not in wanted]
    if outside:
        q, c = outside[0]
        raise InputError(f"grade for a pair not in the triage queue of {grader}", path=path,
                         item=f"{q}/{c}",
                         found=f"{len(outside)} such pair{'s' if len(outside) > 1 else ''}",
                         fix="People grade the pairs the model graded relevant and the sampled "
                             "0s only; remove the others or rebuild the packets")
    return people


def owed_pairs(queue: pd.DataFrame, people: pd.DataFrame) -> pd.DataFrame:
    """The queue's pairs people have not graded yet (``query_id``, ``chunk_id``), sorted."""
    want = people_queue(queue)
    have = set(zip(people["query_id"].astype(str), people["chunk_id"].astype(str)))
    keep = [(q, c) not in have for q, c in zip(want["query_id"], want["chunk_id"])]
    return want[np.asarray(keep, dtype=bool)].reset_index(drop=True)


def merge_key(queue: pd.DataFrame, people: pd.DataFrame, *, model_grader: str,
              people_grader: str) -> pd.DataFrame:
    """The triage key: people's grade where present, the model's 0 everywhere else.

    Parameters
    ----------
    queue : pandas.DataFrame
        :data:`relgrade.schema.TRIAGE_QUEUE`.
    people : pandas.DataFrame
        People's grades (``query_id``, ``chunk_id``, ``grade``) of exactly the queue's
        selected pairs.
    model_grader, people_grader : str
        The grader names recorded as each row's provenance.

    Returns
    -------
    pandas.DataFrame of shape (n_pairs, 5)
        :data:`relgrade.schema.TRIAGE_KEY`: ``query_id``, ``chunk_id``, ``grade`` (int64),
        ``source`` (``"people"`` or ``"model"``), ``grader``; sorted by (query_id, chunk_id).

    Raises
    ------
    InputError
        People graded a pair outside the queue, or still owe a selected pair (named).

    Notes
    -----
    A model grade >= relevant_min never reaches the key on its own: every such pair is in
    people's queue. Only unsampled model 0s are taken from the model.
    """
    people = check_people_grades(people, queue, grader=people_grader)
    owed = owed_pairs(queue, people)
    if len(owed):
        row = owed.iloc[0]
        raise InputError(f"triage pair not graded by {people_grader}",
                         item=f"{row['query_id']}/{row['chunk_id']}",
                         found=f"{len(owed)} pair{'s' if len(owed) > 1 else ''} owed",
                         fix=f"Grade the rest of {people_grader}'s triage queue first")
    merged = queue[TRIAGE_QUEUE].merge(people, on=PAIR, how="left", validate="one_to_one")
    by_people = merged["grade"].notna().to_numpy()
    out = pd.DataFrame({
        "query_id": merged["query_id"], "chunk_id": merged["chunk_id"],
        "grade": np.where(by_people, merged["grade"].fillna(0), merged["model_grade"]),
        "source": np.where(by_people, PEOPLE, MODEL),
        "grader": np.where(by_people, people_grader, model_grader)})
    out["grade"] = out["grade"].astype(np.int64)
    return out.sort_values(PAIR, kind="stable").reset_index(drop=True)[TRIAGE_KEY]


def wilson_interval(missed: int, sampled: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ``missed / sampled``.

    Parameters
    ----------
    missed, sampled : int
        Successes and trials, ``0 <= missed <= sampled``, ``sampled >= 1``.
    level : float, default 0.95
        Confidence level in (0, 1).

    Returns
    -------
    (float, float)
        Lower and upper bound, within [0, 1].

    Raises
    ------
    InputError
        ``sampled < 1``, ``missed`` outside [0, sampled] or ``level`` outside (0, 1).

    Notes
    -----
    With ``p = k / n`` and ``z`` the normal quantile at ``(1 + level) / 2``, the bounds are
    ``(p + z²/2n ± z·sqrt(p(1 − p)/n + z²/4n²)) / (1 + z²/n)`` (Wilson, "Probable inference,
    the law of succession, and statistical inference", JASA 22, 1927; Brown, Cai & DasGupta,
    "Interval estimation for a binomial proportion", Statistical Science 16, 2001, who
    recommend it over the Wald interval for small n). Equal to statsmodels'
    ``proportion_confint(k, n, alpha=1 - level, method="wilson")``.

    Examples
    --------
    >>> [round(x, 4) for x in wilson_interval(1, 10)]
    [0.0179, 0.4042]
    """
    if not (0 < level < 1):
        raise InputError("confidence level must be in (0, 1)", found=repr(level))
    if sampled < 1 or not (0 <= missed <= sampled):
        raise InputError("a proportion needs 0 <= missed <= sampled and sampled >= 1",
                         found=f"{missed} of {sampled}")
    n, p = float(sampled), missed / sampled
    z = NormalDist().inv_cdf((1 + level) / 2)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class MissRate:
    """How often the model's 0 hides a relevant pair, from people's grades of the sample.

    Attributes
    ----------
    model_relevant : int
        Pairs the model graded >= relevant_min (all graded by people).
    model_zeros : int
        Pairs the model graded below relevant_min.
    sampled : int
        Model 0s people graded.
    missed : int
        Sampled 0s people graded >= relevant_min.
    estimate, low, high : float or None
        ``missed / sampled`` and its Wilson interval; None (undefined) when nothing was
        sampled.
    level : float
        Confidence level of the interval.
    method : str
        ``"wilson"``.
    unsampled : int
        Model 0s that stay model-judged (``model_zeros - sampled``).
    hidden_low, hidden_high : float or None
        ``unsampled * low`` and ``unsampled * high``: how many relevant pairs the unsampled
        0s may hide, at the same level.
    """

    model_relevant: int
    model_zeros: int
    sampled: int
    missed: int
    estimate: float | None
    low: float | None
    high: float | None
    level: float
    method: str
    unsampled: int
    hidden_low: float | None
    hidden_high: float | None

    def to_dict(self) -> dict:
        """The fields as a plain mapping (JSON-ready)."""
        return asdict(self)

    def line(self) -> str:
        """One sentence for a report, e.g. ``model miss rate on 0s: 0.100 (95% CI ...)``."""
        if self.estimate is None:
            return (f"model miss rate on 0s: undefined (no 0 sampled; {self.unsampled} "
                    "pairs model-judged)")
        return (f"model miss rate on 0s: {self.estimate:.3f} ({self.level:.0%} Wilson CI "
                f"{self.low:.3f}-{self.high:.3f}; {self.missed} of {self.sampled} sampled 0s "
                f"graded relevant by people; {self.unsampled} unsampled 0s model-judged)")


def miss_rate(queue: pd.DataFrame, people: pd.DataFrame, *, relevant_min: int,
              level: float = 0.95) -> MissRate:
    """The model's miss rate on its 0s, estimated from people's grades of the sampled 0s.

    Parameters
    ----------
    queue : pandas.DataFrame
        :data:`relgrade.schema.TRIAGE_QUEUE`.
    people : pandas.DataFrame
        People's grades (``query_id``, ``chunk_id``, ``grade``); pairs outside the queue are
        refused, pairs not graded yet are left out of the count.
    relevant_min : int
        The smallest relevant grade (params ``scale.relevant_min``).
    level : float, default 0.95
        Confidence level of the interval.

    Returns
    -------
    MissRate

    Raises
    ------
    InputError
        As :func:`check_people_grades`; ``level`` outside (0, 1).

    Notes
    -----
    The sampled 0s are a simple random sample of the model's 0s, so the share graded
    relevant estimates the share among all of them; :func:`wilson_interval` gives its
    interval (without the finite-population correction, so it is slightly conservative).
    """
    people = check_people_grades(people, queue, grader="people")
    zero = (queue["stratum"] == ZERO).to_numpy()
    sel = queue["selected"].to_numpy(dtype=bool)
    sampled = set(zip(queue["query_id"].to_numpy()[zero & sel],
                      queue["chunk_id"].to_numpy()[zero & sel]))
    graded = [g for q, c, g in zip(people["query_id"], people["chunk_id"], people["grade"])
              if (q, c) in sampled]
    n, k = len(graded), sum(int(g) >= int(relevant_min) for g in graded)
    n_zero = int(zero.sum())
    unsampled = n_zero - int((zero & sel).sum())
    if n:
        low, high = wilson_interval(k, n, level=level)
        est = k / n
        hidden = (unsampled * low, unsampled * high)
    else:
        est = low = high = None
        hidden = (None, None)
    return MissRate(model_relevant=int((~zero).sum()),
                    model_zeros=n_zero, sampled=n, missed=k, estimate=est, low=low, high=high,
                    level=float(level), method=METHOD, unsampled=unsampled,
                    hidden_low=hidden[0], hidden_high=hidden[1])


def design_record(*, model_grader: str, people_grader: str, zero_sample: float, seed: int,
                  round: int, rate: MissRate) -> dict:  # noqa: A002
    """The triage design as the key record holds it.

    Returns
    -------
    dict
        ``mode`` ("triage"), ``model_grader``, ``people_grader``, ``zero_sample``, ``seed``,
        ``round``, ``draw`` (how the 0s were sampled), ``counts`` (``model_relevant``,
        ``model_zeros``, ``sampled_zeros``, ``unsampled_zeros``), ``miss_rate``
        (:meth:`MissRate.to_dict`) and ``note`` (:data:`MODEL_JUDGED_NOTE`).
    """
    return {
        "mode": "triage", "model_grader": model_grader, "people_grader": people_grader,
        "zero_sample": float(zero_sample), "seed": int(seed), "round": int(round),
        "draw": "simple random sample without replacement of ceil(zero_sample * model_zeros) "
                "of the model's 0s, default_rng(derive_seed(seed, 'triage', round))",
        "counts": {"model_relevant": rate.model_relevant, "model_zeros": rate.model_zeros,
                   "sampled_zeros": rate.sampled, "unsampled_zeros": rate.unsampled},
        "miss_rate": rate.to_dict(), "note": MODEL_JUDGED_NOTE}
