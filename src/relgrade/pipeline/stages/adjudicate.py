"""Stage `adjudicate`: the expert's grades replace the aggregate on the queued pairs; the key
grader's grades are written beside every grader's (``grading.mode: raters``).

Reads the aggregate (``paths.aggregated``), the queue (``paths.adjudication_queue``) and the
expert's current grades from ``paths.rater_grades``. Stops, writing nothing, while the
expert owes queued pairs (pending work, named with the command that does it); refuses an
expert grade of a pair outside the queue. Writes ``paths.grades`` (every grader's rows plus
the key grader's: the aggregate, or the expert's grade and reason) and ``paths.adjudication``
(per adjudicated pair: the aggregate replaced, the expert's grade and reason, why queued).
"""

import numpy as np
import pandas as pd

from relgrade.errors import ProtocolError
from relgrade.io import files as io
from relgrade.raters.panel import adjudicate
from relgrade.schema import GRADES


def run(ex):
    p, grading = ex.params, ex.params.grading
    key_grader, expert = p.need("grading.key_grader"), p.adjudication.expert
    table = io.read_table(ex.path("rater_grades"))
    aggregated = io.read_table(ex.path("aggregated"))
    queue = pd.DataFrame(io.read_jsonl(ex.path("adjudication_queue")),
                         columns=["query_id", "chunk_id", "grades", "spread", "reason"])
    theirs = table[(table["grader"] == expert) & (table["round"] == grading.round)] \
        if expert else table.iloc[:0]
    source = ex.grader_files(expert).grades.as_posix() if expert else None
    rows, provenance, pending = adjudicate(aggregated, queue, theirs, expert=expert,
                                           source=source)
    if len(pending):
        queries = sorted(pending["query_id"].unique())
        raise ProtocolError(
            f"adjudication: {len(pending)} queued pair{'s' if len(pending) > 1 else ''} "
            f"need{'s' if len(pending) == 1 else ''} {expert} (queries {', '.join(queries)}); "
            f"run `relgrade grade run --grader {expert}` or `relgrade serve --grader {expert}`")
    key_rows = rows.assign(grader=key_grader, role="grader", round=int(grading.round),
                           sequence=np.arange(len(rows), dtype=np.int64))[GRADES]
    out = pd.concat([table[GRADES], key_rows], ignore_index=True)
    io.write_parquet(ex.path("grades"), out)
    io.write_jsonl(ex.path("adjudication"), provenance.to_dict("records"))
    print(f"adjudicate: {len(rows)} pairs for {key_grader}, {len(provenance)} by {expert or 'no expert'}")

