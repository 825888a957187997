"""Stage `audit`: pool provenance + queries → the audit queries, locked for the round.

The sample is drawn once per grading round and written to the audit lock
(``paths.audit_lock``), which is committed with git. While the lock's round is
``grading.round`` the stage only rewrites the audit table from the lock: a pool change (an
arm, a depth, a tail sample) never re-draws the audited queries. A new round, or
``relgrade audit redraw``, draws a new sample. A lock edited by hand is refused.

In dvc.yaml the lock is an output with ``cache: false`` (git keeps it, so a fresh clone has
it and ``dvc repro`` finds the stage up to date) and ``persist: true`` (dvc does not delete
it before the stage reruns after a pool change, so the stage can read it). A lock rewritten
by ``relgrade audit redraw`` is a changed output, and the next ``dvc repro`` reruns this stage.
"""

from relgrade.experiment.audit import locked_audit
from relgrade.experiment.stage import run_stage
from relgrade.io.files import write_jsonl


def main(ex):
    table, lock, drawn = locked_audit(ex)
    write_jsonl(ex.path("audit"), table.to_dict(orient="records"))
    how = "drawn now" if drawn else "locked"
    print(f"audit: {len(table)} queries for round {lock['round']}, {how} (from pool "
          f"{lock['pool_version']}, lock sha256 {lock['sha256'][:12]})")


if __name__ == "__main__":
    run_stage(main)
