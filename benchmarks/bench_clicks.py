"""Click training set at scale: propensities and IPS-weighted pairs from 10M impressions.

    python benchmarks/bench_clicks.py --generate            # writes benchmarks/data/clicks/
    python benchmarks/bench_clicks.py --repeat 3            # writes benchmarks/out/clicks.json

The log is simulated under the position-based model and written as one Parquet file:
1,000,000 sessions x 10 positions (10M impressions), 20,000 queries with 20 candidate chunks
each (relevance ~ U(0.05, 0.9)), three rankers (r0 a random order of each query's
candidates, r1 and r2 the same with each adjacent pair swapped with probability 0.3), a
session's query and ranker drawn uniformly, 5% of sessions in a FairPairs randomized slice,
and clicks with probability p(k) * r, p(k) = 1 / k. Ids are strings (``s00000001``,
``q00001``, ``d0000001``), as in a real log. The log is written in session order
(``log.parquet``) and, with the same rows in a seeded random order, as ``log-shuffled.parquet``;
every contender of the first table also runs on the shuffled file (``...-shuffled``).

Each contender runs in its own Python process, one after another (rounds interleaved), so
its peak resident memory is its own (``VmHWM``; DuckDB runs inside the process, so its
memory counts). The timed span starts after imports and ends when the output exists; the
process wall time includes interpreter start-up and imports. For the propensity contenders the
bootstrap (``N_BOOT`` resamples) is timed on its own inside the span (relgrade's
``propensity.bootstrap_chain``, the pandas contenders' ``_bootstrap``); the point estimate's
time is the span without it. The parent also takes each process's CPU-seconds (user + system
of the whole process, interpreter start-up and imports included, from ``RUSAGE_CHILDREN``
around the child), which load does not inflate the way it inflates wall time; the pairs files
are digested by the parent afterwards, outside the measured process. Each round records the
load average before and after it, and the summary gives, per pair of contenders, the median
over rounds of the per-round ratio (pandas over relgrade: time of the point estimate, wall
time and CPU-seconds of the whole process, peak memory).

Contenders:

* ``relgrade propensity randomization`` / ``harvesting``: ``relgrade clicks propensity LOG
  --method ... --out FILE.json`` run through the CLI's entry point (log validation, DuckDB
  SQL over the Parquet file, 1,000 bootstrap resamples);
* ``relgrade pairs``: ``relgrade clicks pairs LOG --propensity FILE.json --out PAIRS.parquet``;
* ``relgrade ... -1gb``: the same three commands with ``--memory-limit 1GB``, so that
  DuckDB must spill the joins and the sort to disk (its ``.tmp`` folder);
* ``spark ...``: the same three commands with ``--engine spark`` (PySpark in local mode on two
  cores, session start-up included in the timed span; the JVM's peak memory is added to the
  Python process's);
* ``pandas propensity randomization`` / ``harvesting`` / ``pairs``: the same computations
  written the plain way: ``read_parquet`` of the needed columns, ``groupby``, ``merge``,
  ``sort_values``, ``to_parquet``; the same bootstrap (session or query resampling, numpy).
  The pandas contenders do not validate the log (relgrade does, in the same grouped pass of
  DuckDB that reads the randomization estimate and the clicks per position).

* ``base-relgrade-...`` (with ``--base-src DIR``): relgrade's contenders again on another
  checkout's ``src`` (``DIR`` first on ``PYTHONPATH``), each right after the contender it is
  the "before" of, so that a change is measured before and after in the same rounds.

The parent checks that relgrade, Spark and pandas agree (and the base code, when run): the same propensities (to 1e-9) and
the same pairs in the same order (count and an order-sensitive checksum of every row).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SESSIONS = 1_000_000
POSITIONS = 10
QUERIES = 20_000
CANDIDATES = 20
RANKERS = 3
RANDOMIZED_SHARE = 0.05
BLOCK = 250_000
N_BOOT = 1000
SEED = 7

SHUFFLE_SEED = 11

_MAIN = ("relgrade-randomization", "pandas-randomization", "relgrade-harvesting",
         "pandas-harvesting", "relgrade-pairs", "pandas-pairs")
TASKS = (*_MAIN, *(f"{t}-shuffled" for t in _MAIN),
         "relgrade-randomization-1gb", "relgrade-harvesting-1gb", "relgrade-pairs-1gb",
         "spark-randomization", "spark-harvesting", "spark-pairs")
#: Contenders run when --only is not given (Spark and the 1 GB limit on request).
DEFAULT_TASKS = (*_MAIN, *(f"{t}-shuffled" for t in _MAIN))
#: relgrade's contenders run again on another checkout's code with --base-src: the same
#: command line, the other tree's ``src`` first on the path (a before/after in the same rounds).
BASE_TASKS = tuple(f"base-{t}" for t in DEFAULT_TASKS if t.startswith("relgrade-"))
TASKS = (*TASKS, *BASE_TASKS)


# --- data ----------------------------------------------------------------------------

def _ids(prefix: str, values, width: int):
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_lpad(pc.cast(pa.array(values), pa.string()), width=width, padding="0")
    return pc.binary_join_element_wise(pa.scalar(prefix), text, "")


def generate(out: Path, *, seed: int = SEED, sessions: int = SESSIONS) -> Path:
    """Write the simulated log to ``out/log.parquet`` in blocks of 250,000 sessions."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from relgrade.clicks import simulate

    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, POSITIONS + 1)
    relevance = rng.uniform(0.05, 0.9, size=(QUERIES, CANDIDATES))
    lists = simulate.ranker_lists(rng, queries=QUERIES, chunks=CANDIDATES, positions=POSITIONS,
                                  rankers=RANKERS)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "log.parquet"
    schema = pa.schema([("session_id", pa.string()), ("query_id", pa.string()),
                        ("chunk_id", pa.string()), ("position", pa.int64()),
                        ("clicked", pa.int8()), ("ranker", pa.string()),
                        ("randomized", pa.bool_())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, sessions, BLOCK):
            n = min(BLOCK, sessions - start)
            q = rng.integers(0, QUERIES, n)
            rk = rng.integers(0, RANKERS, n)
            shown, flagged = simulate.fair_pairs(lists[q, rk], rng, share=RANDOMIZED_SHARE)
            clicked = rng.random((n, POSITIONS)) < p[None, :] * relevance[q[:, None], shown]
            session = np.repeat(np.arange(start, start + n), POSITIONS)
            query = np.repeat(q, POSITIONS)
            table = pa.table({
                "session_id": _ids("s", session, 8),
                "query_id": _ids("q", query, 5),
                "chunk_id": _ids("d", query * CANDIDATES + shown.ravel(), 7),
                "position": np.tile(np.arange(1, POSITIONS + 1), n),
                "clicked": clicked.ravel().astype(np.int8),
                "ranker": _ids("r", np.repeat(rk, POSITIONS), 1),
                "randomized": flagged.ravel(),
            }, schema=schema)
            writer.write_table(table, row_group_size=1 << 20)
    shuffle(path, out / "log-shuffled.parquet")
    return path


def shuffle(path: Path, out: Path, *, seed: int = SHUFFLE_SEED) -> Path:
    """Write the rows of ``path`` to ``out`` in a seeded random order (row groups of 2^20)."""
    import duckdb

    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT * FROM read_parquet('{path}') ORDER BY hash(session_id, "
                    f"position, {int(seed)})) TO '{out}' (FORMAT parquet, "
                    "ROW_GROUP_SIZE 1048576)")
    return out


# --- pandas contenders -----------------------------------------------------------------

_BOOT_SECONDS = [0.0]


def _bootstrap(evidence, rng, n_boot):
    """Resample units with replacement; the same estimator relgrade uses."""
    import numpy as np

    from relgrade.clicks.propensity import chain

    t = time.perf_counter()
    n = evidence.shape[0]
    flat = evidence.reshape(n, -1)
    reps = []
    block = max(1, (1 << 22) // n)
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)
        reps.append(chain((w @ flat).reshape(b, -1, 2)))
    reps = np.concatenate(reps)
    ci = np.nanquantile(reps, [0.025, 0.975], axis=0)
    _BOOT_SECONDS[0] += time.perf_counter() - t
    return chain(evidence.sum(axis=0)), ci


def _time_relgrade_bootstrap() -> None:
    """Time relgrade's bootstrap (every engine's curve calls propensity.bootstrap_chain)."""
    from relgrade.clicks import propensity

    inner = propensity.bootstrap_chain

    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            _BOOT_SECONDS[0] += time.perf_counter() - t

    propensity.bootstrap_chain = timed


def pandas_randomization(log: Path, out: Path, max_position: int = POSITIONS) -> dict:
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(log, columns=["session_id", "position", "clicked", "randomized"],
                         filters=[("randomized", "==", True)])
    df = df.sort_values(["session_id", "position"], ignore_index=True)
    df["pair"] = df.groupby("session_id").cumcount() // 2
    pairs = df.groupby(["session_id", "pair"], sort=False).agg(
        upper=("position", "first"), lower=("position", "last"),
        click_upper=("clicked", "first"), click_lower=("clicked", "last")).reset_index()
    if ((pairs["lower"] - pairs["upper"]) != 1).any():
        raise SystemExit("randomized rows do not pair up")
    pairs = pairs[pairs["lower"] <= max_position]
    codes, _ = pd.factorize(pairs["session_id"])
    evidence = np.zeros((codes.max() + 1, max_position - 1, 2))
    np.add.at(evidence, (codes, pairs["upper"].to_numpy() - 1, 0), pairs["click_upper"])
    np.add.at(evidence, (codes, pairs["upper"].to_numpy() - 1, 1), pairs["click_lower"])
    return _write_curve(evidence, out, max_position)


def _write_curve(evidence, out: Path, max_position: int) -> dict:
    """Bootstrap the evidence into a curve, write it as JSON, return the point estimates."""
    import numpy as np

    point, ci = _bootstrap(evidence, np.random.default_rng(0), N_BOOT)
    doc = {"positions": [{"position": k + 1, "propensity": float(point[k]),
                          "ci_low": float(ci[0, k]), "ci_high": float(ci[1, k])}
                         for k in range(max_position)]}
    out.write_text(json.dumps(doc, indent=2))
    return {"propensity": [float(x) for x in point]}


def pandas_harvesting(log: Path, out: Path, max_position: int = POSITIONS) -> dict:
    import numpy as np
    import pandas as pd

    df = pd.read_parquet(log, columns=["session_id", "query_id", "chunk_id", "position",
                                       "clicked", "ranker", "randomized"])
    randomized = df.loc[df["randomized"], "session_id"].unique()
    df = df[~df["session_id"].isin(randomized) & (df["position"] <= max_position)]
    cells = df.groupby(["query_id", "chunk_id", "ranker", "position"], observed=True).agg(
        shown=("clicked", "size"), clicks=("clicked", "sum")).reset_index()
    del df
    rates = cells.groupby(["query_id", "chunk_id", "position"]).agg(
        shown=("shown", "sum"), clicks=("clicks", "sum")).reset_index()
    rates["ctr"] = rates["clicks"] / rates["shown"]
    below = cells.assign(position=cells["position"] - 1)
    links = cells.merge(below, on=["query_id", "chunk_id", "position"], suffixes=("", "_b"))
    links = links[links["ranker"] != links["ranker_b"]]
    links = links[["query_id", "chunk_id", "position"]].drop_duplicates()
    links = links.merge(rates[["query_id", "chunk_id", "position", "ctr"]],
                        on=["query_id", "chunk_id", "position"])
    lower = rates.assign(position=rates["position"] - 1)[
        ["query_id", "chunk_id", "position", "ctr"]]
    links = links.merge(lower, on=["query_id", "chunk_id", "position"],
                        suffixes=("_upper", "_lower"))
    per_query = links.groupby(["query_id", "position"]).agg(
        upper=("ctr_upper", "sum"), lower=("ctr_lower", "sum")).reset_index()
    codes, _ = pd.factorize(per_query["query_id"], sort=True)
    evidence = np.zeros((codes.max() + 1, max_position - 1, 2))
    evidence[codes, per_query["position"].to_numpy() - 1, 0] = per_query["upper"]
    evidence[codes, per_query["position"].to_numpy() - 1, 1] = per_query["lower"]
    return _write_curve(evidence, out, max_position)


def pandas_pairs(log: Path, propensity: Path, out: Path, clip: float = 10.0) -> None:
    import pandas as pd

    curve = json.loads(propensity.read_text())["positions"]
    weight = {p["position"]: min(1.0 / p["propensity"], clip) for p in curve
              if p["propensity"]}
    df = pd.read_parquet(log, columns=["session_id", "query_id", "chunk_id", "position",
                                       "clicked"])
    clicked = df[df["clicked"] == 1]
    clicked = clicked[clicked["position"].isin(list(weight))]
    skipped = df.loc[df["clicked"] == 0, ["session_id", "chunk_id", "position"]]
    del df
    pairs = clicked.merge(skipped, on="session_id", suffixes=("", "_other"))
    pairs = pairs[pairs["position_other"] < pairs["position"]]
    pairs = pairs.sort_values(["session_id", "position", "position_other"], ignore_index=True)
    result = pd.DataFrame({"query_id": pairs["query_id"],
                           "preferred_chunk_id": pairs["chunk_id"],
                           "other_chunk_id": pairs["chunk_id_other"],
                           "weight": pairs["position"].map(weight).astype("float64"),
                           "session_id": pairs["session_id"]})
    result.to_parquet(out, index=False)


# --- relgrade contenders --------------------------------------------------------------

def relgrade_cli(args: list[str]) -> None:
    from relgrade.cli import main

    main(args, standalone_mode=False)


def _pairs_digest(path: Path) -> dict:
    """Count, total weight and an order-sensitive checksum of a pairs file or folder of part
    files (DuckDB; rows numbered in file-name order, then within each file)."""
    import duckdb

    files = str(path / "*.parquet") if path.is_dir() else str(path)
    with duckdb.connect() as con:
        n, total, checksum = con.execute(
            "SELECT count(*), sum(weight), CAST(sum(hash(rn, query_id, preferred_chunk_id, "
            "other_chunk_id, weight, session_id)) AS VARCHAR) FROM (SELECT *, row_number() "
            "OVER (ORDER BY filename, file_row_number) AS rn FROM read_parquet($path, "
            "filename = true, file_row_number = true))", {"path": files}).fetchall()[0]
    return {"pairs": n, "weight_sum": total, "checksum": checksum}


def _peak_mib() -> float:
    """This process's peak resident memory, MiB: ``VmHWM``, which starts afresh at ``exec``.

    (``ru_maxrss`` would not do: Linux carries the high-water mark of the image replaced at
    ``exec`` into it, so a worker would report at least the parent's resident memory at the
    fork, and the parent grows when it digests the pairs.)
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _jvm_peak_mib() -> float:
    """Peak resident memory (VmHWM) of this process's child processes (Spark's JVM), MiB."""
    import psutil

    peak = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            for line in Path(f"/proc/{child.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak += int(line.split()[1]) / 1024
        except OSError:
            pass
    return peak


def relgrade_steps(log: Path, out: Path) -> dict[str, float]:
    """CPU-seconds (this process: user + system) per step of the relgrade path."""
    import numpy as np

    from relgrade import clicks
    from relgrade.clicks import ClickLog
    from relgrade.clicks import pairs as P
    from relgrade.clicks import propensity as PR
    from relgrade.io import files as io

    steps = {}
    t = time.process_time()
    con = clicks.connect()
    log_ = ClickLog.from_relation(con, con.read_parquet(str(log)), source=str(log),
                                  files=[str(log)])
    steps["open and check the log (one pass; keeps the patterns)"] = time.process_time() - t
    t = time.process_time()
    curve = PR.randomization(log_, rng=np.random.default_rng(0), n_boot=N_BOOT)
    steps["randomization (from the patterns + 1,000 resamples)"] = time.process_time() - t
    t = time.process_time()
    PR.harvesting(log_, rng=np.random.default_rng(0), n_boot=N_BOOT)
    steps["harvesting (SQL + 1,000 resamples)"] = time.process_time() - t
    weights = P.ips_weights(curve)
    t = time.process_time()
    rel = P.skip_above(log_, weights)
    steps["pairs: table of weighted clicks"] = time.process_time() - t
    t = time.process_time()
    with io.atomic_path(out / "steps-pairs.parquet") as tmp:
        rel.write_parquet(str(tmp))
    steps["pairs: join, sort, write Parquet"] = time.process_time() - t
    t = time.process_time()
    P.click_summary(log_, weights)
    steps["pairs: click summary (from the patterns)"] = time.process_time() - t
    # The pairs command's path on a sorted log: the check and the pairs in one compiled
    # pass, then the pairs into a temporary table and written.
    columns = P.weight_columns(curve)
    t = time.process_time()
    con = clicks.connect()
    log_ = ClickLog.from_relation(con, con.read_parquet(str(log)), source=str(log),
                                  files=[str(log)], pair_weights=columns)
    steps["compiled: open, check the log and make the pairs (one pass)"] = (
        time.process_time() - t)
    made = P.compiled_for(log_, columns)
    if made is not None:
        t = time.process_time()
        with io.atomic_path(out / "steps-compiled-pairs.parquet") as tmp:
            P.write_compiled(log_, made, tmp)
        steps["compiled: the pairs into a table and written as Parquet"] = (
            time.process_time() - t)
    return steps


# --- harness ---------------------------------------------------------------------------

def worker(task: str, data: Path, out: Path) -> dict:
    shuffled = task.endswith("-shuffled")
    log = data / ("log-shuffled.parquet" if shuffled else "log.parquet")
    name = task
    # A base-... contender is the relgrade contender on the code PYTHONPATH puts first.
    task = task.removesuffix("-shuffled").removeprefix("base-")
    out.mkdir(parents=True, exist_ok=True)
    # Both pairs contenders read the curve relgrade wrote on the sorted log.
    rel_json = out / "relgrade-randomization.json"
    limit = ["--memory-limit", "1GB"] if task.endswith("-1gb") else []
    _time_relgrade_bootstrap()
    start = time.perf_counter()
    spark = ["--engine", "spark"] if task.startswith("spark-") else []
    if task.startswith(("relgrade-randomization", "relgrade-harvesting", "spark-randomization",
                        "spark-harvesting")):
        method = task.split("-")[1]
        target = out / f"{name}.json"
        relgrade_cli(["clicks", "propensity", str(log), "--method", method,
                      "--bootstrap", str(N_BOOT), "--out", str(target), *limit, *spark])
        seconds = time.perf_counter() - start
        doc = json.loads(target.read_text())
        result = {"propensity": [p["propensity"] for p in doc["positions"]]}
    elif task.startswith(("relgrade-pairs", "spark-pairs")):
        target = out / (name if spark else f"{name}.parquet")
        relgrade_cli(["clicks", "pairs", str(log), "--propensity", str(rel_json),
                      "--out", str(target), *limit, *spark])
        seconds = time.perf_counter() - start
        peak = _peak_mib()
        result = {"pairs_path": str(target)}
    elif task == "pandas-randomization":
        result = pandas_randomization(log, out / f"{name}.json")
        seconds = time.perf_counter() - start
    elif task == "pandas-harvesting":
        result = pandas_harvesting(log, out / f"{name}.json")
        seconds = time.perf_counter() - start
    elif task == "pandas-pairs":
        pandas_pairs(log, rel_json, out / f"{name}.parquet")
        seconds = time.perf_counter() - start
        peak = _peak_mib()
        result = {"pairs_path": str(out / f"{name}.parquet")}
    else:
        raise SystemExit(f"unknown task {task}")
    if not task.endswith("pairs") and not task.endswith("pairs-1gb"):
        peak = _peak_mib()
    if spark:
        # Spark's work happens in its JVM, a child process: its peak counts too.
        peak += _jvm_peak_mib()
    boot = _BOOT_SECONDS[0]
    return {"task": name, "seconds": seconds, "bootstrap_s": boot, "point_s": seconds - boot,
            "n_boot": N_BOOT if "pairs" not in task else 0, "peak_rss_mib": peak,
            "result": result}


def run_child(task: str, data: Path, out: Path, base_src: Path | None = None) -> dict:
    """Run one contender in a fresh process; add its CPU-seconds (user + system of the whole
    process, start-up and imports included) and wall time, and digest its pairs afterwards
    (outside the measured process). A ``base-...`` contender runs with ``base_src`` first on
    ``PYTHONPATH``."""
    env = None
    if task.startswith("base-"):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(base_src), *filter(None, [os.environ.get("PYTHONPATH")])])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--worker", task, "--data", str(data),
                           "--out", str(out)], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{task} failed:\n{proc.stderr[-3000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    doc["process_wall"] = wall
    doc["process_cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if "pairs_path" in doc["result"]:
        doc["result"] = _pairs_digest(Path(doc["result"]["pairs_path"]))
    return doc


def _agree(a: dict, b: dict, what: str) -> None:
    if "propensity" in a:
        for x, y in zip(a["propensity"], b["propensity"]):
            if x is None or y is None or abs(x - y) > 1e-9:
                raise SystemExit(f"{what}: propensities differ: {a} vs {b}")
    else:
        same = a["pairs"] == b["pairs"] and a["checksum"] == b["checksum"]
        if not same:
            raise SystemExit(f"{what}: pairs differ: {a} vs {b}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/clicks"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/clicks"))
    ap.add_argument("--generate", action="store_true", help="Write the simulated log and stop.")
    ap.add_argument("--sessions", type=int, default=SESSIONS,
                    help="Sessions to simulate with --generate (10 impressions each).")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=TASKS, default=None)
    ap.add_argument("--steps", action="store_true",
                    help="Print relgrade's CPU-seconds per step (one round, this process) "
                         "and stop.")
    ap.add_argument("--base-src", type=Path, default=None,
                    help="Also run relgrade's contenders on this src folder (another "
                         "checkout's, e.g. `git archive REV src | tar -x -C DIR` then "
                         "DIR/src), interleaved in the same rounds: before and after.")
    ap.add_argument("--worker", choices=TASKS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.data, args.out)))
        return 0
    if args.generate:
        t = time.perf_counter()
        path = generate(args.data, sessions=args.sessions)
        print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - t:.1f} s")
        return 0
    if not (args.data / "log.parquet").exists():
        print("no log: run benchmarks/bench_clicks.py --generate first", file=sys.stderr)
        return 1
    if args.steps:
        args.out.mkdir(parents=True, exist_ok=True)
        for step, seconds in relgrade_steps(args.data / "log.parquet", args.out).items():
            print(f"{step:56} {seconds:6.2f} CPU-s")
        return 0
    if not (args.data / "log-shuffled.parquet").exists():
        shuffle(args.data / "log.parquet", args.data / "log-shuffled.parquet")
    tasks = args.only or list(DEFAULT_TASKS)
    if args.base_src is not None:
        # Each base contender right after the relgrade contender it is the "before" of.
        tasks = [x for t in tasks
                 for x in ((t, f"base-{t}") if f"base-{t}" in BASE_TASKS else (t,))]
    runs: dict[str, list[dict]] = {t: [] for t in tasks}
    loads = []
    for r in range(args.repeat):
        before = os.getloadavg()
        for task in tasks:
            runs[task].append(run_child(task, args.data, args.out, args.base_src))
            last = runs[task][-1]
            print(f"  {task:36} {last['seconds']:7.1f} s  point {last['point_s']:7.1f} s  "
                  f"bootstrap {last['bootstrap_s']:6.1f} s  {last['process_cpu']:6.2f} CPU-s  "
                  f"{last['process_wall']:7.1f} s wall  "
                  f"{last['peak_rss_mib']:6.0f} MiB", flush=True)
        loads.append({"round": r + 1, "load_before": before, "load_after": os.getloadavg()})
        print(f"round {r + 1}: load average {before[0]:.1f} before, "
              f"{loads[-1]['load_after'][0]:.1f} after", flush=True)
    comparisons = [(f"relgrade-{m}{v}", f"pandas-{m}{v}")
                   for v in ("", "-shuffled") for m in ("randomization", "harvesting", "pairs")]
    befores = [(f"base-{t}", t) for t in DEFAULT_TASKS if f"base-{t}" in runs]
    for pair in (*comparisons, *befores,
                 ("relgrade-randomization", "relgrade-randomization-shuffled"),
                 ("relgrade-pairs", "relgrade-pairs-shuffled"),
                 ("relgrade-randomization", "relgrade-randomization-1gb"),
                 ("relgrade-harvesting", "relgrade-harvesting-1gb"),
                 ("relgrade-pairs", "relgrade-pairs-1gb"),
                 ("relgrade-randomization", "spark-randomization"),
                 ("relgrade-harvesting", "spark-harvesting"),
                 ("relgrade-pairs", "spark-pairs")):
        if all(p in runs for p in pair):
            _agree(runs[pair[0]][0]["result"], runs[pair[1]][0]["result"], " vs ".join(pair))
    summary = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average": os.getloadavg()},
        "rounds": loads,
        "n_boot": N_BOOT,
        "tasks": {t: {"median_s": statistics.median(r["seconds"] for r in rs),
                      "min_s": min(r["seconds"] for r in rs),
                      "point_s": statistics.median(r["point_s"] for r in rs),
                      "bootstrap_s": statistics.median(r["bootstrap_s"] for r in rs),
                      "process_wall_s": statistics.median(r["process_wall"] for r in rs),
                      "process_cpu_s": statistics.median(r["process_cpu"] for r in rs),
                      "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                      "runs": [{k: r[k] for k in ("seconds", "point_s", "bootstrap_s",
                                                  "process_wall", "process_cpu", "peak_rss_mib")}
                               for r in rs],
                      "result": rs[0]["result"]} for t, rs in runs.items()},
        "ratios": {},
    }
    for ours, theirs in (*comparisons, *((t, b) for b, t in befores)):
        if ours in runs and theirs in runs:
            a, b = runs[ours], runs[theirs]
            summary["ratios"][f"{theirs} / {ours}"] = {
                key: statistics.median(y[key] / x[key] for x, y in zip(a, b))
                for key in ("point_s", "process_wall", "process_cpu", "peak_rss_mib")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out.parent / "clicks.json").write_text(json.dumps(summary, indent=2))
    print(f"{'contender':36} {'median s':>9} {'point s':>8} {'boot s':>7} {'CPU-s':>6} "
          f"{'wall s':>7} "
          f"{'peak MiB':>9}")
    for t, s in summary["tasks"].items():
        print(f"{t:36} {s['median_s']:9.1f} {s['point_s']:8.1f} {s['bootstrap_s']:7.1f} "
              f"{s['process_cpu_s']:6.2f} "
              f"{s['process_wall_s']:7.1f} {s['peak_rss_mib']:9.0f}")
    print("median per-round ratio (pandas or the base code / relgrade): point s, "
          "whole-process wall, "
          "whole-process CPU-s, peak memory")
    for name, r in summary["ratios"].items():
        print(f"{name:60} {r['point_s']:5.2f} {r['process_wall']:5.2f} {r['process_cpu']:5.2f} "
              f"{r['peak_rss_mib']:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
