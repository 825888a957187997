"""An experiment's model graders as judges: each one's judge identity now, and the price of
the requests it owes (what ``grade run --dry-run`` and ``relgrade status`` print).

See :mod:`relgrade.graders.cache` (the identity) and :mod:`relgrade.graders.price` (the
token and cost rules).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from relgrade.experiment import revisions
from relgrade.graders import command as graderun
from relgrade.graders.cache import judge_identity
from relgrade.graders.exchange import prompt_template, prompt_template_text
from relgrade.graders.price import Estimate, estimate, price_for, reason_cap
from relgrade.graders.store import GradeStore


def estimate_owed(ex, grader: str, setup, packets, files, *, rubric: str, scale,
                  max_reason_words: int, max_reason_chars: int, price: tuple | None,
                  reason_chars: int) -> Estimate:
    """The requests ``grade run`` would send now for ``grader``, counted and priced.

    Parameters
    ----------
    ex : relgrade.experiment.files.Experiment
    grader : str
    setup : relgrade.graders.command.GraderSetup
    packets : dict
        query id → packet (the grader's).
    files : relgrade.experiment.files.GraderFiles
        The grader's files of the round: its grade file (and sample file) are opened to read
        what is recorded when they exist, and left as they are.
    rubric : str
    scale : sequence of int
    max_reason_words, max_reason_chars : int
    price : (float, float) or None
        Per 1k input and output tokens (:func:`grader_price`).
    reason_chars : int
        The reason cap in characters (:func:`relgrade.graders.price.reason_cap`).

    Returns
    -------
    Estimate

    Raises
    ------
    ProtocolError
        A running ``grade run`` holds the grade file.
    """
    if files.grades.exists():  # opened only to read (it stays as it is)
        with GradeStore(files.grades, made_on=ex.made_on(packets),
                        carried=revisions.carried_check(ex)).open() as store:
            sample_store = None
            if setup.samples > 1 and files.samples.exists():
                sample_store = GradeStore(files.samples,
                                          key_fields=("query_id", "chunk_id", "sample")).open()
            try:
                tasks, _, _ = graderun.owed(packets, setup=setup, store=store,
                                            sample_store=sample_store, scale=scale,
                                            max_reason_words=max_reason_words,
                                            max_reason_chars=max_reason_chars)
            finally:
                if sample_store is not None:
                    sample_store.close()
    else:
        tasks = graderun.plan(packets, recorded=set(), samples=setup.samples)
    requests = graderun.owed_requests(tasks, setup=setup, rubric=rubric, scale=scale,
                                      max_reason_words=max_reason_words,
                                      template=prompt_template(), reason_chars=reason_chars)
    return estimate(requests, price)


def grader_price(ex, grader: str) -> tuple | None:
    """Grader ``grader``'s (input, output) price per 1k tokens from params ``prices``
    (:func:`relgrade.graders.price.price_for`), or None."""
    return price_for(grader, ex.params.grader(grader),
                     {k: v.as_dict() for k, v in ex.params.prices.items()})


def owed_estimate(ex, grader: str) -> Estimate:
    """The :class:`~relgrade.graders.price.Estimate` of what ``grade run --grader GRADER``
    would send now (the lines ``relgrade status`` prints under a price table).

    Raises
    ------
    InputError, ProtocolError
        The grader has no command, its packets cannot be read, or its grade file is held by
        a running ``grade run``.
    """
    setup = graderun.grader_setup(ex.params.grader(grader), grader, path=ex.params.source,
                                  folder=ex.root, tree=ex.working_tree())
    packets = ex.grader_packets(grader)
    g = ex.params.grading
    words = ex.params.need("grading.max_reason_words")
    return estimate_owed(ex, grader, setup, packets, ex.grader_files(grader),
                         rubric=ex.rubric(), scale=ex.params.need("scale").grades,
                         max_reason_words=words, max_reason_chars=g.max_reason_chars,
                         price=grader_price(ex, grader),
                         reason_chars=reason_cap(g.max_reason_chars, words))


def current_judge(ex, grader: str) -> str:
    """Grader ``grader``'s judge identity now (:func:`relgrade.graders.cache.judge_identity`
    of :func:`relgrade.graders.command.grader_identity`), 64 hex digits.

    Raises
    ------
    InputError
        The grader has no command, or a file its command names cannot be read.
    """
    setup = graderun.grader_setup(ex.params.grader(grader), grader, path=ex.params.source)
    # the command's paths read from the experiment's folder, as grade run reads them; a
    # script gone missing is grade run's error to name, not the identity's
    setup = dataclasses.replace(setup, folder=str(Path(ex.root).resolve()))
    return judge_identity(graderun.grader_identity(
        setup, template_text=prompt_template_text(), rubric=ex.rubric(),
        tree=ex.working_tree()))
