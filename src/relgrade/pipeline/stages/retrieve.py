"""Stage `retrieve ARM`: one arm's run over the chunks and queries → data/runs/ARM.trec.

Computed arms (bm25, bm25f, tfidf, rrf, embed) rank the chunks themselves; a `file` arm's run is
read from its `source`, checked against the corpus and queries, and rewritten in canonical
order; an `rrf` arm may fuse `file` arms, whose runs are read the same way. Either way the
file holds ranks 1..n ≤ depth per query, tagged with the arm's name. A run file with fields
after the sixth is read as trec_eval reads it (the extra fields ignored), with the note
``relgrade evaluate`` prints, on stderr.
"""

import sys

from relgrade import retrieve
from relgrade.experiment.layout import stage_path
from relgrade.io.files import read_table
from relgrade.io.runs import read_run as _read_run
from relgrade.io.runs import run_lines
from relgrade.io.trec import extra_fields_note, write_trec_run


def read_run(path, ex=None):
    """The run file at ``path``; its extra-fields note, if any, printed on stderr, naming
    the file as the stage's errors do (:func:`relgrade.experiment.layout.stage_path`, for
    the experiment ``ex`` it belongs to)."""
    table = _read_run(path)
    note = extra_fields_note(path if ex is None else stage_path(ex, path), table)
    if note:
        print(note, file=sys.stderr)
    return table


def run(ex, arm):
    write_trec_run(ex.path("runs") / f"{arm}.trec", arm_run(ex, arm), tag=arm)


def arm_run(ex, arm: str):
    """Arm ``arm``'s run as the stage writes it, in memory.

    Returns
    -------
    pandas.DataFrame
        ``query_id, chunk_id, rank, score`` in canonical order, ranks 1..n <= depth.

    Raises
    ------
    InputError
        The chunks or queries are not made yet; the arm, or a file arm it fuses, is invalid.
    """
    arms, ties = ex.params.arms_dict(), ex.params.runs.ties
    chunks = read_table(ex.path("chunks"), columns=["chunk_id", "header", "text"])
    queries = read_table(ex.path("queries"), columns=["query_id", "query"])
    config = retrieve.arm_config(arm, arms, source=ex.params.source)
    if config["kind"] == "file":
        source = ex.file(config["source"])
        run = retrieve.external_run(read_run(source, ex), depth=config["depth"], ties=ties,
                                    path=source, queries=queries["query_id"].astype("str"),
                                    chunks=chunks["chunk_id"].astype("str"),
                                    lines=run_lines(source))
    else:
        # the external runs an rrf arm fuses, read and checked as a file arm's own run is
        external = {}
        for other in config.get("fuse") or []:
            other_config = retrieve.arm_config(str(other), arms, source=ex.params.source)
            if other_config["kind"] == "file":
                path = ex.file(other_config["source"])
                external[str(other)] = retrieve.external_run(
                    read_run(path, ex), depth=other_config["depth"], ties=ties, path=path,
                    queries=queries["query_id"].astype("str"),
                    chunks=chunks["chunk_id"].astype("str"), lines=run_lines(path))
        run = retrieve.run_arm(arm, arms, chunks=chunks, queries=queries,
                               source=ex.params.source, external=external, ties=ties)
    return run

