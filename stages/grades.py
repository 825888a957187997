"""Stage `grades`: validate every grader's committed file for this round into one long table."""

from relgrade.experiment.stage import path_of, run_stage
from relgrade.io import files as io
from relgrade.protocol import grades


def main(params):
    grading, rnd = params["grading"], int(params["grading"]["round"])
    root = path_of(params, "grades_in")
    files = {}
    for folder in sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith(".")):
        path = folder / f"round-{rnd}.jsonl"
        meta = folder / f"round-{rnd}.meta.json"
        if path.exists():
            files[folder.name] = grades.GraderFile(
                rows=io.iter_jsonl(path), source=path.as_posix(), sha256=io.sha256_file(path),
                meta=io.read_json(meta) if meta.exists() else None, meta_source=meta.as_posix())
    table, manifest = grades.collect_grades(
        files, graders=params["graders"],
        pool=io.read_table(path_of(params, "pool"), columns=["query_id", "chunk_id"]),
        audit_query_ids=[r["query_id"] for r in io.read_jsonl(path_of(params, "audit"))],
        scale=params["scale"]["grades"], max_reason_words=int(grading["max_reason_words"]),
        rubric_version=str(grading["rubric_version"]), round=rnd,
        intents_sha256=io.read_json(path_of(params, "intents_manifest")).get("sha256"))
    io.write_parquet(path_of(params, "grades"), table)
    io.write_json(path_of(params, "grades_manifest"), manifest)
    for line in grades.coverage_lines(manifest):
        print(line)


if __name__ == "__main__":
    run_stage(main)
