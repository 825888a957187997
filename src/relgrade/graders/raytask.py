"""The body of one Ray task: run a grader command once, as a fresh process, and report.

This module imports only the standard library, and :mod:`relgrade.graders.rayexec` ships it
to the cluster by value, so a Ray worker needs no relgrade installed: only the grader
command itself (and whatever it needs) must exist on the worker's machine.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import signal
import subprocess
import time

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """A ``preexec_fn`` asking Linux to ``SIGKILL`` the child when the worker dies."""
    if os.uname().sysname != "Linux":
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def open_spool(path) -> object:
    """Create the spool file ``path`` for writing, held under an exclusive ``flock``.

    The lock belongs to the open file, which the grader process inherits as its standard
    output, so it is held until both this process and the grader (and anything the grader
    started with that output) are gone: a later run that finds the file locked knows a call
    for its key is still running (an orphan of a killed run) and waits for it rather than
    asking again (:func:`relgrade.graders.cache.wait_spool`). The file is created and locked
    under a ``.part`` name and renamed into place, so no reader ever sees it unlocked before
    the call is over.

    Parameters
    ----------
    path : str or os.PathLike
        The spool file (``KEY.TOKEN.out``); it must not exist.

    Returns
    -------
    file
        The file, open for binary writing.

    Raises
    ------
    OSError
        The file exists or cannot be created.
    """
    part = f"{os.fspath(path)}.part"
    f = open(part, "xb")
    try:
        fcntl.flock(f, fcntl.LOCK_EX)
        os.rename(part, path)
    except BaseException:
        f.close()
        try:
            os.unlink(part)
        except OSError:
            pass
        raise
    return f


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat``'s
    field 22), or None when there is no such process or no ``/proc``.

    With the pid it names one process for good: a pid reused later has another start time.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    try:
        return int(stat.rsplit(b")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def driver_gone(driver) -> bool:
    """Whether the driver ``(pid, start)`` (:func:`process_start`) has died.

    False when ``driver`` is None or its start time was unknown (nothing to check)."""
    if driver is None or driver[1] is None:
        return False
    return process_start(driver[0]) != driver[1]


def run_command(argv, data: bytes, timeout: float, env: dict, spool: str | None,
                spool_node: str | None, driver=None) -> dict:
    """Run ``argv`` with ``data`` on standard input; kill its process group after ``timeout``.

    Parameters
    ----------
    argv : list of str
        The grader command.
    data : bytes
        The request, as relgrade writes it to a local process.
    timeout : float
        Seconds before the process group is killed.
    env : dict
        Variables set in the worker's environment for the process (the run marker, the
        grader's declared variables as the driver has them); a None value unsets one, so
        the process sees exactly what the call cache key holds.
    spool : str or None
        A spool file (see :mod:`relgrade.graders.cache`) to write standard output into,
        used only when this task runs on the node ``spool_node`` (the driver's machine,
        where the driver can read it after a crash).
    spool_node : str or None
        The Ray node id of the driver.
    driver : (int, int or None), optional
        The driver's process id and start time (:func:`process_start`). On the driver's node
        the task starts no process once the driver is gone: Ray ends a dead driver's tasks a
        moment late, and a task that begins after the next run has asked (and perhaps been
        answered) would send the same request again.

    Returns
    -------
    dict
        ``returncode`` (int or None), ``stdout``, ``stderr`` (str), ``seconds``,
        ``timed_out`` (bool), ``pid`` (the command's process id, None when none started),
        ``node`` (this node's id) and ``orphaned`` (True when the driver was gone and
        nothing ran).
    """
    node = None
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # outside a Ray worker (tests of this function)
        node = None
    on_driver_node = node is not None and node == spool_node
    out_file = None
    if spool is not None and on_driver_node:
        try:
            out_file = open_spool(spool)
        except OSError:
            out_file = None
    # checked after the spool is open and locked: a driver alive now that dies a moment
    # later leaves a locked spool file, which the next run waits for instead of asking again
    if on_driver_node and driver_gone(driver):
        if out_file is not None:
            try:
                os.unlink(spool)
            except OSError:
                pass
            out_file.close()
        return {"returncode": None, "stdout": "", "stderr": "the driver is gone",
                "seconds": 0.0, "timed_out": False, "pid": None, "node": node,
                "orphaned": True}
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE if out_file is None else out_file,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=_die_with_parent(),
                            env={k: v for k, v in {**os.environ, **env}.items() if v is not None})
    timed_out = False
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out, err = proc.communicate()
    finally:
        if out_file is not None:
            out_file.close()
    if out_file is not None:
        with open(spool, "rb") as f:
            out = f.read()
    return {"returncode": proc.returncode, "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace"), "seconds": time.perf_counter() - t0,
            "timed_out": timed_out, "pid": proc.pid, "node": node, "orphaned": False}
