"""Per-query metrics for 10 arms x 10,000 queries x depth 100, end to end, side by side.

    python benchmarks/generate.py --seed 7 --out benchmarks/data --only metrics
    python benchmarks/bench_metrics.py --data benchmarks/data/metrics --repeat 3

Each contender runs in its own Python process, one after another (repeats interleaved), so
its peak resident memory is its own (``resource.getrusage(RUSAGE_SELF).ru_maxrss``). The
timed span starts before the qrels are read and ends when every arm's per-query values
exist: loading is included, interpreter start-up and imports are not (the process wall
time, which includes them, is reported too). Arms are processed one at a time and dropped.

Contenders and what each computes per arm, at cutoffs 3, 5 and 10:

* ``relgrade-trec`` / ``relgrade-parquet``: read the run (TREC text / Parquet) and
  :func:`relgrade.evaluation.metrics.per_query` for nDCG (gain 2^g - 1), R, RR and Judged;
* ``relgrade-trec-validated``: the same plus :func:`relgrade.ranking.validate_run` on every
  run (the full duplicate check ``relgrade evaluate`` makes);
* ``pytrec_eval``: ``pytrec_eval.parse_qrel``/``parse_run`` and ``RelevanceEvaluator`` for
  ``ndcg_cut``, ``recall``, ``P`` and ``recip_rank`` (trec_eval has no RR@k or exp gain);
* ``ir_measures``: ``read_trec_qrels``/``read_trec_run`` and ``iter_calc`` for nDCG, R, RR
  and Judged at each cutoff (linear nDCG: its exp-gain provider is an external script);
* ``ranx``: ``Qrels``/``Run.from_file`` and ``evaluate`` for ``ndcg_burges``, ``recall``
  and ``mrr`` at each cutoff (numba-compiled; compiled code is cached after the first run);
* ``relgrade-evaluate``: the ``relgrade evaluate`` command itself (``relgrade.cli.main``,
  as the console script runs it) on the TREC files, ``--json --missing skip`` and
  nDCG (linear gain, as trec_eval's ``ndcg_cut``), R and RR at each cutoff: reading, the
  whole-list duplicate check, scoring and printing;
* ``relgrade-evaluate-full``: the same command with the full measure set,
  :data:`FULL_MEASURES`, most of which read the whole ranked list.

``--anchor``: ``pytrec_eval`` and ``relgrade-evaluate`` compute the anchor's measure set
instead, :data:`ANCHOR_MEASURES` (``ndcg_cut.10 recall.10 recip_rank``, trec_eval's names,
which ``relgrade evaluate -m`` reads): uncut reciprocal rank among them.

``pyarrow-read`` is the floor: it only reads the ten TREC runs with pyarrow's CSV reader,
one thread, the query, chunk and score fields, ids dictionary-encoded, and computes nothing
(it has no R@10 check). ``--base REV``: ``relgrade-evaluate`` is also
run with the ``src/`` of git revision REV (extracted once under ``benchmarks/out/``), as
the contender ``relgrade-evaluate@REV``, in the same interleaved rounds: a change and its
base are paired round by round.

The whole-process columns (``process wall`` and ``process CPU``, user + system seconds of
every thread) include interpreter start-up and imports; the load average is recorded at the
start and the end.

Every contender reports the mean R@10 per arm over the queries the run answers; the parent
checks they agree (relgrade is run with ``on_missing_query="skip"`` for that reason).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CUTOFFS = (3, 5, 10)
TOOLS = ("relgrade-trec", "relgrade-parquet", "relgrade-trec-validated", "pytrec_eval",
         "ir_measures", "ranx", "relgrade-evaluate", "relgrade-evaluate-full", "pyarrow-read")
REPO = Path(__file__).resolve().parents[1]
# relgrade evaluate's measures: nDCG, R, RR at each cutoff ...
EVALUATE_MEASURES = [f"{m}@{k}" for k in CUTOFFS for m in ("nDCG", "R", "RR")]
# the anchor's set, trec_eval's names (uncut reciprocal rank)
ANCHOR_MEASURES = ["ndcg_cut.10", "recall.10", "recip_rank"]
# ... and every measure relgrade has, trec_eval's default parameters where it has them
FULL_MEASURES = EVALUATE_MEASURES + [
    "AP", "AP@10", "P@10", "Rprec", "Bpref", "Success@10", "infAP", "ERR@10", "RBP(p=0.9)",
    "RBPResid(p=0.9)", "NumRet", "NumRel", "NumRelRet", "Judged@10", "Unjudged@10",
    "IPrec@0.5", "nDCG", "nDCG(dcg='exp-log2')@10", "nDCG(judged_only=True)@10"]


def _arms(data: Path, ext: str) -> list[Path]:
    return sorted((data / "runs").glob(f"*.{ext}"))


# --- contenders (each runs in a child process) ---------------------------------------

def _relgrade(data: Path, ext: str, validate: bool):
    from relgrade.evaluation.measures import protocol_measures
    from relgrade.evaluation.metrics import index_qrels, per_query
    from relgrade.io.runs import read_run
    from relgrade.io.trec import read_trec_qrels
    from relgrade.ranking import validate_run

    measures = protocol_measures(CUTOFFS)
    start, cpu_start = time.perf_counter(), time.process_time()
    if ext == "parquet":
        import pandas as pd

        key = index_qrels(pd.read_parquet(data / "qrels.parquet"))
    else:
        key = index_qrels(read_trec_qrels(data / "qrels.trec"))
    check = []
    for path in _arms(data, ext):
        run = read_run(path)
        if validate:
            validate_run(run, path=path)
        pq = per_query(qrels=key, run=run, measures=measures, on_missing_query="skip")
        check.append(float(pq.loc[pq["measure"] == "R@10", "value"].mean()))
        del run, pq
    return time.perf_counter() - start, time.process_time() - cpu_start, check


def _pytrec_eval(data: Path, anchor: bool = False):
    import pytrec_eval

    ks = ",".join(map(str, CUTOFFS))
    wanted = set(ANCHOR_MEASURES) if anchor else \
        {f"ndcg_cut.{ks}", f"recall.{ks}", f"P.{ks}", "recip_rank"}
    start, cpu_start = time.perf_counter(), time.process_time()
    with open(data / "qrels.trec") as f:
        qrels = pytrec_eval.parse_qrel(f)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, wanted)
    check = []
    for path in _arms(data, "trec"):
        with open(path) as f:
            run = pytrec_eval.parse_run(f)
        result = evaluator.evaluate(run)
        values = [v["recall_10"] for q, v in result.items()
                  if any(g >= 1 for g in qrels[q].values())]
        check.append(sum(values) / len(values))
        del run, result
    return time.perf_counter() - start, time.process_time() - cpu_start, check


def _ir_measures(data: Path):
    import ir_measures

    measures = [ir_measures.parse_measure(f"{m}@{k}") for k in CUTOFFS
                for m in ("nDCG", "R", "RR", "Judged")]
    start, cpu_start = time.perf_counter(), time.process_time()
    qrels = list(ir_measures.read_trec_qrels(str(data / "qrels.trec")))
    relevant = {q.query_id for q in qrels if q.relevance >= 1}
    evaluator = ir_measures.evaluator(measures, qrels)
    check = []
    for path in _arms(data, "trec"):
        run = list(ir_measures.read_trec_run(str(path)))
        answered = {d.query_id for d in run}
        values = [m.value for m in evaluator.iter_calc(run)
                  if str(m.measure) == "R@10" and m.query_id in answered
                  and m.query_id in relevant]
        check.append(sum(values) / len(values))
        del run
    return time.perf_counter() - start, time.process_time() - cpu_start, check


def _ranx(data: Path):
    from ranx import Qrels, Run, evaluate

    metrics = [f"{m}@{k}" for k in CUTOFFS for m in ("ndcg_burges", "recall", "mrr")]
    start, cpu_start = time.perf_counter(), time.process_time()
    qrels = Qrels.from_file(str(data / "qrels.trec"), kind="trec")
    relevant = {q for q, docs in qrels.qrels.items() if any(g >= 1 for g in docs.values())}
    check = []
    for path in _arms(data, "trec"):
        run = Run.from_file(str(path), kind="trec")
        answered = set(run.keys())
        # ranx needs the run and the qrels to hold the same queries (make_comparable)
        evaluate(qrels, run, metrics, return_mean=False, make_comparable=True)
        values = [v for q, v in run.scores["recall@10"].items()
                  if q in answered and q in relevant]
        check.append(float(sum(values) / len(values)))
        del run
    return time.perf_counter() - start, time.process_time() - cpu_start, check


def _pyarrow_read(data: Path):
    """The floor: every run read by pyarrow's CSV reader, one thread, only the fields a
    measure needs (query, chunk, score), ids dictionary-encoded; nothing computed."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    start, cpu_start = time.perf_counter(), time.process_time()
    ids = pa.dictionary(pa.int32(), pa.string())
    for path in _arms(data, "trec"):
        table = pacsv.read_csv(
            str(path),
            read_options=pacsv.ReadOptions(
                column_names=["query_id", "q0", "chunk_id", "rank", "score", "tag"],
                use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False,
                                             double_quote=False, escape_char=False),
            convert_options=pacsv.ConvertOptions(
                column_types={"query_id": ids, "chunk_id": ids, "score": pa.float64()},
                include_columns=["query_id", "chunk_id", "score"]))
        del table
    return time.perf_counter() - start, time.process_time() - cpu_start, []


def _evaluate(data: Path, measures: list[str]):
    import contextlib
    import io

    from relgrade.cli import main

    args = ["evaluate", str(data / "qrels.trec"), *map(str, _arms(data, "trec")), "--json",
            "--missing", "skip"]
    for m in measures:
        args += ["-m", m]
    out = io.StringIO()
    start, cpu_start = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out):
        main(args, standalone_mode=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    doc = json.loads(out.getvalue())
    return seconds, cpu, [doc["runs"][p.stem]["R@10"] for p in _arms(data, "trec")]


def _worker(tool: str, data: Path, anchor: bool = False) -> dict:
    if tool == "relgrade-trec":
        seconds, cpu, check = _relgrade(data, "trec", validate=False)
    elif tool == "relgrade-parquet":
        seconds, cpu, check = _relgrade(data, "parquet", validate=False)
    elif tool == "relgrade-trec-validated":
        seconds, cpu, check = _relgrade(data, "trec", validate=True)
    elif tool == "pytrec_eval":
        seconds, cpu, check = _pytrec_eval(data, anchor)
    elif tool == "ir_measures":
        seconds, cpu, check = _ir_measures(data)
    elif tool == "ranx":
        seconds, cpu, check = _ranx(data)
    elif tool == "relgrade-evaluate" or tool.startswith("relgrade-evaluate@"):
        seconds, cpu, check = _evaluate(data, ANCHOR_MEASURES if anchor else EVALUATE_MEASURES)
    elif tool == "pyarrow-read":
        seconds, cpu, check = _pyarrow_read(data)
    elif tool == "relgrade-evaluate-full":
        seconds, cpu, check = _evaluate(data, FULL_MEASURES)
    else:
        raise SystemExit(f"unknown tool {tool}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    # CPU seconds of the timed span, all threads: steadier than wall time on a shared machine
    return {"tool": tool, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": peak,
            "check": check}


# --- the parent: run each contender in a fresh process -------------------------------

def _base_src(rev: str, out: Path) -> Path:
    """The ``src/`` of git revision ``rev``, extracted once under ``out``."""
    tree = out / f"base-{rev}"
    if not (tree / "src").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree / "src"


def _run_child(tool: str, data: Path, timeout: float, anchor: bool = False,
               src: Path | None = None) -> dict:
    # children run one at a time, so the change in the children's rusage is this child's
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if src is not None:  # another revision's relgrade
        env["PYTHONPATH"] = str(src)
    proc = subprocess.run([sys.executable, __file__, "--worker", tool, "--data", str(data)]
                          + (["--anchor"] if anchor else []),
                          capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        return {"tool": tool, "error": proc.stderr.strip().splitlines()[-1:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall"] = wall
    # whole process, all threads, user + system: what the tool costs on a shared machine
    out["process_cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out["load_after"] = os.getloadavg()[0]
    return out


def _round_ratio_median(top: list[dict], bottom: list[dict], field: str) -> float | None:
    """Median over rounds of ``top[i][field] / bottom[i][field]`` (rounds where both have
    it), or None when none has."""
    ratios = [t[field] / b[field] for t, b in zip(top, bottom) if field in t and field in b]
    return statistics.median(ratios) if ratios else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/metrics"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out/metrics.json"))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--anchor", action="store_true",
                    help="pytrec_eval and relgrade-evaluate on ndcg_cut.10 recall.10 recip_rank")
    ap.add_argument("--base", default=None, metavar="REV",
                    help="also run relgrade-evaluate with the src/ of this git revision")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.data, args.anchor)))
        return 0
    tools = args.tools.split(",")
    srcs = {}
    if args.base:
        srcs[f"relgrade-evaluate@{args.base}"] = _base_src(args.base, args.out.parent)
        tools.append(f"relgrade-evaluate@{args.base}")
    results = {t: [] for t in tools}
    load_start = os.getloadavg()
    for r in range(args.repeat):
        for tool in tools:
            res = _run_child(tool, args.data, args.timeout, args.anchor, srcs.get(tool))
            results[tool].append(res)
            shown = (f"{res['seconds']:.2f} s, {res['peak_rss_mib']:.0f} MiB"
                     if "seconds" in res else f"failed: {res['error']}")
            print(f"[{r + 1}/{args.repeat}] {tool}: {shown}", file=sys.stderr)
    summary = {}
    for tool, runs in results.items():
        ok = [x for x in runs if "seconds" in x]
        if not ok:
            summary[tool] = {"error": runs[-1].get("error")}
            continue
        summary[tool] = {
            "seconds_median": statistics.median(x["seconds"] for x in ok),
            "seconds_min": min(x["seconds"] for x in ok),
            "cpu_seconds_median": statistics.median(x["cpu_seconds"] for x in ok),
            "process_wall_median": statistics.median(x["process_wall"] for x in ok),
            "process_cpu_median": statistics.median(x["process_cpu"] for x in ok),
            "peak_rss_mib_max": max(x["peak_rss_mib"] for x in ok),
            "runs": len(ok),
            "check": ok[0]["check"],
        }
    # speed-up over pytrec_eval, taken round by round (each round runs every contender
    # back to back, so a busy machine slows both sides of one ratio alike)
    base = results.get("pytrec_eval", [])
    floor = results.get("pyarrow-read", [])
    for tool, s in summary.items():
        if tool != "pytrec_eval":
            for field, name in (("seconds", "speedup_vs_pytrec_eval_median"),
                                # the same, whole process: start-up and imports included
                                ("process_wall", "process_speedup_vs_pytrec_eval_median"),
                                ("process_cpu", "process_cpu_speedup_vs_pytrec_eval_median")):
                ratio = _round_ratio_median(base, results[tool], field)
                if ratio is not None:
                    s[name] = ratio
        # whole-process CPU over the floor's (pyarrow-read), round by round
        if tool != "pyarrow-read":
            ratio = _round_ratio_median(results[tool], floor, "process_cpu")
            if ratio is not None:
                s["process_cpu_over_floor_median"] = ratio
    # the full measure set against nDCG/R/RR alone, round by round
    if "relgrade-evaluate" in results and "relgrade-evaluate-full" in summary:
        pairs = [f["process_wall"] / e["process_wall"]
                 for e, f in zip(results["relgrade-evaluate"], results["relgrade-evaluate-full"])
                 if "process_wall" in e and "process_wall" in f]
        if pairs:
            summary["relgrade-evaluate-full"]["process_ratio_to_evaluate_median"] = \
                statistics.median(pairs)
    ref = next((s["check"] for s in summary.values() if s.get("check")), None)
    for tool, s in summary.items():
        if s.get("check") and ref is not None:
            s["check_max_diff"] = max(abs(a - b) for a, b in zip(s["check"], ref))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    load_end = os.getloadavg()
    args.out.write_text(json.dumps({"cpus": os.cpu_count(), "load_start": load_start,
                                    "load_end": load_end, "summary": summary,
                                    "raw": results}, indent=2) + "\n")
    print(f"load average (1, 5, 15 min): {load_start} at the start, {load_end} at the end")
    print("| contender | median s (min) | × faster than pytrec_eval | CPU s | process wall s "
          "| × faster, whole process | process CPU s | × less CPU, whole process "
          "| peak RSS MiB | R@10 check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tool, s in summary.items():
        if "error" in s:
            print(f"| {tool} | failed: {s['error']} | | | | | |")
            continue
        speedup = s.get("speedup_vs_pytrec_eval_median")
        whole = s.get("process_speedup_vs_pytrec_eval_median")
        whole_cpu = s.get("process_cpu_speedup_vs_pytrec_eval_median")
        print(f"| {tool} | {s['seconds_median']:.2f} ({s['seconds_min']:.2f}) | "
              f"{'' if speedup is None else f'{speedup:.1f}'} | "
              f"{s['cpu_seconds_median']:.2f} | {s['process_wall_median']:.2f} | "
              f"{'' if whole is None else f'{whole:.1f}'} | {s['process_cpu_median']:.2f} | "
              f"{'' if whole_cpu is None else f'{whole_cpu:.1f}'} | "
              f"{s['peak_rss_mib_max']:.0f} | "
              f"{'max diff %.1e' % s['check_max_diff'] if 'check_max_diff' in s else 'none'} |")
    for tool, s in summary.items():
        if "process_cpu_over_floor_median" in s:
            print(f"{tool}: whole-process CPU {s['process_cpu_over_floor_median']:.2f}x the "
                  f"floor's (pyarrow-read), median per round")
    full = summary.get("relgrade-evaluate-full", {}).get("process_ratio_to_evaluate_median")
    if full is not None:
        print(f"full measure set / nDCG, R, RR alone (whole process, median per round): "
              f"{full:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
