"""Stage `adjudicate`: the expert's grades replace the aggregate on the queued pairs; the key
grader's grades are written beside every grader's (``grading.mode: raters``).

Reads the aggregate (``paths.aggregated``), the queue (``paths.adjudication_queue``) and the
expert's current grades from ``paths.rater_grades``. Stops, writing nothing, while the
expert owes queued pairs: pending work (``Pending: ...``), named with the command that does
it. The queue follows the panel and the aggregation method, so it may change after the
expert has graded: the expert's grades of pairs no longer queued are set aside with a note
(kept in the judgment bank, unused, never an error), and newly queued pairs are owed. Writes
``paths.grades`` (every grader's rows plus the key grader's: the aggregate, or the expert's
grade and reason) and ``paths.adjudication`` (per adjudicated pair: the aggregate replaced,
the expert's grade and reason, why queued).
"""

import numpy as np
import pandas as pd

from relgrade.experiment.layout import grade_commands
from relgrade.io import files as io
from relgrade.protocol import bank
from relgrade.raters.panel import adjudicate, queued_expert_grades
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
    _, aside = queued_expert_grades(theirs, queue)
    if len(aside):
        print(f"note: {len(aside)} {expert} grade{'s' if len(aside) != 1 else ''} of pairs no "
              "longer in the adjudication queue set aside (kept in the judgment bank, unused)")
    rows, provenance, pending = adjudicate(aggregated, queue, theirs, expert=expert)
    bank.require_no_pending(pending, how=grade_commands(ex))
    key_rows = rows.assign(grader=key_grader, role="grader", round=int(grading.round),
                           sequence=np.arange(len(rows), dtype=np.int64))[GRADES]
    out = pd.concat([table[GRADES], key_rows], ignore_index=True)
    io.write_parquet(ex.path("grades"), out)
    io.write_jsonl(ex.path("adjudication"), provenance.to_dict("records"))
    print(f"adjudicate: {len(rows)} pairs for {key_grader}, {len(provenance)} by {expert or 'no expert'}")

