"""The streamed publish stage gives every committed experiment's bundle byte for byte.

For each experiment with a publish stage, the stage's function runs on that stage's committed
inputs (the deps recorded in its ``dvc.lock``, taken from the DVC cache) in a scratch folder,
and each file it writes must have the md5 the lock records for ``data/publish``. The
committed pipelines are not rerun. Skipped when no DVC cache holding those objects is at hand
(a fresh clone before ``dvc pull``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from relgrade.experiment.files import Experiment
from relgrade.pipeline.stages import publish as stage

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = [p.parent for p in [REPO / "dvc.lock", *sorted(REPO.glob("experiments/*/dvc.lock"))]
               if "publish" in yaml.safe_load(p.read_text())["stages"]]


def _caches() -> list[Path]:
    """The repository's DVC cache, and that of the main working tree when this is a linked
    git worktree (which shares its objects)."""
    out = [REPO / ".dvc" / "cache" / "files" / "md5"]
    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            cwd=REPO, capture_output=True, text=True)
    if common.returncode == 0 and common.stdout.strip():
        out.append(Path(common.stdout.strip()).parent / ".dvc" / "cache" / "files" / "md5")
    return out


def _object(md5: str) -> Path | None:
    for cache in _caches():
        path = cache / md5[:2] / md5[2:]
        if path.exists():
            return path
    return None


def _files(md5: str, rel: str) -> dict[str, str] | None:
    """relative path → md5 of a recorded output (a file, or a folder's ``.dir`` listing)."""
    obj = _object(md5)
    if obj is None:
        return None
    if not md5.endswith(".dir"):
        return {rel: md5}
    return {f"{rel}/{e['relpath']}": e["md5"] for e in json.loads(obj.read_text())}


def test_every_experiment_with_a_bundle_is_checked():
    assert [p.relative_to(REPO).as_posix() for p in EXPERIMENTS] == [
        ".", "experiments/crowd-sim", "experiments/ppi-sim", "experiments/triage-sim"]


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda p: p.name if p != REPO else "default")
def test_the_streamed_bundle_equals_the_committed_one_byte_for_byte(exp, tmp_path):
    want, root = _committed(exp, tmp_path)
    stage.run(Experiment.load(root / "params.yaml"))
    assert _bundle(root) == want


def test_a_metrics_file_of_no_arm_is_left_out_of_the_bundle_with_a_note(tmp_path, capsys):
    # a file left in the metrics folder by an arm removed by hand is no arm of params: the
    # bundle holds exactly the arms of params, as committed
    want, root = _committed(REPO, tmp_path)
    arms = root / "metrics" / "arms"
    shutil.copy(arms / "bm25.json", arms / "old.json")
    stage.run(Experiment.load(root / "params.yaml"))
    assert _bundle(root) == want
    assert capsys.readouterr().out.splitlines()[0] == (
        f"note: {arms}: old.json left out of the bundle: not an arm of params `arms` (delete "
        "the file if no longer wanted)")
    # an arm of params without its metrics: the stage stops, naming it, and writes nothing
    from relgrade.errors import ProtocolError

    (arms / "tfidf.json").unlink()
    shutil.rmtree(root / "data" / "publish")
    with pytest.raises(ProtocolError, match=r"no metrics file for arm tfidf of params `arms`"):
        stage.run(Experiment.load(root / "params.yaml"))
    assert not (root / "data" / "publish").exists()


def _bundle(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted((root / "data" / "publish").iterdir())}


def _committed(exp: Path, tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The committed bundle's files (path → md5) and a scratch copy of the publish stage's
    inputs; skips when no DVC cache holds them."""
    lock = yaml.safe_load((exp / "dvc.lock").read_text())["stages"]["publish"]
    want: dict[str, str] = {}
    for out in lock["outs"]:
        found = _files(out["md5"], out["path"])
        if found is None:
            pytest.skip(f"no DVC cache holds the committed bundle of {exp.name}")
        want |= found
    root = tmp_path / "exp"
    root.mkdir()
    shutil.copy(exp / "params.yaml", root / "params.yaml")
    for dep in lock["deps"]:
        if dep["path"].startswith(("src/", "stages/", "../")):
            continue
        listing = _files(dep["md5"], dep["path"])
        if listing is None:
            tracked = exp / dep["path"]  # a git-tracked input (the arms' metrics)
            if tracked.is_dir():
                listing = {p.relative_to(exp).as_posix(): None
                           for p in sorted(tracked.rglob("*")) if p.is_file()}
            elif tracked.is_file():
                listing = {dep["path"]: None}
            else:
                pytest.skip(f"no DVC cache holds {dep['path']} of {exp.name}")
        for rel, md5 in listing.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(exp / rel if md5 is None else _object(md5), target)
    return want, root
