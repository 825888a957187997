"""Source archives from PyPI: ``pip download`` of one sdist, never installed or run.

The corpus stage and ``relgrade corpus`` read a pinned archive through :func:`fetch_sdist`;
``relgrade corpus spec`` pins a new one with :func:`download_sdist`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from relgrade.errors import InputError

#: Seconds pip may take to download one archive.
TIMEOUT = 900


def download_sdist(requirement: str, *, where=None) -> tuple[str, bytes]:
    """Download the source distribution ``requirement`` names (``pip download --no-deps
    --no-binary :all:``) into a temporary folder and return it.

    Parameters
    ----------
    requirement : str
        A pip requirement pinning one version, e.g. ``"click==8.1.8"``.
    where : str or os.PathLike, optional
        The file named in errors (a source spec).

    Returns
    -------
    filename : str
        The archive's file name, e.g. ``"click-8.1.8.tar.gz"``.
    data : bytes
        Its bytes.

    Raises
    ------
    InputError
        pip failed or timed out (its first error line is quoted), or produced no archive or
        several.
    """
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--no-input", requirement, "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            proc = None
        if proc is None or proc.returncode != 0:
            lines = [ln.strip() for ln in (proc.stderr if proc else "").splitlines() if ln.strip()]
            errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["timed out"]
            raise InputError(f"pip could not download {requirement}", path=where,
                             found=errors[0][:300],
                             fix="Check the network and package index, or use kind: sdist-file")
        got = sorted(Path(tmp).iterdir())
        if len(got) != 1:
            raise InputError(f"pip download of {requirement} gave {len(got)} files, not one "
                             "archive", path=where,
                             found=", ".join(p.name for p in got) or "nothing")
        return got[0].name, got[0].read_bytes()


def fetch_sdist(spec: dict, spec_path) -> bytes:
    """The archive a checked source spec names (its sha256 is checked by the caller).

    Parameters
    ----------
    spec : dict
        As :func:`relgrade.protocol.corpus.parse_source_spec` returns: ``kind``
        ``sdist-file`` (``path``, relative to the spec's folder) or ``pypi-sdist``
        (``requirement``, ``filename``).
    spec_path : str or os.PathLike
        The spec file.

    Returns
    -------
    bytes
        The archive.

    Raises
    ------
    InputError
        A local archive that is missing; a download that fails, or that gives a file other
        than the spec's ``filename``.
    """
    spec_path = Path(spec_path)
    if spec["kind"] == "sdist-file":
        local = spec_path.parent / spec["path"]
        if not local.is_file():
            raise InputError("source archive not found", path=spec_path, item=str(local))
        return local.read_bytes()
    name, data = download_sdist(spec["requirement"], where=spec_path)
    if name != spec["filename"]:
        raise InputError(f"pip did not produce {spec['filename']}", path=spec_path, found=name)
    return data
