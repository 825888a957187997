"""tools/repro.sh: a run that stops at owed grading says how to run the same job again."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _job(tmp_path, *args):
    # the script in a folder of its own, with bootstrap a no-op and a dvc that stops at
    # owed grading as the grades stage does
    (tmp_path / "tools").mkdir()
    shutil.copy(REPO / "tools/repro.sh", tmp_path / "tools/repro.sh")
    (tmp_path / "tools/bootstrap.sh").write_text("true\n")
    bin_dir = tmp_path / ".venv/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "dvc").write_text("#!/bin/sh\necho 'Pending: grading: 2 pairs need g'\nexit 1\n")
    (bin_dir / "dvc").chmod(0o755)
    return subprocess.run(["bash", str(tmp_path / "tools/repro.sh"), *args],
                          capture_output=True, text=True,
                          env={**os.environ, "PATH": "/usr/bin:/bin"})


def test_a_job_stopped_at_owed_grading_names_its_own_arguments_to_run_again(tmp_path):
    proc = _job(tmp_path, "experiments/ppi-sim/dvc.yaml")
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[-3:] == [
        "To do (grading owed; nothing failed):", "  - grading: 2 pairs need g",
        "Then run this job again: bash tools/repro.sh experiments/ppi-sim/dvc.yaml"]


def test_the_whole_job_stopped_says_to_run_it_again_without_arguments(tmp_path):
    proc = _job(tmp_path)
    assert proc.stdout.splitlines()[-1] == "Then run this job again: bash tools/repro.sh"
