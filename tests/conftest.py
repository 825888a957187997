"""Test collection: the grader scripts under tests/graders/ run as subprocesses, never imported.

The end-to-end experiments several modules start from (the tiny experiment, a ppi experiment
made by `relgrade init --mode ppi` over its inputs, a plain one made by `relgrade init` and run
to its key, the shipped experiments/crowd-sim and experiments/ppi-sim, and the repository's
default experiment) are built once per test run (session fixtures below, shared by the xdist
workers) and copied by each test that changes one: building them is most of those modules'
time, and a copy (git, DVC cache and all) is the same repository.
"""

import os
import shutil

import pytest

collect_ignore = ["graders/grader.py", "graders/tiny_grader.py", "graders/lenient_grader.py",
                  "graders/swayable_grader.py", "graders/wording_grader.py"]


def pytest_sessionstart(session):
    """Compile relgrade's bytecode once for the run, beside the package the tests import.

    The end-to-end tests start thousands of processes that import relgrade (every stage DVC
    runs, every ``relgrade`` command). Where ``PYTHONDONTWRITEBYTECODE`` is set, as container
    images often set it, none of them writes the bytecode it compiles, so each compiled the
    package's modules again: about 0.09 CPU-seconds of a stage process's 0.8
    (benchmarks/README.md, "Test suite time"). Python still reads bytecode that exists, and
    checks it against the source's time and size. Files already compiled are skipped (each
    xdist worker calls this too; a write is atomic); a folder that cannot be written to is
    left as it is. Every copy of ``src/`` the tests make leaves ``__pycache__`` out, and
    ``.dvcignore`` leaves it out of DVC's hashes.
    """
    import compileall
    from pathlib import Path

    import relgrade

    compileall.compile_dir(Path(relgrade.__file__).parent, quiet=2)


# what each worker did at each shared build (one JSON line each), in the run's temporary root
BUILDS_LOG = "shared-builds.jsonl"


def _built_once(tmp_path_factory, name, build):
    """The folder ``name`` made by ``build(folder)`` once for the whole run: under pytest-xdist
    the workers share the run's temporary root, the first to take the lock builds it and the
    others wait and use it (a build that failed is removed and made again by the next).
    How long the caller waited for the lock and, if it built, how long the build took are
    appended to the run's ``shared-builds.jsonl`` (summed up at the end of the run).

    Returns the folder (a :class:`pathlib.Path`); nothing may change it afterwards.
    """
    import json
    import time

    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    # an xdist worker's root is one folder of the run's (PYTEST_XDIST_WORKER names it)
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root, done = shared / name, shared / f"{name}.done"
    asked = time.monotonic()
    built_s = None
    with FileLock(str(shared / f"{name}.lock")):
        waited_s = time.monotonic() - asked
        if not done.exists():
            if root.exists():
                shutil.rmtree(root)
            root.mkdir()
            build(root)
            done.touch()
            built_s = time.monotonic() - asked - waited_s
    record = {"build": name, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
              "waited_s": round(waited_s, 1), "built_s": built_s and round(built_s, 1)}
    with open(shared / BUILDS_LOG, "a") as log:  # one short line: an atomic append
        log.write(json.dumps(record) + "\n")
    return root


def shared_build_lines(records):
    """The end-of-run summary of the shared builds: ``records`` are the dicts ``_built_once``
    logs (``build``, ``worker``, ``waited_s`` float, ``built_s`` float or None).

    Returns a list of str: one line per build that was made (who made it, in how many wall
    seconds, and which workers waited for it while it was being made, longer than a second),
    then the seconds workers spent waiting in all; an empty list for no records.
    """
    lines, idle = [], 0.0
    for name in dict.fromkeys(r["build"] for r in records):
        mine = [r for r in records if r["build"] == name]
        made = [r for r in mine if r["built_s"] is not None]
        waits = [r for r in mine if r["built_s"] is None and r["waited_s"] >= 1]
        idle += sum(r["waited_s"] for r in waits)
        line = (f"{name}: built by {made[0]['worker']} in {made[0]['built_s']:.0f} s"
                if made else f"{name}: built before")
        if waits:
            line += "; waited for by " + ", ".join(f"{r['worker']} {r['waited_s']:.0f} s"
                                                   for r in waits)
        lines.append(line)
    if lines:
        lines.append(f"workers idle waiting for a shared build: {idle:.0f} s in all")
    return lines


def pytest_terminal_summary(terminalreporter, config):
    """At the end of a run (on the xdist controller, or the one process), the shared builds:
    a worker waiting for another's build is a core idle, which the modules' order can cause
    (tools/test.sh). Nothing is printed when no test asked for a shared build."""
    import json

    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's own, as tmp_path uses
    if factory is None:
        return
    log = factory.getbasetemp() / BUILDS_LOG
    if not log.exists():
        return
    lines = shared_build_lines([json.loads(x) for x in log.read_text().splitlines() if x])
    terminalreporter.section("shared builds (tests/conftest.py)")
    for line in lines:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def packets_built(tmp_path_factory):
    """The tiny experiment (tests/e2e/tiny.py) with ``dvc repro packets`` run, built once per
    test run; a test copies it (``tiny.copy_repo``) and changes only its copy."""
    from tests.e2e import tiny

    return _built_once(tmp_path_factory, "packets-built", tiny.build_packets)


@pytest.fixture(scope="session")
def frozen_built(tmp_path_factory):
    """The tiny experiment with command graders, graded in full and its key frozen by the
    user's loop (``tests.test_e2e_bank.build_frozen``), built once per test run; a test
    copies it (``tiny.copy_repo``) and changes only its copy."""
    from tests.test_e2e_bank import build_frozen

    return _built_once(tmp_path_factory, "frozen-built", build_frozen)


@pytest.fixture(scope="session")
def truth_frozen_built(tmp_path_factory, packets_built):
    """``packets_built`` graded from the fixture's truth table by grader-a (every pool pair)
    and auditor-b (the audit's pairs), round files and bank sidecars written, and ``dvc
    repro`` run to the frozen key, its metrics and the report; built once per test run, copied
    by each module that changes it (tests/test_e2e_void.py, tests/test_e2e_correct.py)."""
    from tests.e2e import tiny
    from tests.test_e2e_dvc import _setup

    def build(root):
        pairs, audit_pairs = _setup(root, packets_built)
        tiny.write_grades(root, "grader-a", tiny.grade_rows(pairs))
        tiny.write_grades(root, "auditor-b", tiny.grade_rows(audit_pairs))
        tiny.run(root, "dvc", "repro")

    return _built_once(tmp_path_factory, "truth-frozen-built", build)


@pytest.fixture(scope="session")
def crowd_sim_pooled(tmp_path_factory):
    """experiments/crowd-sim copied into a new git + DVC repository (``tests.e2e.shipped``)
    and run to its pool, built once per test run: the folder holds the repository ``repo``
    (copy it with ``tiny.copy_repo`` to change it) and ``pool.out``, the standard output of
    that ``dvc repro``. The crowd, adjudication switch, live raters and refresh modules start
    from it."""
    from tests.e2e import shipped

    return _built_once(tmp_path_factory, "crowd-sim-pooled", shipped.build_crowd_pooled)


@pytest.fixture(scope="session")
def crowd_sim_adjudicated(tmp_path_factory, crowd_sim_pooled):
    """``crowd_sim_pooled`` given a clone's top and taken one turn of the user's loop further
    (``tests.e2e.shipped.build_crowd_adjudicated``): the first full ``dvc repro``, which stops
    at the expert's adjudication, ``relgrade status`` there, and the expert's ``relgrade grade
    run`` its Pending line names; built once per test run. The folder holds the repository
    ``repo`` (copy it with ``tiny.copy_repo`` to change it), ``first.json`` (that ``dvc
    repro``, read with ``shipped.crowd_first``) and ``status.txt``. The crowd and refresh
    modules start from its next turn, ``crowd_sim_reported``."""
    from tests.e2e import shipped

    return _built_once(tmp_path_factory, "crowd-sim-adjudicated",
                       lambda folder: shipped.build_crowd_adjudicated(folder, crowd_sim_pooled))


@pytest.fixture(scope="session")
def crowd_sim_reported(tmp_path_factory, crowd_sim_adjudicated):
    """``crowd_sim_adjudicated`` taken through the loop's second turn (``tests.e2e.shipped.
    build_crowd_reported``): ``dvc repro experiments/crowd-sim/dvc.yaml`` with the expert's
    grades in, from the grades stage to the key, the arms' metrics and the report; built once
    per test run. The folder holds the repository ``repo`` (copy it with ``tiny.copy_repo`` to
    change it) and ``second.json`` (that ``dvc repro``, read with ``shipped.crowd_second``).
    The crowd and refresh modules start from it."""
    from tests.e2e import shipped

    return _built_once(tmp_path_factory, "crowd-sim-reported",
                       lambda folder: shipped.build_crowd_reported(folder, crowd_sim_adjudicated))


@pytest.fixture(scope="session")
def ppi_sim_built(tmp_path_factory):
    """experiments/ppi-sim as a clone has it, in a new git + DVC repository, run to its ppi
    stage (``tests.e2e.shipped.build_ppi_sim``), built once per test run: the folder holds the
    repository ``repo``; copy it with ``tiny.copy_repo`` to change it."""
    from tests.e2e import shipped

    return _built_once(tmp_path_factory, "ppi-sim-built", shipped.build_ppi_sim)


@pytest.fixture(scope="session")
def default_audited(tmp_path_factory):
    """The repository's default experiment (its tracked files, no further experiment) in a
    new git repository, run to its pool, frozen intents and audit (``tests.e2e.shipped.
    build_default_audited``: the corpus from PyPI, the four arms' runs over its 1,136 chunks),
    built once per test run: the folder holds the repository ``repo`` (copy it with
    ``tiny.copy_repo`` to change it). The disputes and reconcile modules start from it."""
    from tests.e2e import shipped

    return _built_once(tmp_path_factory, "default-audited", shipped.build_default_audited)


@pytest.fixture(scope="session")
def ppi_graded(tmp_path_factory):
    """The tiny experiment's inputs with a ppi experiment made by ``relgrade init --mode ppi``
    (the lenient model grader and a human sample of half the queries), its first ``dvc
    repro`` stopped at the grading owed and both graders' ``relgrade grade run`` done
    (``tests.test_e2e_ppi.build_graded``), built once per test run: the folder holds the
    repository ``repo`` (copy it with ``tiny.copy_repo`` to change it) and ``pending.json``,
    that ``dvc repro``'s Pending lines. The ppi and judge ledger modules start from it."""
    from tests.test_e2e_ppi import build_graded

    return _built_once(tmp_path_factory, "ppi-graded", build_graded)


@pytest.fixture(scope="session")
def a_keyed(tmp_path_factory):
    """The tiny experiment's inputs with ``experiments/a`` made by ``relgrade init`` (bm25 and
    tfidf, the command grader for both graders), graded and run to its frozen key
    (``tests.test_e2e_share.build_keyed``), built once per test run: the folder holds the
    repository ``repo`` (copy it with ``tiny.copy_repo`` to change it), ``init.json`` and
    ``key.json``. The share and disputes-anywhere modules start from it."""
    from tests.test_e2e_init_modes import _bare
    from tests.test_e2e_share import build_keyed

    bare = _built_once(tmp_path_factory, "tiny-inputs", _bare)
    return _built_once(tmp_path_factory, "a-keyed", lambda folder: build_keyed(folder, bare))
