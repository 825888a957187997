"""Stage `grades`: the judgment bank → the current grades of the pool, or the pending work.

Every grader's file of this round is read with its bank sidecar (what each grade was made
on). Grades of pairs outside the pool stay in the bank, unused; a grade whose chunk, intent
line or rubric changed since is stale and left out. When a grader still owes pairs (new,
stale or audit) the stage stops with one line naming them, writing nothing.
"""

from relgrade.experiment.stage import run_stage
from relgrade.io import files as io
from relgrade.protocol import bank, grades


def main(ex):
    grading = ex.params.grading
    files = {name: grades.GraderFile(
        rows=io.iter_jsonl(f.grades), source=f.grades.as_posix(),
        sha256=io.sha256_file(f.grades), round=f.round,
        meta=io.read_json(f.meta) if f.meta.exists() else None, meta_source=f.meta.as_posix(),
        bank=ex.read_bank(f), bank_source=f.bank.as_posix())
        for name, f in ex.grader_round_files().items()}
    graders = ex.params.graders_dict()
    judged = grades.judgment_bank({n: [f] for n, f in files.items()}, graders=graders,
                                  scale=ex.params.need("scale").grades,
                                  max_reason_words=grading.max_reason_words,
                                  max_reason_chars=grading.max_reason_chars)
    pool = io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"])
    audit_ids = [str(r["query_id"]) for r in io.read_jsonl(ex.path("audit"))]
    now = dict(content=bank.content_sha256(io.read_table(ex.path("chunks"),
                                                         columns=["chunk_id", "header", "text"])),
               intents=bank.intent_sha256(io.read_table(ex.path("intents"),
                                                        columns=["query_id", "intent"])),
               rubric_sha256=ex.rubric_sha256(), rubric_version=grading.rubric_version)
    bank.require_no_pending(bank.pending_work(
        pool, judged, key_grader=ex.params.need("grading.key_grader"),
        auditor=ex.params.need("grading.auditor"), audit_ids=audit_ids, **now))
    table, manifest = grades.current_table(
        judged, graders=graders, pool=pool, audit_query_ids=audit_ids, round=grading.round,
        intents_sha256=io.read_json(ex.path("intents_manifest")).get("sha256"), files=files,
        **now)
    io.write_parquet(ex.path("grades"), table)
    io.write_json(ex.path("grades_manifest"), manifest)
    for line in grades.coverage_lines(manifest):
        print(line)


if __name__ == "__main__":
    run_stage(main)
