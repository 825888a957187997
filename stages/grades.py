"""Stage `grades`: validate every grader's committed file for this round into one long table."""

from relgrade.experiment.stage import run_stage
from relgrade.io import files as io
from relgrade.protocol import grades


def main(ex):
    grading = ex.params.grading
    files = {
        name: grades.GraderFile(
            rows=io.iter_jsonl(f.grades), source=f.grades.as_posix(),
            sha256=io.sha256_file(f.grades),
            meta=io.read_json(f.meta) if f.meta.exists() else None, meta_source=f.meta.as_posix())
        for name, f in ex.grader_round_files().items()}
    table, manifest = grades.collect_grades(
        files, graders=ex.params.graders_dict(),
        pool=io.read_table(ex.path("pool"), columns=["query_id", "chunk_id"]),
        audit_query_ids=[r["query_id"] for r in io.read_jsonl(ex.path("audit"))],
        scale=ex.params.need("scale").grades, max_reason_words=grading.max_reason_words,
        max_reason_chars=grading.max_reason_chars,
        rubric_version=grading.rubric_version, round=grading.round,
        intents_sha256=io.read_json(ex.path("intents_manifest")).get("sha256"))
    io.write_parquet(ex.path("grades"), table)
    io.write_json(ex.path("grades_manifest"), manifest)
    for line in grades.coverage_lines(manifest):
        print(line)


if __name__ == "__main__":
    run_stage(main)
