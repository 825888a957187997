"""`relgrade serve` as a real subprocess for the browser tests, and the Chromium they drive.

Chromium is Debian's (`/usr/bin/chromium`), launched headless through playwright with the
flags below; `serve` starts relgrade's web page on a free loopback port and waits until it
answers, then stops it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(args: list[str], *, src: Path = REPO / "src", cwd: Path | None = None):
    """`relgrade serve --host 127.0.0.1 --port P ARGS...` with relgrade from ``src``; yields
    its base URL once its stylesheet answers (RuntimeError, with its stderr, if it exits or
    60 s pass first), and stops it on exit."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{REPO}")
    proc = subprocess.Popen(
        [sys.executable, "-c", "from relgrade.cli import main; main()", "serve", "--host",
         "127.0.0.1", "--port", str(port), *args],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                urllib.request.urlopen(base + "/static/style.css", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError(f"relgrade serve did not start: {proc.stderr.read()}")
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
