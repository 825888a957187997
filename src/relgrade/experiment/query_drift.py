"""An experiment's query-set drift against a current query log, as read from its files.

One definition of the drift distance for every command that reports one: ``relgrade drift``
and the drift check of ``relgrade reconcile`` both call :func:`measure`, so the same set and
log give the same number in both. The distance is the total variation between the set's
weight shares and the current log's traffic over the strata of the log the set was drawn from
(params ``queries.log``) plus ``new``: :func:`relgrade.query_sampling.drift.drift`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from relgrade import query_sampling
from relgrade.errors import InputError
from relgrade.experiment.params import Drift as DriftSettings
from relgrade.io.files import read_json, read_rows, sha256_file
from relgrade.io.querylog import read_query_log
from relgrade.query_sampling import drift as drifting
from relgrade.rng import derive_seed


def measure(ex, log_path) -> drifting.Drift:
    """The drift of ``ex``'s sampled query set against the current log at ``log_path``.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
        An experiment whose query set was sampled from a log: params ``queries.log`` (the
        reference), ``sample`` (the strata's shares) and ``seed``; the set's file
        (``queries.input``) has ``query_id``, ``query``, ``group`` (head/torso/tail) and
        ``weight``. Params ``drift`` (optional) sets the threshold, resamples and level.
    log_path : str or os.PathLike
        The current query log (:func:`relgrade.io.querylog.read_query_log`'s formats).

    Returns
    -------
    relgrade.query_sampling.drift.Drift
        Shares, total variation with its seeded bootstrap interval (child seed
        ``derive_seed(seed, "queries-drift")``), Jensen–Shannon, the new frequent queries
        and the recommended slice.

    Raises
    ------
    InputError
        Params lack ``queries.log``, ``sample`` or ``seed``; the reference log's sha256
        differs from the sample manifest's (the set was not drawn from it); the set lacks
        ``group`` or ``weight``; a log holds no query or a malformed line.
    """
    log_path = Path(log_path)
    reference_path = ex.file(ex.params.need("queries.log"))
    cfg = ex.params.need("sample")
    seed = ex.params.need("seed")
    settings = ex.params.drift or DriftSettings()
    set_path = ex.file(ex.params.need("queries").input)
    if ex.params.paths.sample_manifest and ex.path("sample_manifest").exists():
        drawn = read_json(ex.path("sample_manifest")).get("log_sha256")
        if drawn and reference_path.exists() and drawn != sha256_file(reference_path):
            raise InputError("the log changed since the query set was drawn from it (its sha256 "
                             "differs from the sample manifest's)", path=reference_path,
                             fix="run `dvc repro` so the sample stage draws from it, or restore "
                                 "the log the set was drawn from")
    query_set, _ = read_rows(set_path, ["query_id", "query", "group", "weight"])
    query_set = query_set.assign(query=[query_sampling.normalize_query(str(q))
                                        for q in query_set["query"]])
    ref_log, ref_lines = read_query_log(reference_path)
    reference = query_sampling.strata(ref_log, head_share=cfg.head_share,
                                      torso_share=cfg.torso_share, path=reference_path,
                                      lines=ref_lines)
    log, lines = read_query_log(log_path)
    current = query_sampling.strata(log, head_share=cfg.head_share,
                                    torso_share=cfg.torso_share, path=log_path, lines=lines)
    child = derive_seed(seed, drifting.SEED_PURPOSE)
    return drifting.drift(query_set, reference=reference, current=current,
                          rng=np.random.default_rng(child), seed=seed, child_seed=child,
                          threshold=settings.max_shift, bootstrap=settings.bootstrap,
                          level=settings.level)
