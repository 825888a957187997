"""Pooling speed, side by side: relgrade, DuckDB and plain pandas on workload (a).

    python benchmarks/generate.py --seed 7 --only pooling
    python benchmarks/bench_pool.py --process [--rounds 5]     # whole processes, paired
    python benchmarks/bench_pool.py --stage [--base REV] [--rounds 3]   # the stage as DVC runs it
    python benchmarks/bench_pool.py --stage-steps [--base REV] [--rounds 5]   # CPU per step
    python benchmarks/bench_pool.py [--data benchmarks/data/pooling] [--depth 10] [--repeat 5]

``--process`` runs every contender as a fresh Python process (interpreter start, imports,
reading, pooling, writing the pool as Parquet) and measures its CPU seconds (user + sys of
the process, from ``os.wait4``), wall seconds and peak RSS. Contenders, each from Parquet
and from TREC:

* relgrade: the pool stage's code (``relgrade.pipeline.stages.pool.pool_files``: each run
  read into Arrow, checked and cut in a thread of its own, then pooled), writing the pool,
  the provenance, the manifest and the statistics as the stage does; the process imports
  what the stage's process imports; without the check against known ids (the workload
  has no query or corpus table: see the id-check rows);
* relgrade, pandas path: the code the stage ran before it read runs into Arrow
  (``read_run``, ``validate_run``, ``top_candidates``, ``canonical_ranking``,
  ``build_pool``), same outputs;
* DuckDB: the ``QUALIFY row_number() ...`` query below, ``COPY``-ed to Parquet sorted by
  (query_id, chunk_id), as relgrade's pool is;
* relgrade (and its pandas path), id checks: as above, also checking every run row's query
  and chunk against a query table and a corpus of 2^21 chunk ids (written once, ids only),
  as the stage does.

Each round runs every contender once, in an order rotated from round to round; the ratios
reported are medians over rounds of relgrade / DuckDB within the round (same format). All
outputs must hold the same pairs; the script stops if they differ.

``--stage`` times the pool stage as DVC runs it: a relgrade repository with an experiment of
the workload (``relgrade init``: the 5,000 queries, a corpus of every chunk id the runs can
name (2^21), the ten TREC runs as file arms, pool depth 10; the stages before ``pool`` run
once) is made under ``--out`` and kept; then each round runs, in rotated order, the stage's
``cmd`` from the experiment's dvc.yaml in the experiment's folder with ``DVC_STAGE`` set
(the stage entry point, params, the pipeline's shape check, imports, every check, all four
outputs), the same with the ``src/`` of git revision ``--base``, and two DuckDB anchors on
the experiment's TREC runs: the issue's ``SELECT DISTINCT ... WHERE rank <= 10`` and the
same score ranking relgrade does (``QUALIFY row_number() ...``), each ``COPY``-ed to Parquet.
CPU seconds from ``os.wait4``; ratios are medians over rounds of the within-round ratio. The
script stops if two runs of the stage (either revision) write different bytes, or if
DuckDB's score ranking pools other pairs.

Without ``--process``, the contenders run inside this process (the numbers before the whole
process was measured):

Workload (a) is 5,000 queries x 10 arms x depth 100 (about 5M run rows), one run per arm as
TREC text and as Parquet. The pool is every arm's top ``--depth`` per query, deduplicated,
ranked the trec_eval way (score descending, then chunk id descending). Every contender's
pool must hold the same pairs; the script stops if they differ.

Contenders (wall clock, best of ``--repeat`` rounds; the rounds interleave the contenders so
a busy machine slows them alike):

* relgrade, Parquet: what ``stages/pool.py`` does after reading the id tables: per arm (in
  threads) ``read_run`` and ``pool.top_candidates``; then ``runs.canonical_ranking`` of
  the stacked candidates and ``pool.build_pool`` (pool, provenance and statistics);
* relgrade, Parquet + validation: the same with ``runs.validate_run`` on every full run
  (duplicates and non-finite scores; the stage also checks ids against queries and chunks);
* relgrade, TREC end to end: as the previous, reading the TREC files;
* DuckDB, Parquet / TREC: ``row_number() OVER (PARTITION BY arm, query ORDER BY score DESC,
  chunk_id DESC) <= depth`` with ``QUALIFY``, then ``DISTINCT``, fetched as a DataFrame;
* pandas, Parquet: ``read_parquet``, ``concat``, ``sort_values`` on the four keys,
  ``groupby(...).head(depth)``, ``drop_duplicates``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

np = pd = runs = read_run = pool = None  # imported by _load(): a DuckDB worker never does


def _load() -> None:
    global np, pd, runs, read_run, pool
    import numpy as np
    import pandas as pd

    from relgrade import ranking as runs
    from relgrade.io.runs import read_run
    from relgrade.protocol import pool


def relgrade_pool(folder: Path, arms: list[str], suffix: str, depth: int, *,
                  validate: bool) -> pd.DataFrame:
    def load(arm):
        run = read_run(folder / f"{arm}{suffix}")
        if validate:
            runs.validate_run(run, path=folder / f"{arm}{suffix}")
        return pool.top_candidates(run, depth).assign(arm=arm)

    with ThreadPoolExecutor() as workers:
        stacked = list(workers.map(load, arms))
    ranked = runs.canonical_ranking(pd.concat(stacked, ignore_index=True))
    return pool.build_pool(ranked, depth=depth)[0]


def relgrade_steps(folder: Path, arms: list[str], depth: int) -> dict[str, float]:
    """Seconds per step of the Parquet path, single-threaded, for the breakdown."""
    out = {}
    t = time.perf_counter()
    read = [read_run(folder / f"{a}.parquet") for a in arms]
    out["read_run (10 Parquet files)"] = time.perf_counter() - t
    t = time.perf_counter()
    for r in read:
        runs.validate_run(r)
    out["validate_run (5M rows)"] = time.perf_counter() - t
    t = time.perf_counter()
    cut = [pool.top_candidates(r, depth).assign(arm=a) for r, a in zip(read, arms)]
    stacked = pd.concat(cut, ignore_index=True)
    out[f"top_candidates + concat ({len(stacked):,} rows kept)"] = time.perf_counter() - t
    t = time.perf_counter()
    ranked = runs.canonical_ranking(stacked)
    out["canonical_ranking of the kept rows"] = time.perf_counter() - t
    t = time.perf_counter()
    table = pool.build_pool(ranked, depth=depth)[0]
    out["build_pool (pool, provenance, stats)"] = time.perf_counter() - t
    t = time.perf_counter()
    pool.pool_version(table)
    out["pool_version (sha256 of canonical JSONL)"] = time.perf_counter() - t
    return out


DUCKDB_SQL = """
SELECT DISTINCT query_id, chunk_id FROM ({source})
QUALIFY row_number() OVER (PARTITION BY arm, query_id
                           ORDER BY score DESC, chunk_id DESC) <= {depth}
"""


def duckdb_source(folder: Path, fmt: str) -> str:
    if fmt == "parquet":
        source = (f"SELECT regexp_extract(filename, '([^/]+)[.]parquet$', 1) AS arm, query_id, "
                  f"chunk_id, score FROM read_parquet('{folder}/*.parquet', filename = true)")
    else:
        source = (f"SELECT column5 AS arm, column0 AS query_id, column2 AS chunk_id, "
                  f"column4 AS score FROM read_csv('{folder}/*.trec', delim = ' ', "
                  f"header = false, columns = {{'column0': 'VARCHAR', 'column1': 'VARCHAR', "
                  f"'column2': 'VARCHAR', 'column3': 'BIGINT', 'column4': 'DOUBLE', "
                  f"'column5': 'VARCHAR'}})")
    return source


def duckdb_pool(folder: Path, depth: int, fmt: str) -> pd.DataFrame:
    import duckdb

    source = duckdb_source(folder, fmt)
    with duckdb.connect() as con:
        return con.execute(DUCKDB_SQL.format(source=source, depth=depth)).df()


def pandas_pool(folder: Path, arms: list[str], depth: int) -> pd.DataFrame:
    df = pd.concat([pd.read_parquet(folder / f"{a}.parquet").assign(arm=a) for a in arms],
                   ignore_index=True)
    df = df.sort_values(["arm", "query_id", "score", "chunk_id"],
                        ascending=[True, True, False, False])
    top = df.groupby(["arm", "query_id"], sort=False).head(depth)
    return top[["query_id", "chunk_id"]].drop_duplicates()


# --- whole processes ---------------------------------------------------------------------

PROCESS_CONTENDERS = ("relgrade", "relgrade, pandas path", "DuckDB", "relgrade, id checks",
                      "relgrade, pandas path, id checks")
STAGE = "relgrade pool stage"  # --stage: the stage process as DVC runs it
CORPUS = 1 << 21  # generate.py draws chunk ids doc0 .. doc2097151


def write_known(folder: Path, out: Path) -> None:
    """The query table and the corpus the workload's runs name (ids only): the query ids of
    the runs and every chunk id ``generate.py`` can draw (2^21), for the id-check rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    ids = pa.chunked_array([pq.read_table(p, columns=["query_id"])["query_id"].combine_chunks()
                            for p in sorted(folder.glob("*.parquet"))])
    pq.write_table(pa.table({"query_id": pc.unique(ids.combine_chunks())}),
                   out / "queries.parquet")
    chunks = pa.array(np.char.add("doc", np.arange(CORPUS).astype(str)).tolist(),
                      type=pa.large_string())
    pq.write_table(pa.table({"chunk_id": chunks}), out / "chunks.parquet")


def worker(name: str, fmt: str, folder: Path, out: Path, depth: int) -> None:
    """One contender's whole job, run as its own process (``--worker``)."""
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".parquet" if fmt == "parquet" else ".trec"
    if name == "DuckDB":
        import duckdb

        source = duckdb_source(folder, fmt)
        with duckdb.connect() as con:
            con.execute(f"COPY ({DUCKDB_SQL.format(source=source, depth=depth)} "
                        f"ORDER BY query_id, chunk_id) TO '{out / 'pool.parquet'}' "
                        "(FORMAT parquet)")
        return
    import relgrade.experiment.stage  # noqa: F401  (what the stage's process imports)
    _load()
    from relgrade.io.files import write_arrow_parquet, write_json, write_parquet
    from relgrade.pipeline.stages.pool import pool_files

    paths = {p.stem: p for p in sorted(folder.glob(f"*{suffix}"))}
    checks = name.endswith("id checks")
    if checks:  # as the stage reads them (pool.known_ids)
        from relgrade.io.files import read_table

        queries = read_table(out.parent / "known" / "queries.parquet")["query_id"]
        chunks = read_table(out.parent / "known" / "chunks.parquet")["chunk_id"]
    if "pandas" not in name:
        known = {"queries": queries, "chunks": chunks} if checks else {}
        table, provenance, stats = pool_files(paths, depth=depth, **known)
    else:
        import pandas as pd

        from relgrade import ranking
        from relgrade.io.runs import read_run

        def load(arm):
            run = read_run(paths[arm])
            known = {"queries": queries, "chunks": chunks} if checks else {}
            ranking.validate_run(run, path=paths[arm], **known)
            return pool.top_candidates(run, depth).assign(arm=arm)

        with ThreadPoolExecutor() as workers:
            stacked = list(workers.map(load, paths))
        table, provenance, stats = pool.build_pool(
            ranking.canonical_ranking(pd.concat(stacked, ignore_index=True)), depth=depth)
    # the stage's code gives Arrow tables (written as the stage writes them), the pandas
    # path DataFrames
    write = write_parquet if "pandas" in name else write_arrow_parquet
    write(out / "pool.parquet", table)
    write(out / "provenance.parquet", provenance)
    write_json(out / "manifest.json", pool.pool_manifest(
        table, seed=0, depth=depth, tail_sample=0, tail_depth=None, arms=list(paths)))
    write_json(out / "stats.json", stats)


STAGE_EXP = "experiments/pooling"


def stage_experiment(data: Path, root: Path) -> Path:
    """A relgrade repository in ``root`` whose experiment ``experiments/pooling`` pools the
    workload's ten TREC runs as the ``pool`` stage does; return the experiment's folder.

    Made once (kept in ``root``) with ``relgrade init``: the 5,000 query ids of the runs,
    a corpus of every chunk id ``generate.py`` can draw (2^21 chunks, short text), the
    ten runs as ``--run`` arms, pool depth 10. The stages before ``pool`` (corpus,
    queries, the arms' runs) then run as DVC runs them, so the pool stage reads what a
    pipeline would give it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_scale

    exp = root / STAGE_EXP
    if (exp / "data/runs").is_dir() and (root / ".made").exists():
        return exp
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    repo = bench_scale.REPO
    for name in ("stages", "rubric"):
        shutil.copytree(repo / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(repo / name, root / name)
    env = bench_scale._env()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
    inp = root / "input"
    inp.mkdir()
    runs = sorted((data / "runs").glob("*.trec"))
    ids = pc.unique(pa.chunked_array(
        [pq.read_table(p.with_suffix(".parquet"), columns=["query_id"])["query_id"]
         for p in runs]).combine_chunks()).to_pylist()
    ids.sort(key=int)
    with open(inp / "queries.tsv", "w") as f:
        f.write("query_id\tquery\tgroup\n")
        f.writelines(f"{q}\tfind function {q}\t{('keyword', 'question')[int(q) % 2]}\n"
                     for q in ids)
    with open(inp / "intents.tsv", "w") as f:
        f.write("query_id\tquery\tintent\n")
        f.writelines(f"{q}\tfind function {q}\tWhere is function {q} defined?\n" for q in ids)
    n = np.arange(CORPUS)
    chunk = np.char.add("doc", n.astype(str))
    module = np.char.add(np.char.add("src/m", (n % 97).astype(str)), ".py")
    pq.write_table(pa.table({
        "chunk_id": chunk.tolist(),
        "header": np.char.add(module, np.char.add(" \u203a def f", n.astype(str))).tolist(),
        "text": np.char.add(np.char.add("def f", n.astype(str)), "(): pass").tolist(),
        "source": module.tolist()}), inp / "chunks.parquet")
    relgrade = [sys.executable, "-c", "from relgrade.cli import main; main()"]
    for p in runs:
        shutil.copy(p, inp / p.name)
    subprocess.run([*relgrade, "init", STAGE_EXP, "--corpus", "input/chunks.parquet",
                    "--queries", "input/queries.tsv", "--intents", "input/intents.tsv",
                    *[x for p in runs for x in ("--run", f"{p.stem}=input/{p.name}")],
                    "--pool-depth", "10", "--seed", "7"],
                   cwd=root, check=True, env=env)
    for name, cmd in bench_scale.stage_commands(exp):
        if name == "pool":
            break
        subprocess.run(cmd, cwd=exp, check=True, env={**env, "DVC_STAGE": name})
    (root / ".made").write_text("")
    return exp


def stage_command(exp: Path) -> list[str]:
    """The pool stage's ``cmd`` from the experiment's dvc.yaml, ``python`` as this one."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_scale

    return dict(bench_scale.stage_commands(exp))["pool"]


def run_process(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    """CPU seconds (user + sys), wall seconds and peak RSS (MiB) of one child process."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{err}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "user": usage.ru_utime,
            "sys": usage.ru_stime, "wall": wall, "rss": usage.ru_maxrss / 1024}


def process_main(args) -> int:
    folder = args.data / "runs"
    out_root = args.out
    jobs = [(name, fmt) for fmt in ("parquet", "trec") for name in PROCESS_CONTENDERS]
    # in a child process: a child's peak RSS counts the parent's memory at the fork
    subprocess.run([sys.executable, __file__, "--write-known", "--data", str(args.data),
                    "--out", str(out_root)], check=True)
    results = {job: [] for job in jobs}
    load_start = os.getloadavg()
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} "
          f"{load_start[2]:.2f}", flush=True)
    for r in range(args.rounds):
        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
        for name, fmt in order:
            out = out_root / f"{name.replace(' ', '_').replace(',', '')}-{fmt}"
            m = run_process([sys.executable, __file__, "--worker", name, "--format", fmt,
                             "--data", str(args.data), "--out", str(out),
                             "--depth", str(args.depth)])
            results[(name, fmt)].append(m)
            print(f"round {r + 1} {name:22} {fmt:8} cpu {m['cpu']:6.2f} (user {m['user']:.2f}"
                  f" sys {m['sys']:.2f}) wall {m['wall']:6.2f} rss {m['rss']:6.0f} MiB",
                  flush=True)
    load_end = os.getloadavg()
    # every output holds the same pairs
    reference = None
    for name, fmt in jobs:
        got = pairs(pd.read_parquet(out_root / f"{name.replace(' ', '_').replace(',', '')}-"
                                               f"{fmt}" / "pool.parquet"))
        if reference is None:
            reference = got
        elif got != reference:
            print(f"{name} ({fmt}): pool differs", file=sys.stderr)
            return 1
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print(f"{len(reference):,} pooled pairs; {args.rounds} rounds; machine: "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, numpy {np.__version__}")
    print(f"\n{'contender':24} {'format':8} {'CPU s':>6} {'user':>5} {'sys':>5} {'wall s':>7} "
          f"{'RSS MiB':>8} {'CPU / DuckDB':>13} {'wall / DuckDB':>14} {'RSS / DuckDB':>13}")
    for name, fmt in jobs:
        ms, duck = results[(name, fmt)], results[("DuckDB", fmt)]
        med = {k: float(np.median([m[k] for m in ms])) for k in ms[0]}
        ratio = {k: float(np.median([a[k] / b[k] for a, b in zip(ms, duck)]))
                 for k in ("cpu", "wall", "rss")}
        print(f"{name:24} {fmt:8} {med['cpu']:6.2f} {med['user']:5.2f} {med['sys']:5.2f} "
              f"{med['wall']:7.2f} {med['rss']:8.0f} {ratio['cpu']:13.2f} {ratio['wall']:14.2f}"
              f" {ratio['rss']:13.2f}")
    return 0


DUCKDB_TOPK_SQL = """
COPY (SELECT DISTINCT column0 AS query_id, column2 AS chunk_id FROM {source}
      WHERE column3 <= {depth} ORDER BY query_id, chunk_id) TO '{out}' (FORMAT parquet)
"""
STAGE_OUTPUTS = ("data/pool/pool.parquet", "data/private/provenance.parquet",
                 "data/pool/manifest.json", "metrics/pool.json")


def trec_source(folder: Path) -> str:
    return (f"read_csv('{folder}/*.trec', delim = ' ', header = false, columns = {{"
            "'column0': 'VARCHAR', 'column1': 'VARCHAR', 'column2': 'VARCHAR', "
            "'column3': 'BIGINT', 'column4': 'DOUBLE', 'column5': 'VARCHAR'})")


def duckdb_stage_worker(kind: str, runs: Path, out: Path, depth: int) -> None:
    """The anchors of ``--stage``, from the experiment's TREC runs: the issue's ``rank <=
    depth`` union, or the same score ranking relgrade does (``QUALIFY row_number()``)."""
    import duckdb

    out.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as con:
        if kind == "rank":
            con.execute(DUCKDB_TOPK_SQL.format(source=trec_source(runs), depth=depth, out=out))
        else:
            source = (f"SELECT column5 AS arm, column0 AS query_id, column2 AS chunk_id, "
                      f"column4 AS score FROM {trec_source(runs)}")
            con.execute(f"COPY ({DUCKDB_SQL.format(source=source, depth=depth)} ORDER BY "
                        f"query_id, chunk_id) TO '{out}' (FORMAT parquet)")


def _build_scan(tree: Path) -> None:
    """Build the C scan of a revision extracted in ``tree`` (``git archive`` holds its
    source, not the module an install builds): without it the base's stage would read every
    run with the slower reader, and the pairing would measure the module, not the change."""
    if not (tree / "src/relgrade/io/_trec_scan.c").exists():
        return  # before the C scan: nothing to build
    # setuptools' own Extension, as setup.py declares it (the tree holds no pyproject.toml,
    # whose metadata this setuptools need not read)
    subprocess.run([sys.executable, "-c", "from setuptools import Extension, setup; setup("
                    "script_args=['-q', 'build_ext', '--inplace'], package_dir={'': 'src'}, "
                    "ext_modules=[Extension("
                    "'relgrade.io._trec_scan', ['src/relgrade/io/_trec_scan.c'])])"],
                   cwd=tree, check=True, capture_output=True)


def stage_main(args) -> int:
    """``--stage``: the pool stage as DVC runs it, paired with DuckDB on its TREC runs."""
    import hashlib

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_scale

    exp = stage_experiment(args.data, args.out / "stage-repo")
    cmd = stage_command(exp)
    srcs = {"pool stage": bench_scale.REPO / "src"}
    if args.base:
        tree = args.out / f"base-{args.base}"
        if not tree.exists():
            tree.mkdir(parents=True)
            archive = subprocess.run(["git", "-C", str(bench_scale.REPO), "archive", args.base,
                                      "src", "stages"], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            _build_scan(tree)
        srcs[f"pool stage at {args.base}"] = tree / "src"
    jobs = [*srcs, "DuckDB, rank <= 10", "DuckDB, score ranking"]
    results = {job: [] for job in jobs}
    digests = {}
    load_start = os.getloadavg()
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} "
          f"{load_start[2]:.2f}", flush=True)
    for r in range(args.rounds):
        for job in jobs[r % len(jobs):] + jobs[:r % len(jobs)]:
            if job in srcs:
                env = {**bench_scale._env(srcs[job]), "DVC_STAGE": "pool"}
                # the entry script of the same revision as the src/ (the experiment's copy
                # is the one of the day it was made)
                m = run_process([*cmd[:-1], str(srcs[job].parent / "stages" / "pool.py")],
                                cwd=exp, env=env)
                digests.setdefault(job, set()).add(tuple(
                    hashlib.sha256((exp / o).read_bytes()).hexdigest() for o in STAGE_OUTPUTS))
            else:
                kind = "score" if "score" in job else "rank"
                m = run_process([sys.executable, __file__, "--duckdb-stage", kind,
                                 "--data", str(exp / "data/runs"), "--out",
                                 str(args.out / f"stage-duckdb-{kind}.parquet"),
                                 "--depth", str(args.depth)])
            results[job].append(m)
            print(f"round {r + 1} {job:28} cpu {m['cpu']:6.2f} (user {m['user']:.2f} sys "
                  f"{m['sys']:.2f}) wall {m['wall']:6.2f} rss {m['rss']:6.0f} MiB", flush=True)
    load_end = os.getloadavg()
    every = set().union(*digests.values())
    if len(every) != 1:
        print("the pool stage's outputs differ between runs or revisions", file=sys.stderr)
        return 1
    reference = pairs(pd.read_parquet(exp / STAGE_OUTPUTS[0]))
    for kind in ("rank", "score"):
        got = pairs(pd.read_parquet(args.out / f"stage-duckdb-{kind}.parquet"))
        if kind == "score" and got != reference:
            print("DuckDB's score ranking pools other pairs", file=sys.stderr)
            return 1
        print(f"DuckDB, {kind}: {len(got):,} pairs ({'same as' if got == reference else 'not'}"
              f" the stage's {len(reference):,})")
    print(f"every run of {', '.join(srcs)}: the same bytes in all four outputs")
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print(f"{args.rounds} rounds; Python {platform.python_version()}, {os.cpu_count()} cores")
    anchors = ("DuckDB, rank <= 10", "DuckDB, score ranking")
    print(f"\n{'contender':28} {'CPU s':>6} {'user':>5} {'sys':>5} {'wall s':>7} {'RSS MiB':>8}"
          + "".join(f" {'CPU / ' + a.split(', ')[1]:>22}" for a in anchors))
    for job in jobs:
        ms = results[job]
        med = {k: float(np.median([m[k] for m in ms])) for k in ms[0]}
        ratios = [float(np.median([a["cpu"] / b["cpu"] for a, b in zip(ms, results[x])]))
                  for x in anchors]
        print(f"{job:28} {med['cpu']:6.2f} {med['user']:5.2f} {med['sys']:5.2f} "
              f"{med['wall']:7.2f} {med['rss']:8.0f}" + "".join(f" {x:22.2f}" for x in ratios))
    return 0


def stage_steps(exp: Path) -> list[tuple[str, float, float]]:
    """User and system CPU seconds of each step of the pool stage's code, in this process,
    one step after another, arms read and cut in one thread (the stage uses one thread per
    core for that step): run as ``--stage-steps-worker`` in a fresh process, so the imports
    are counted. The outputs go to a scratch folder. The last entry is the process's CPU so
    far (the parent subtracts it from the whole process's to get the exit)."""
    import resource
    import tempfile

    def clock():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime, r.ru_stime

    out = []
    last = [clock()]

    def step(name):
        now = clock()
        out.append((name, now[0] - last[0][0], now[1] - last[0][1]))
        last[0] = clock()

    start = clock()
    out.append(("interpreter start (until the stage's first import)", *start))
    last[0] = start
    from relgrade.experiment.files import Experiment
    from relgrade.io.files import write_arrow_parquet, write_json
    from relgrade.io.runtable import read_run_table
    from relgrade.pipeline import runner
    from relgrade.pipeline.stages import pool as stage
    from relgrade.protocol import pool as protocol

    entry = Path(os.environ["PYTHONPATH"]).parent / "stages" / "pool.py"
    if "gc.freeze()" in entry.read_text("utf-8"):
        import gc

        gc.freeze()  # as the stage's entry script does after its imports
    step("imports (relgrade.pipeline.runner, the stage module)")
    ex = Experiment.load(exp / "params.yaml")
    os.environ["DVC_STAGE"] = "pool"
    runner.require_rendered(ex)
    step("params and the pipeline's shape check")
    queries, chunks = stage.known_ids(ex)
    step("known ids: the id column of the query table and of the corpus")
    arms = [str(a) for a in ex.params.need("arms")]
    cuts = {}
    if hasattr(stage, "_scanned_candidates"):
        # the compiled path: the known ids as hash tables, each run scanned, every row's
        # ids looked up, then cut
        from relgrade.io.runcolumns import scanned_table
        from relgrade.io.trec_scan import scan_trec_run, scanned_ids_known
        from relgrade.ranking import arrow_array

        known = stage._known_tables(queries, chunks)
        assert known is not None, "the C module is not built"
        step("known ids: compiled tables of the query and chunk ids")
        for a in arms:
            scanned = scan_trec_run(ex.path("runs") / f"{a}.trec")
            step(f"scan: read {a}.trec (compiled: parse, chunk hashes, repeat proof)")
            assert scanned_ids_known(scanned, queries=known[0], chunks=known[1])
            step(f"scan: check ids of {a} (compiled tables, every row)")
            table, codes = scanned_table(scanned)
            assert codes.distinct
            keep = protocol.candidate_mask(codes.query, scanned.score, scanned.rank, 10)
            cuts[a] = table.filter(arrow_array(keep))
            del scanned, table, codes
            step(f"scan: cut {a}")
    else:
        chunk_ids = []
        for a in arms:
            run = read_run_table(ex.path("runs") / f"{a}.trec")
            step(f"scan: read {a}.trec into Arrow")
            cuts[a] = protocol.arm_candidates(run, 10)
            chunk_ids.append(run["chunk_id"])
            del run
            step(f"scan: check and cut {a}")
        from relgrade.tables.engine import connect
        from relgrade.tables.pooling import runs_naming_unknown_ids

        with connect() as con:
            assert not runs_naming_unknown_ids(
                con, query_ids=[c["query_id"] for c in cuts.values()], chunk_ids=chunk_ids,
                queries=queries, chunks=chunks)
        step("known-id check (one DuckDB query, every row of every arm)")
        del chunk_ids
    table, provenance, stats = protocol.pool_tables(cuts, depth=10)
    step("union: rank the candidates, pool, provenance, statistics")
    with tempfile.TemporaryDirectory() as scratch:
        write_arrow_parquet(Path(scratch) / "pool.parquet", table)
        step("write the pool (Parquet)")
        write_arrow_parquet(Path(scratch) / "provenance.parquet", provenance)
        step("write the provenance (Parquet)")
        write_json(Path(scratch) / "manifest.json", protocol.pool_manifest(
            table, seed=0, depth=10, tail_sample=0, tail_depth=None, arms=arms))
        step("write the manifest (pool version: sha256 of the canonical JSON Lines)")
        write_json(Path(scratch) / "stats.json", stats)
        step("write the statistics")
    out.append(("(in-process total)", *clock()))
    out.append(("(pandas loaded)", float("pandas" in sys.modules), 0.0))
    return out


def stage_steps_main(args) -> int:
    """``--stage-steps``: :func:`stage_steps` in fresh processes, ``--rounds`` times, paired
    with the same steps on the ``src/`` of ``--base`` when given; medians per step."""
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_scale

    exp = args.out / "stage-repo" / STAGE_EXP
    srcs = {"this change": bench_scale.REPO / "src"}
    if args.base:
        srcs[args.base] = args.out / f"base-{args.base}" / "src"
        if not srcs[args.base].exists():
            print(f"run --stage --base {args.base} first (it extracts that src/)",
                  file=sys.stderr)
            return 1
    got = {name: [] for name in srcs}
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
          flush=True)
    for r in range(args.rounds):
        for name in list(srcs)[r % len(srcs):] + list(srcs)[:r % len(srcs)]:
            proc = subprocess.Popen([sys.executable, __file__, "--stage-steps-worker",
                                     "--out", str(args.out)], stdout=subprocess.PIPE,
                                    env=bench_scale._env(srcs[name]))
            _, status, usage = os.wait4(proc.pid, 0)
            steps = json.loads(proc.stdout.read())
            proc.stdout.close()
            if status:
                raise SystemExit(f"--stage-steps-worker failed ({name})")
            inside = next(s for s in steps if s[0] == "(in-process total)")
            steps.append(("exit (interpreter teardown)", usage.ru_utime - inside[1],
                          usage.ru_stime - inside[2]))
            steps.append(("whole process (os.wait4)", usage.ru_utime, usage.ru_stime))
            for what in ("read", "check and cut", "check ids of", "cut"):
                mine = [x for x in steps if x[0].startswith(f"scan: {what} ")]
                if mine:
                    steps.append((f"scan: {what}, the ten arms together",
                                  sum(x[1] for x in mine), sum(x[2] for x in mine)))
            got[name].append(steps)
            print(f"round {r + 1} {name}: {usage.ru_utime + usage.ru_stime:.2f} CPU-s",
                  flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # the steps of every revision, in the order each gives them (revisions may differ)
    names = list(dict.fromkeys(s[0] for name in srcs for s in got[name][0]
                               if s[0] != "(in-process total)"))
    print(f"\n{'step':74}" + "".join(f" {n[:22]:>22}" for n in srcs))
    for i, step in enumerate(names):
        cells = []
        for name in srcs:
            if step not in dict((s[0], s[1:]) for s in got[name][0]):
                cells.append(f"{'-':>22}")
                continue
            rows = [dict((s[0], s[1:]) for s in steps)[step] for steps in got[name]]
            if step == "(pandas loaded)":
                cells.append(f"{'yes' if rows[0][0] else 'no':>22}")
                continue
            u = float(np.median([x[0] for x in rows]))
            t = float(np.median([x[1] for x in rows]))
            cells.append(f"{u + t:8.3f} ({u:.2f}+{t:.2f})".rjust(22))
        print(f"{step:74}" + "".join(cells))
    return 0


def pairs(df: pd.DataFrame) -> set:
    return set(zip(df["query_id"].astype(str), df["chunk_id"].astype(str)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/pooling"))
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--process", action="store_true",
                    help="time whole processes, paired with DuckDB (see above)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --process")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/pool"),
                    help="where --process contenders write their outputs")
    ap.add_argument("--stage", action="store_true",
                    help="time the pool stage as DVC runs it on a generated experiment "
                         "(made once under --out), paired with DuckDB on its TREC runs")
    ap.add_argument("--base", help="with --stage: also time the stage of this git revision")
    ap.add_argument("--stage-steps", action="store_true",
                    help="CPU seconds (user+sys) per step of the pool stage's code on the "
                         "--stage experiment (made first with --stage), in --rounds fresh "
                         "processes, paired with --base when given")
    ap.add_argument("--stage-steps-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--duckdb-stage", choices=["rank", "score"], help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=PROCESS_CONTENDERS, help=argparse.SUPPRESS)
    ap.add_argument("--format", choices=["parquet", "trec"], help=argparse.SUPPRESS)
    ap.add_argument("--write-known", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    # absolute: the stage's processes run in the experiment's folder, where a relative
    # PYTHONPATH to --base's src/ would name nothing (and the installed src/ would be used)
    args.out = args.out.resolve()
    if args.write_known:
        _load()
        write_known(args.data / "runs", args.out / "known")
        return 0
    if args.stage_steps_worker:
        import json

        print(json.dumps(stage_steps(args.out / "stage-repo" / STAGE_EXP)))
        return 0
    if args.stage_steps:
        _load()
        return stage_steps_main(args)
    if args.duckdb_stage:
        duckdb_stage_worker(args.duckdb_stage, args.data, args.out, args.depth)
        return 0
    if args.worker:
        worker(args.worker, args.format, args.data / "runs", args.out, args.depth)
        return 0
    _load()
    if args.stage:
        return stage_main(args)
    if args.process:
        return process_main(args)
    folder = args.data / "runs"
    arms = sorted(p.stem for p in folder.glob("*.parquet"))
    if not arms:
        print(f"no runs in {folder}: run benchmarks/generate.py first", file=sys.stderr)
        return 1
    rows = sum(len(pd.read_parquet(folder / f"{a}.parquet", columns=["rank"])) for a in arms)

    contenders = {
        "relgrade, Parquet": lambda: relgrade_pool(folder, arms, ".parquet", args.depth,
                                                    validate=False),
        "relgrade, Parquet + validation": lambda: relgrade_pool(folder, arms, ".parquet",
                                                                 args.depth, validate=True),
        "relgrade, TREC end to end": lambda: relgrade_pool(folder, arms, ".trec", args.depth,
                                                            validate=True),
        "DuckDB, Parquet": lambda: duckdb_pool(folder, args.depth, "parquet"),
        "DuckDB, TREC": lambda: duckdb_pool(folder, args.depth, "trec"),
        "pandas, Parquet": lambda: pandas_pool(folder, arms, args.depth),
    }
    times = {name: [] for name in contenders}
    reference = None
    for _ in range(args.repeat):
        for name, fn in contenders.items():
            t = time.perf_counter()
            result = fn()
            times[name].append(time.perf_counter() - t)
            got = pairs(result)
            if reference is None:
                reference = got
            elif got != reference:
                print(f"{name}: pool differs ({len(got):,} vs {len(reference):,} pairs)",
                      file=sys.stderr)
                return 1

    duck = min(times["DuckDB, Parquet"])
    print(f"workload (a): {len(arms)} arms, {rows:,} run rows, depth {args.depth}, "
          f"{len(reference):,} pooled pairs; best of {args.repeat}")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}")
    print(f"{'contender':34} {'best s':>7} {'median s':>9} {'x DuckDB':>9}")
    for name, ts in times.items():
        print(f"{name:34} {min(ts):7.2f} {np.median(ts):9.2f} {min(ts) / duck:9.2f}")
    print("\nrelgrade, Parquet, step by step (one thread, one round):")
    for step, seconds in relgrade_steps(folder, arms, args.depth).items():
        print(f"  {step:48} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
