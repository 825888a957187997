"""Run a measured command from a small process, so its peak memory is its own.

On Linux a child's ``ru_maxrss`` starts from the RSS of the process it was forked from (the
address space is shared or copied until ``exec``, and the kernel keeps the larger high-water
mark across ``exec``). A benchmark that builds its inputs in memory and then starts the
command under test would report its own size as the command's peak whenever the command
uses less. So the benchmark starts this script (a fresh interpreter importing only the
standard library), which starts the command, waits for it and prints its rusage as JSON:

    python benchmarks/launch.py '{"cmd": [...], "cwd": "..."}'

The floor it passes on is this script's own size, about 10 MiB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def run(cmd: list[str], cwd: str) -> dict:
    """Run ``cmd`` in ``cwd`` to its end (stdin closed, stdout discarded); its rusage
    (children included), wall seconds, exit code and the last 4,000 characters of stderr."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return {"returncode": proc.returncode, "wall_s": time.perf_counter() - start,
            "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "maxrss_kib": usage.ru_maxrss,
            "stderr": err.decode(errors="replace")[-4000:]}


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    print(json.dumps(run(job["cmd"], job["cwd"])))
