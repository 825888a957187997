"""A whole experiment at N queries, every stage timed as the process DVC would run.

    python benchmarks/bench_scale.py --queries 36 360 3600 [--out benchmarks/out/scale.json]

For each N the script builds, in a temporary folder, a repository with relgrade's layout
(``stages/``, ``dvc.yaml``, ``rubric/``, ``params.yaml``) and makes an experiment in it with
``relgrade init``: N queries (half keyword, half question) over 10·N chunks, three external
arms given as TREC runs of depth 20, a pool of depth 20 and the default audit (10% of the
queries, at least 10). Each query has 50 candidate chunks; every arm scores them as
quality × grade + normal noise and keeps its top 20, so the pool holds about 39 pairs per
query (about 1.4M at N = 36,000). Both graders are switched to ``kind: import``; after the
packets stage the key grader's grades of the whole pool and the auditor's of the audited
queries (the truth, the auditor off by one grade on 1% of its pairs) are brought in with
``relgrade grade import``.

Then every stage of the experiment's ``dvc.yaml`` runs in order as its own process, with
the stage's ``cmd`` in the experiment's folder as DVC runs it (per-arm stages once per arm),
followed by ``relgrade status``. For each process the script records its CPU-seconds
(user + sys of the process and its children, from ``os.wait4``), its wall seconds and its
peak resident set size (``ru_maxrss``). DVC's own bookkeeping (hashing outputs) is not
included: it is the same for any pipeline of these outputs.

Everything is seeded (``--seed``); relgrade is imported from ``src/`` of this checkout.
Nothing here is a test. Results go to ``--out`` as JSON and are printed as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
ARMS = {"alpha": 1.0, "beta": 0.6, "gamma": 1.4}  # arm -> quality (weight of the grade)
CANDIDATES = 50
DEPTH = 20
EXP = "experiments/scale"


def _env(src: Path = REPO / "src") -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(GIT_AUTHOR_NAME="relgrade bench", GIT_AUTHOR_EMAIL="bench@relgrade.invalid",
               GIT_COMMITTER_NAME="relgrade bench", GIT_COMMITTER_EMAIL="bench@relgrade.invalid")
    return env


def measured(cmd: list[str], cwd: Path, src: Path = REPO / "src") -> dict:
    """Run ``cmd`` in ``cwd`` with relgrade imported from ``src``; its CPU-seconds (user+sys,
    children included), wall seconds and peak RSS in MiB. Raises RuntimeError with its
    stderr when it fails."""
    job = json.dumps({"cmd": [str(c) for c in cmd], "cwd": str(cwd)})
    # started from launch.py, a small process: see its notes on what a child's peak counts
    done = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "launch.py"),
                           job], env=_env(src), capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    if got["returncode"] != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({got['returncode']}):\n"
                           f"{got['stderr']}")
    return {"cpu_s": got["user_s"] + got["sys_s"], "user_s": got["user_s"],
            "sys_s": got["sys_s"], "wall_s": got["wall_s"], "rss_mib": got["maxrss_kib"] / 1024}


def write_inputs(folder: Path, n: int, seed: int) -> pd.DataFrame:
    """Write chunks, queries, intents and three runs under ``folder``; return the truth table
    (query_id, chunk_id, grade) of every candidate pair."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    n_chunks = 10 * n
    cids = np.char.add("c", np.char.zfill(np.arange(n_chunks).astype(str), 7))
    qids = np.char.add("q", np.char.zfill(np.arange(n).astype(str), 6))
    with open(folder / "chunks.jsonl", "w") as f:
        f.writelines(f'{{"chunk_id":"{c}","header":"src/m{i % 97}.py \\u203a def f{i}",'
                     f'"text":"def f{i}():\\n    return {i} # chunk {c} of the synthetic corpus",'
                     f'"source":"src/m{i % 97}.py"}}\n' for i, c in enumerate(cids))
    groups = np.where(np.arange(n) % 2 == 0, "keyword", "question")
    with open(folder / "queries.tsv", "w") as f:
        f.write("query_id\tquery\tgroup\n")
        f.writelines(f"{q}\tfind function {i}\t{g}\n" for i, (q, g) in enumerate(zip(qids, groups)))
    with open(folder / "intents.tsv", "w") as f:
        f.write("query_id\tquery\tintent\n")
        f.writelines(f"{q}\tfind function {i}\tWhere is function {i} defined?\n"
                     for i, q in enumerate(qids))
    # 50 distinct candidates per query: a seeded start, then steps of 7 (7·49 < 10·N)
    start = rng.integers(0, n_chunks, size=n)
    cand = (start[:, None] + 7 * np.arange(CANDIDATES)[None, :]) % n_chunks
    grade = np.zeros(CANDIDATES, dtype=np.int64)
    grade[:3], grade[3:8] = 2, 1
    grade = np.broadcast_to(grade, cand.shape)
    for arm, quality in ARMS.items():
        score = np.round(quality * grade + rng.normal(0, 1.0, size=cand.shape), 4)
        order = np.argsort(-score, axis=1, kind="stable")[:, :DEPTH]
        top_c = np.take_along_axis(cand, order, axis=1)
        top_s = np.take_along_axis(score, order, axis=1)
        with open(folder / f"{arm}.trec", "w") as f:
            for qi in range(n):
                q = qids[qi]
                f.writelines(f"{q} Q0 {cids[c]} {r} {s} {arm}\n"
                             for r, (c, s) in enumerate(zip(top_c[qi], top_s[qi]), start=1))
    return pd.DataFrame({"query_id": np.repeat(qids, CANDIDATES),
                         "chunk_id": cids[cand.ravel()], "grade": grade.ravel()})


def grade_files(exp: Path, truth: pd.DataFrame, seed: int) -> tuple[Path, Path]:
    """The key grader's grades of the pool and the auditor's of the audited queries."""
    pool = pd.read_parquet(exp / "data/pool/pool.parquet", columns=["query_id", "chunk_id"])
    graded = pool.merge(truth.drop_duplicates(["query_id", "chunk_id"]),
                        on=["query_id", "chunk_id"], how="left", validate="one_to_one")
    assert graded["grade"].notna().all()
    audit = {json.loads(x)["query_id"]
             for x in (exp / "data/audit/audit.jsonl").read_text().splitlines()}
    audited = graded[graded["query_id"].isin(audit)].copy()
    off = np.random.default_rng(seed + 1).random(len(audited)) < 0.01
    audited.loc[off, "grade"] = np.where(audited.loc[off, "grade"] == 0, 1,
                                         audited.loc[off, "grade"] - 1)
    out = []
    for name, rows in (("grader-a", graded), ("auditor-b", audited)):
        path = exp.parent.parent / f"{name}.jsonl"
        with open(path, "w") as f:
            f.writelines(f'{{"query_id":"{q}","chunk_id":"{c}",'
                         f'"reason":"synthetic grade for the scale benchmark","grade":{int(g)}}}\n'
                         for q, c, g in zip(rows["query_id"], rows["chunk_id"], rows["grade"]))
        out.append(path)
    return out[0], out[1]


def build(root: Path, n: int, seed: int, tree: Path = REPO) -> tuple[Path, pd.DataFrame]:
    """Make the experiment of N queries in ``root`` with the stages and code of ``tree`` (a
    checkout of relgrade); return its folder and the truth table."""
    for name in ("stages", "rubric"):
        shutil.copytree(tree / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(tree / name, root / name)
    env = _env(tree / "src")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env)
    truth = write_inputs(root / "input", n, seed)
    relgrade = [sys.executable, "-c", "from relgrade.cli import main; main()"]
    subprocess.run([*relgrade, "init", EXP, "--corpus", "input/chunks.jsonl",
                    "--queries", "input/queries.tsv", "--intents", "input/intents.tsv",
                    *[x for arm in ARMS for x in ("--run", f"{arm}=input/{arm}.trec")],
                    "--pool-depth", str(DEPTH), "--seed", str(seed)],
                   cwd=root, check=True, env=env, capture_output=True)
    exp = root / EXP
    params = yaml.safe_load((exp / "params.yaml").read_text())
    for name in ("grader-a", "auditor-b"):
        params["graders"][name].update(kind="import", family=f"synthetic-{name}")
    (exp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run([*relgrade, "intents", "review", "--experiment", EXP,
                    "--reviewer", "auditor-b"], cwd=root, check=True, env=env,
                   capture_output=True)
    return exp, truth


def stage_commands(exp: Path) -> list[tuple[str, list[str]]]:
    """Each stage of the experiment's dvc.yaml in file order: (name, argv); a foreach stage
    once per arm."""
    spec = yaml.safe_load((exp / "dvc.yaml").read_text())["stages"]
    arms = list(yaml.safe_load((exp / "params.yaml").read_text())["arms"])
    out = []
    for name, stage in spec.items():
        if "foreach" in stage:
            for arm in arms:
                cmd = stage["do"]["cmd"].replace("${key}", arm).split()
                out.append((f"{name}:{arm}", cmd))
        else:
            out.append((name, stage["cmd"].split()))
    return [(name, [sys.executable if c[0] == "python" else c[0], *c[1:]]) for name, c in out]


def run_pipeline(exp: Path, truth: pd.DataFrame, seed: int, src: Path = REPO / "src",
                 label: str = "") -> dict:
    """Every stage of ``exp`` in order, the grade imports before the grades stage, then
    ``relgrade status``: step -> :func:`measured`."""
    root = exp.parent.parent
    relgrade = [sys.executable, "-c", "from relgrade.cli import main; main()"]
    steps = {}
    for name, cmd in stage_commands(exp):
        if name == "grades":  # the grades arrive before the grades stage reads them
            grader, auditor = grade_files(exp, truth, seed)
            for who, path in (("grader-a", grader), ("auditor-b", auditor)):
                steps[f"grade import {who}"] = measured(
                    [*relgrade, "grade", "import", str(path), "--grader", who,
                     "--experiment", EXP], root, src)
        steps[name] = measured(cmd, exp, src)
        print(f"  {label}{name}: {steps[name]['cpu_s']:.1f} CPU-s, "
              f"{steps[name]['wall_s']:.1f} s, {steps[name]['rss_mib']:.0f} MiB",
              file=sys.stderr, flush=True)
    steps["status"] = measured([*relgrade, "status", "--experiment", EXP], root, src)
    return steps


def run_one(n: int, seed: int, keep: Path | None) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"relgrade-scale-{n}-"))
    try:
        t0 = time.perf_counter()
        exp, truth = build(root, n, seed)
        made = time.perf_counter() - t0
        steps = run_pipeline(exp, truth, seed, label=f"N={n} ")
        pool = pd.read_parquet(exp / "data/pool/pool.parquet", columns=["query_id"])
        if keep is not None:
            shutil.copytree(exp, keep / f"scale-{n}", dirs_exist_ok=True)
        return {"queries": n, "pool_pairs": len(pool), "build_s": made, "steps": steps,
                "load_before": os.getloadavg()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def rerun(kept: Path, steps: list[str], srcs: list[Path] | None = None,
          repeats: int = 1) -> dict:
    """Time ``steps`` again on an experiment folder kept by ``--keep`` (after a change to a
    stage), each as its own process, in a fresh root holding this checkout's stages.

    With ``srcs`` (several ``src`` folders, e.g. a base revision's and this checkout's),
    each step runs once per folder in turn, ``repeats`` times (A B A B ...: paired,
    interleaved); the result is then ``{step: {src: [run, ...]}}``."""
    root = Path(tempfile.mkdtemp(prefix="relgrade-rerun-", dir=kept.resolve().parent))
    exp = root / EXP
    try:
        for name in ("stages", "rubric"):
            shutil.copytree(REPO / name, root / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("dvc.yaml", "params.yaml"):
            shutil.copy(REPO / name, root / name)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=_env())
        exp.parent.mkdir(parents=True)
        os.rename(kept, exp)  # moved in for the run (the stages find ../../stages), then back
        commands = dict(stage_commands(exp))
        relgrade = [sys.executable, "-c", "from relgrade.cli import main; main()"]
        commands["status"] = [*relgrade, "status", "--experiment", EXP]
        out = {}
        for name in steps:
            if srcs is None:
                out[name] = measured(commands[name], root if name == "status" else exp)
                print(f"  rerun {name}: {out[name]['cpu_s']:.1f} CPU-s, "
                      f"{out[name]['wall_s']:.1f} s, {out[name]['rss_mib']:.0f} MiB",
                      file=sys.stderr, flush=True)
                continue
            out[name] = {str(src): [] for src in srcs}
            for _ in range(repeats):
                for src in srcs:
                    run = measured(commands[name], root if name == "status" else exp,
                                   src.resolve())
                    out[name][str(src)].append(run)
                    print(f"  rerun {name} [{src}]: {run['cpu_s']:.1f} CPU-s, "
                          f"{run['wall_s']:.1f} s, {run['rss_mib']:.0f} MiB",
                          file=sys.stderr, flush=True)
        return out
    finally:
        if exp.exists():
            os.rename(exp, kept)
        shutil.rmtree(root, ignore_errors=True)


def table(results: list[dict]) -> str:
    names = list(results[0]["steps"])
    head = "| step | " + " | ".join(f"{r['queries']:,} q ({r['pool_pairs']:,} pairs)"
                                     for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for name in names:
        cells = [f"{r['steps'][name]['cpu_s']:.1f} / {r['steps'][name]['wall_s']:.1f} / "
                 f"{r['steps'][name]['rss_mib']:.0f}" for r in results]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    total = [sum(s["cpu_s"] for s in r["steps"].values()) for r in results]
    wall = [sum(s["wall_s"] for s in r["steps"].values()) for r in results]
    lines.append("| **total** | " + " | ".join(f"{c:.1f} / {w:.1f} / —"
                                               for c, w in zip(total, wall)) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[36, 360, 3600])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/out/scale.json")
    ap.add_argument("--keep", type=Path, default=None,
                    help="Copy each experiment folder here (to compare outputs).")
    ap.add_argument("--rerun", type=Path, default=None,
                    help="An experiment folder kept by --keep: time --steps on it again.")
    ap.add_argument("--steps", nargs="+", default=[],
                    help="With --rerun: the steps (stage names as in the table, or status).")
    ap.add_argument("--src", type=Path, nargs="+", default=None,
                    help="With --rerun: src folders to run each step with in turn (e.g. a "
                         "base revision's, from `git archive REV src`, and ./src).")
    ap.add_argument("--repeats", type=int, default=1,
                    help="With --rerun --src: rounds of paired, interleaved runs.")
    args = ap.parse_args()
    if args.rerun is not None:
        load = os.getloadavg()
        out = {"kept": str(args.rerun), "load_before": load,
               "steps": rerun(args.rerun, args.steps, args.src, args.repeats),
               "load_after": os.getloadavg()}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
        return
    results = []
    for n in args.queries:
        load = os.getloadavg()
        print(f"N={n}: load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=sys.stderr)
        results.append(run_one(n, args.seed, args.keep))
        results[-1]["load_after"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    print("cells: CPU-s / wall s / peak RSS MiB")
    print(table(results))
    for a, b in zip(results, results[1:]):
        pool = b["pool_pairs"] / a["pool_pairs"]
        print(f"\n{a['queries']:,} -> {b['queries']:,} queries: pool x{pool:.2f}; CPU-s ratio "
              "per step (and per unit of pool growth):")
        for name in a["steps"]:
            r = b["steps"][name]["cpu_s"] / max(a["steps"][name]["cpu_s"], 1e-9)
            print(f"  {name}: x{r:.2f} ({r / pool:.2f})")


if __name__ == "__main__":
    main()
