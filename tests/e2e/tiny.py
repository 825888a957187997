"""A small, fully specified experiment for end-to-end tests of the DVC pipeline.

12 queries over 48 chunks, three external arms given as TREC runs, a grader who grades the
whole pool from a known truth table, and an auditor who grades the audit queries. The truth
table is part of the fixture, so every expected number can be derived from it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[2]

TOPICS = [
    ("kw01", "keyword", "cache eviction", "Where is the cache eviction policy defined?"),
    ("kw02", "keyword", "retry backoff", "How does the client compute its retry backoff delay?"),
    ("kw03", "keyword", "config loader", "Where is the configuration file loader defined?"),
    ("kw04", "keyword", "token refresh", "How does the session refresh an expired token?"),
    ("kw05", "keyword", "log rotation", "Why are log files rotated by size rather than by date?"),
    ("kw06", "keyword", "plugin registry", "Which plugins does the registry load at start-up?"),
    ("qu01", "question", "Where is the HTTP timeout set?", "Where is the default HTTP timeout configured?"),
    ("qu02", "question", "How are query results paginated?", "How does the API split query results into pages?"),
    ("qu03", "question", "Why is the index rebuilt nightly?", "Why does the system rebuild its search index every night?"),
    ("qu04", "question", "Which formats can the exporter write?", "Which output formats does the exporter support?"),
    ("qu05", "question", "How does schema migration work?", "How does the tool apply schema migrations in order?"),
    ("qu06", "question", "Where are user permissions checked?", "Where does the server check a user's permissions?"),
]

ARMS = ("lexical", "dense", "mixed")


def chunks() -> list[dict]:
    """Four chunks per topic: an answer (truth 2), a pointer (1), two near misses (0)."""
    rows = []
    for i, (qid, _, query, intent) in enumerate(TOPICS):
        words = query.lower().rstrip("?").split()
        topic = " ".join(words[-2:])
        rows += [
            {"chunk_id": f"{qid}-answer", "header": f"src/{topic.replace(' ', '_')}.py › def main",
             "text": f"def main():\n    # {intent} This is the implementation of {topic}.\n    return {i}",
             "source": f"src/{topic.replace(' ', '_')}.py"},
            {"chunk_id": f"{qid}-pointer", "header": f"tests/test_{i}.py › def test_{i}",
             "text": f"def test_{i}():\n    # calls the {topic} code and checks one case\n    assert main() == {i}",
             "source": f"tests/test_{i}.py"},
            {"chunk_id": f"{qid}-miss1", "header": f"docs/page{i}.md › Overview",
             "text": f"The word {topic} appears here, but this page is about something else.",
             "source": f"docs/page{i}.md"},
            {"chunk_id": f"{qid}-miss2", "header": f"docs/page{i}.md › Contents",
             "text": f"Contents: introduction, installation, {words[0]} and more.",
             "source": f"docs/page{i}.md"},
        ]
    return rows


def truth(chunk_id: str) -> int:
    return {"answer": 2, "pointer": 1}.get(chunk_id.split("-")[1], 0)


def runs(seed: int = 7) -> dict[str, list[tuple[str, str, float]]]:
    """Three arms of different quality, depth 8, as (query_id, chunk_id, score)."""
    rng = np.random.default_rng(seed)
    ids = [c["chunk_id"] for c in chunks()]
    out = {}
    quality = {"lexical": 1.0, "dense": 0.6, "mixed": 1.4}
    for arm in ARMS:
        rows = []
        for qid, *_ in TOPICS:
            own = [c for c in ids if c.startswith(qid)]
            others = [c for c in ids if not c.startswith(qid)]
            cand = own + list(rng.choice(others, size=6, replace=False))
            scores = [quality[arm] * truth(c) + rng.normal(0, 1.0) for c in cand]
            for c, s in sorted(zip(cand, scores), key=lambda t: -t[1])[:8]:
                rows.append((qid, c, round(float(s), 4)))
        out[arm] = rows
    return out


def write_inputs(root: Path) -> None:
    """Write the fixture's inputs, params and pipeline into an empty directory ``root``."""
    inp = root / "data" / "input"
    (inp / "runs").mkdir(parents=True)
    with open(inp / "chunks.jsonl", "w") as f:
        for c in chunks():
            f.write(json.dumps(c) + "\n")
    with open(inp / "queries.tsv", "w") as f:
        f.write("query_id\tquery\tgroup\n")
        for qid, group, query, _ in TOPICS:
            f.write(f"{qid}\t{query}\t{group}\n")
    with open(inp / "intents.tsv", "w") as f:
        f.write("query_id\tquery\tintent\n")
        for qid, _, query, intent in TOPICS:
            f.write(f"{qid}\t{query}\t{intent}\n")
    for arm, rows in runs().items():
        with open(inp / "runs" / f"{arm}.trec", "w") as f:
            for rank, (qid, cid, score) in enumerate(rows, start=1):
                f.write(f"{qid} Q0 {cid} {rank} {score} {arm}\n")
    for name in ("dvc.yaml", "stages", "src", "rubric"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, root / name)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["corpus"] = {"input": "data/input/chunks.jsonl"}
    params["queries"] = {"input": "data/input/queries.tsv", "groups": ["keyword", "question"]}
    params["arms"] = {arm: {"kind": "file", "depth": 8, "source": f"data/input/runs/{arm}.trec"}
                      for arm in ARMS}
    params["pool"] = {"depth": 5, "tail_sample": 0, "tail_depth": 8}
    params["intents"] = {"input": "data/input/intents.tsv", "review": "data/input/intents.review.json"}
    params["audit"] = {"fraction": 0.1, "min_queries": 4}
    params["metrics"]["baseline"] = "lexical"
    params["metrics"]["bootstrap"] = 1000
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "data" / "grades").mkdir(parents=True, exist_ok=True)


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env=git_env())


def git_env() -> dict:
    import os

    env = dict(os.environ)
    env.update(GIT_AUTHOR_NAME="relgrade test", GIT_AUTHOR_EMAIL="test@relgrade.invalid",
               GIT_COMMITTER_NAME="relgrade test", GIT_COMMITTER_EMAIL="test@relgrade.invalid")
    return env


def bin_dir() -> Path:
    return Path(sys.executable).parent


def run(root: Path, *cmd: str, check: bool = True,
        env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """Run a command of the venv (dvc, relgrade) in ``root`` (with ``env_extra`` added to
    its environment)."""
    import os

    env = git_env() | dict(env_extra or {})
    env["PATH"] = f"{bin_dir()}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(list(cmd), cwd=root, capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def grade_rows(pairs, *, flip: set | None = None) -> list[dict]:
    """Grade rows from the truth table; pairs in ``flip`` get a one-step different grade."""
    rows = []
    for qid, cid in sorted(pairs):
        g = truth(cid)
        if flip and (qid, cid) in flip:
            g = 1 if g != 1 else 2
        reason = {2: "Implements the behaviour the intent asks about.",
                  1: "Test that exercises the target without showing it.",
                  0: "Mentions the words but says nothing about the target."}[g]
        rows.append({"query_id": qid, "chunk_id": cid, "reason": reason, "grade": g})
    return rows


def made_on(root: Path, *, text_of=None) -> dict:
    """What a grade of each (query, chunk) of the fixture is made on, as relgrade records it.

    ``text_of`` maps a chunk id to an edited text (the corpus as it was when graded).
    """
    import hashlib

    import pandas as pd

    from relgrade.protocol.bank import content_sha256, intent_sha256

    table = pd.DataFrame(chunks())
    if text_of:
        table["text"] = [text_of.get(c, t) for c, t in zip(table["chunk_id"], table["text"])]
    content = content_sha256(table)
    intents = intent_sha256(pd.DataFrame({"query_id": [t[0] for t in TOPICS],
                                          "intent": [t[3] for t in TOPICS]}))
    rubric = hashlib.sha256((root / "rubric" / "v1.md").read_bytes()).hexdigest()
    return {(q, c): {"content_sha256": content[c], "intent_sha256": intents[q],
                     "rubric_version": "v1", "rubric_sha256": rubric}
            for q in intents.index for c in content.index}


def write_grades(root: Path, grader: str, rows: list[dict], round_: int = 1, *,
                 bank: bool = True) -> Path:
    """A grader's round file, with its bank sidecar (made on today's fixture) unless not ``bank``."""
    path = root / "data" / "grades" / grader / f"round-{round_}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if bank:
        made = made_on(root)
        path.with_name(f"round-{round_}.bank.jsonl").write_text("".join(
            json.dumps({"query_id": r["query_id"], "chunk_id": r["chunk_id"],
                        **made[(r["query_id"], r["chunk_id"])],
                        "graded_at": "2026-01-01T00:00:00Z"}) + "\n" for r in rows))
    return path


def build_packets(root: Path) -> None:
    """The fixture in a new git + DVC repository ``root``, intents reviewed by auditor-b and
    ``dvc repro packets`` run: the pool, the audit and the packets exist, no grade yet."""
    write_inputs(root)
    git(root, "init", "-q")
    run(root, "dvc", "init", "-q")
    run(root, "dvc", "config", "core.analytics", "false")
    run(root, "relgrade", "intents", "review", "--reviewer", "auditor-b")
    run(root, "dvc", "repro", "packets")


def copy_repo(template: Path, root: Path) -> Path:
    """A copy of the repository ``template`` (work tree, git and DVC cache) at ``root``, which
    may exist if empty: a test that changes it leaves the template as it was."""
    return Path(shutil.copytree(template, root, symlinks=True, dirs_exist_ok=True))
