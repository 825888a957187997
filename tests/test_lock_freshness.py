"""Every committed ``dvc.lock`` is fresh for its stages' deps and params.

A lock records the md5 of each dep and the value of each param its stage ran with; editing a
code dep without rerunning the pipeline leaves the lock stale, and the first ``dvc repro``
of a fresh clone then changes it. The check asks DVC itself (its ``Repo`` API: each dep's
``status()``, params included) and leaves out every dep that is, holds or lies inside a
stage's output: a fresh clone has no DVC-cached outputs, and their freshness is the
producing stage's own lock entry, checked in turn through its deps.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e import tiny

REPO = Path(__file__).resolve().parents[1]


def stale_locks(root: Path) -> list[str]:
    """``"dvc.yaml:stage: {dep: change}"`` for each lock entry whose dep or param differs from the
    checkout, over every ``dvc.yaml`` of the repository at ``root``."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        produced = [out.fs_path.rstrip(os.sep) for out in repo.index.outs]

        def an_output(path: str) -> bool:
            path = path.rstrip(os.sep)
            return any(path == o or path.startswith(o + os.sep) or o.startswith(path + os.sep)
                       for o in produced)

        return [f"{Path(stage.path).relative_to(root).as_posix()}:{stage.name}: "
                f"{dict(status)}" for stage in repo.index.stages
                for dep in stage.deps if not an_output(dep.fs_path)
                for status in [dep.status()] if status]


@pytest.mark.slow  # DVC loads 88 stages (about 30 s on a loaded machine)
def test_every_committed_lock_is_fresh_for_its_deps_and_params():
    stale = stale_locks(REPO)
    assert stale == [], ("dvc.lock entries are stale: rerun those pipelines (bash "
                         "tools/repro.sh) and commit the locks\n" + "\n".join(stale))


def _run(root, *cmd):
    return tiny.run(root, *cmd)


def test_a_deliberately_stale_lock_is_caught_and_missing_outputs_are_not(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src/step.py").write_text(
        "import sys, yaml\nn = yaml.safe_load(open('params.yaml'))['step']['n']\n"
        "open('out.txt', 'w').write(str(n) * 3)\n")
    (tmp_path / "params.yaml").write_text("step:\n  n: 2\n  unused: 1\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  step:\n    cmd: python src/step.py\n    deps: [src/step.py]\n"
        "    params: [step.n]\n    outs: [out.txt]\n"
        "  after:\n    cmd: python -c \"open('twice.txt','w').write(open('out.txt').read()*2)\"\n"
        "    deps: [out.txt]\n    outs: [twice.txt]\n")
    tiny.git(tmp_path, "init", "-q")
    _run(tmp_path, "dvc", "init", "-q")
    _run(tmp_path, "dvc", "config", "core.analytics", "false")
    _run(tmp_path, "dvc", "repro")
    assert stale_locks(tmp_path) == []
    # a fresh clone: the outputs are absent, the locks are still fresh
    for name in ("out.txt", "twice.txt"):
        (tmp_path / name).unlink()
    assert stale_locks(tmp_path) == []
    # a param the stage reads changes, one it does not read changes: only the first counts
    (tmp_path / "params.yaml").write_text("step:\n  n: 3\n  unused: 5\n")
    assert stale_locks(tmp_path) == ["dvc.yaml:step: {'params.yaml': {'step.n': 'modified'}}"]
    (tmp_path / "params.yaml").write_text("step:\n  n: 2\n  unused: 5\n")
    # a code dep edited after the lock was written: the bug of a stale committed lock
    with open(tmp_path / "src/step.py", "a") as f:
        f.write("# edited\n")
    assert stale_locks(tmp_path) == ["dvc.yaml:step: {'src/step.py': 'modified'}"]
    # the CLI of DVC says the same of that stage
    out = subprocess.run(["dvc", "status", "step"], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PATH": f"{tiny.bin_dir()}{os.pathsep}"
                                                               f"{os.environ['PATH']}"}).stdout
    assert "modified:           src/step.py" in out
