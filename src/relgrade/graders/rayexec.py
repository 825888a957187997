"""The Ray executor: each batch's grader process runs as a Ray task on a cluster.

``relgrade grade run --executor ray`` (params ``graders.NAME.executor: ray``) keeps
everything of a local run — the plan, the validation, the retries, the call cache and the
grade store's single writer — on the machine that runs it (the *driver*) and moves only the
grader process: each attempt at a batch is one Ray task (:func:`relgrade.graders.raytask.run_command`)
that starts a fresh process of the grader's command on some worker, writes the same request
to its standard input and returns its standard output, standard error and exit status to
the driver. The driver validates the answer, stores it in the call cache and hands the rows
to the single writer, so every guarantee of :mod:`relgrade.graders.store` holds whichever
machine ran the command: nothing acknowledged is lost, no pair is recorded twice.

``workers`` tasks run at once (one driver thread waits on each), each asking Ray for one
CPU; a local Ray instance started for the run gets ``max(workers, CPUs)`` CPUs so that many
can run at once.

Which cluster: ``--address`` (params ``graders.NAME.address``), else the environment
variable ``RAY_ADDRESS``, else a local Ray instance started for this run and stopped at its
end. When Ray is already initialised in this process (a notebook, a test), that session is
used and left running.

Failures:

* a worker that dies (killed, out of memory, its node lost) takes the grader process with it
  (the process is started with Linux's parent-death signal); the driver sends the batch
  again, up to three times, after checking the spool for an answer the command printed
  before the worker died (:mod:`relgrade.graders.cache`); those re-sends are counted as
  ``lost`` and do not use up ``retries``;
* a dead raylet or runtime-environment agent on the driver's machine: Ray's driver waits
  for its task for ever (no error reaches it). While a task runs, the driver checks every
  :data:`PROBE_EVERY` seconds that both still accept a TCP connection at the ports Ray
  lists for this node (``ray.nodes()``: ``NodeManagerPort``, ``RuntimeEnvAgentPort``; each
  watched only if it accepted one when the run started); one that refuses ends the task as
  ``lost`` and sets :attr:`RayRunner.dead`, which ends the run
  at once (``_Run.note_send`` in :mod:`relgrade.graders.command`) naming what died;
* Ctrl-C, or ``kill -9`` of the driver: running tasks are cancelled (a killed driver's
  job is ended by Ray, and its workers with it); accepted batches are already on disk, the
  next run resumes. Ray ends a dead driver's workers a moment later, not at once: a grader
  process of the killed run may still be answering when the next run starts. Its spool file
  stays locked until it is gone, and the next run waits for it and takes its answer instead
  of sending the same request again (:func:`relgrade.graders.cache.wait_spool`). A task of
  the killed run that begins only then starts no process on the driver's machine: it finds
  its driver gone (:func:`relgrade.graders.raytask.driver_gone`) after opening its spool file.

Ray is an optional dependency: ``pip install 'relgrade[ray]'``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

from relgrade.errors import RelgradeError

#: Seconds between checks for a stop request while waiting on a task.
_POLL = 0.2

#: Seconds between checks, while a task runs, that this machine's raylet and runtime-env
#: agent still accept connections (:meth:`RayRunner.dead_service`).
PROBE_EVERY = 1.0

#: Seconds one such check waits for a connection.
PROBE_TIMEOUT = 2.0


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address (``HOST:PORT`` or ``ray://HOST:PORT``), or None for
    a form with no host to reach (``auto``, ``local``, or no port)."""
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, *, timeout: float) -> None:
    """Refuse a Ray address this machine cannot reach within ``timeout`` seconds.

    Ray's own connection attempts retry for minutes against an address where nothing
    listens; one TCP connection to the address's host and port answers at once (refused)
    or within ``timeout`` (no route). The ``ray://`` form also needs Ray Client
    (``pip install 'ray[client]'``, which brings grpcio), which ``relgrade[ray]`` does not
    install.

    Parameters
    ----------
    address : str
        ``HOST:PORT``, ``ray://HOST:PORT``; ``auto`` or ``local`` are not checked here.
    timeout : float
        Seconds (params ``graders.NAME.connect_timeout``, option ``--connect-timeout``).

    Raises
    ------
    RelgradeError
        ``ray://`` without Ray Client installed; nothing accepts a connection at the
        address's host and port within ``timeout`` seconds. The message names the address.
    """
    import socket

    if address.startswith("ray://"):
        try:
            import grpc  # noqa: F401 - what Ray Client needs beyond ray
        except ImportError:
            raise RelgradeError(
                f"the Ray address {address} is a Ray Client address, which needs Ray Client: "
                "pip install 'ray[client]' (relgrade[ray] installs Ray without it), or give "
                "the cluster's GCS address HOST:6379 from a machine of the cluster") from None
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as e:
        why = (f"no answer within {timeout:g} s" if isinstance(e, socket.timeout)
               else (e.strerror or str(e)).lower())
        raise RelgradeError(
            f"cannot reach the Ray cluster at {address} ({why}). Start it (ray start "
            "--head), or fix --address / graders.NAME.address; --connect-timeout sets the "
            "wait") from None


def node_services(nodes: list[dict], node_id: str) -> list[tuple[str, str, int]]:
    """The raylet and runtime-env agent of node ``node_id``: ``(what, host, port)`` each.

    Parameters
    ----------
    nodes : list of dict
        ``ray.nodes()``: each node's ``NodeID``, ``NodeManagerAddress``,
        ``NodeManagerPort`` and (Ray 2.9 and later) ``RuntimeEnvAgentPort``.
    node_id : str
        The driver's node (``ray.get_runtime_context().get_node_id()``).

    Returns
    -------
    list of (str, str, int)
        ``("Ray raylet", host, port)`` and ``("Ray runtime-env agent", host, port)``; a
        service without a port above 0 is left out, and so is everything for a node not
        listed.

    Examples
    --------
    >>> node_services([{"NodeID": "n1", "NodeManagerAddress": "10.0.0.5",
    ...                 "NodeManagerPort": 41725, "RuntimeEnvAgentPort": 33855}], "n1")
    [('Ray raylet', '10.0.0.5', 41725), ('Ray runtime-env agent', '10.0.0.5', 33855)]
    """
    out = []
    for node in nodes:
        if node.get("NodeID") != node_id:
            continue
        host = node.get("NodeManagerAddress")
        for what, key in (("Ray raylet", "NodeManagerPort"),
                          ("Ray runtime-env agent", "RuntimeEnvAgentPort")):
            port = node.get(key)
            if host and isinstance(port, int) and port > 0:
                out.append((what, host, port))
    return out


def _accepts(host: str, port: int) -> bool:
    """Whether ``host:port`` accepts a TCP connection within :data:`PROBE_TIMEOUT` seconds."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
            return True
    except OSError:
        return False


def import_ray():
    """Import Ray, or explain how to install it.

    Raises
    ------
    RelgradeError
        Ray is not installed.
    """
    try:
        import ray
    except ImportError:
        raise RelgradeError("the ray executor needs Ray, which is not installed: "
                            "pip install 'relgrade[ray]'") from None
    return ray


class RayRunner:
    """Runs grader processes as Ray tasks; the interface of :class:`~relgrade.graders.command.ProcessRunner`.

    Parameters
    ----------
    marker : str, optional
        Set as :data:`relgrade.graders.command.RUN_MARKER` in each process's environment.
    address : str, optional
        The cluster (see the module docstring).
    workers : int, default 1
        Tasks at once; the CPUs of a local instance started here.
    env : mapping of str to (str or None), optional
        The grader's declared environment variables (params ``graders.NAME.env_keys``) as the
        driver has them (:func:`relgrade.graders.cache.declared_env`): set (or, when None,
        unset) in each task's process, as they are part of the call cache key.
    connect_timeout : float, default 30
        Seconds to reach ``address`` (:func:`check_reachable`) before Ray is asked to.

    Raises
    ------
    RelgradeError
        Ray is not installed, or the cluster cannot be reached (within ``connect_timeout``
        seconds for an address with a host and port).
    """

    def __init__(self, marker: str | None = None, *, address: str | None = None,
                 workers: int = 1, env=None, connect_timeout: float = 30.0):
        from relgrade.graders import raytask

        ray = import_ray()
        self._ray = ray
        self.stopping = threading.Event()
        self._env = dict(env or {})
        if marker is not None:
            self._env["RELGRADE_GRADER_RUN"] = marker
        self._lock = threading.Lock()
        self._active: set = set()
        self._started = False
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS") or None
            kwargs = dict(include_dashboard=False, log_to_driver=False,
                          configure_logging=False)
            if address is None:
                kwargs["num_cpus"] = max(int(workers), os.cpu_count() or 1)
            else:
                check_reachable(address, timeout=connect_timeout)
            try:
                ray.init(address=address, **kwargs)
            except Exception as e:  # noqa: BLE001 - Ray raises many kinds; all mean "no cluster"
                raise RelgradeError(f"cannot start or reach the Ray cluster "
                                    f"{address or '(local)'}: {type(e).__name__}: {e}") from None
            self._started = True
        # shipped by value: a worker needs no relgrade installed
        ray.cloudpickle.register_pickle_by_value(sys.modules[raytask.__name__])
        self._task = ray.remote(num_cpus=1, max_retries=0)(raytask.run_command)
        self._node = ray.get_runtime_context().get_node_id()
        self._driver = (os.getpid(), raytask.process_start(os.getpid()))
        #: What of this machine's Ray node died (``"the Ray raylet at HOST:PORT"``), once a
        #: check found it refusing connections; None while all is well.
        self.dead: str | None = None
        try:
            listed = node_services(ray.nodes(), self._node)
        except Exception:  # noqa: BLE001 - a Ray (client) that cannot list nodes: none watched
            listed = []
        # watched only if reachable now: from a machine outside the cluster (Ray Client) the
        # node's ports may be closed to this machine, which says nothing of the node
        self._services = [s for s in listed if _accepts(s[1], s[2])]
        self._probed = time.monotonic()

    def run(self, argv: Sequence[str], data: bytes, *, timeout: float,
            spool: Path | None = None):
        """Run ``argv`` once as a Ray task; a :class:`~relgrade.graders.command.CommandResult`.

        ``lost`` is set when the worker died before answering; ``killed`` when the run is
        stopping.
        """
        from relgrade.graders.command import CommandResult

        ray = self._ray
        t0 = time.perf_counter()
        with self._lock:
            if self.stopping.is_set():
                return CommandResult(None, "", "", 0.0, killed=True)
            ref = self._task.remote(list(argv), data, float(timeout), self._env,
                                    None if spool is None else str(spool), self._node,
                                    self._driver)
            self._active.add(ref)
        try:
            while True:
                if self.dead is None:
                    done, _ = ray.wait([ref], timeout=_POLL)
                    if done:
                        break
                if self.stopping.is_set():
                    return CommandResult(None, "", "", time.perf_counter() - t0, killed=True)
                dead = self.dead or self.dead_service()
                if dead is not None:
                    return CommandResult(None, "", f"{dead} refuses connections: it died",
                                         time.perf_counter() - t0, lost=True)
            try:
                out = ray.get(ref)
            except (ray.exceptions.TaskCancelledError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                    ray.exceptions.OwnerDiedError, ray.exceptions.LocalRayletDiedError) as e:
                if self.stopping.is_set():
                    return CommandResult(None, "", "", time.perf_counter() - t0, killed=True)
                return CommandResult(None, "", f"{type(e).__name__}",
                                     time.perf_counter() - t0, lost=True)
            except ray.exceptions.RayTaskError as e:  # the task itself raised (no such command)
                return CommandResult(None, "", str(e.cause if e.cause else e),
                                     time.perf_counter() - t0)
        finally:
            with self._lock:
                self._active.discard(ref)
        return CommandResult(out["returncode"], out["stdout"], out["stderr"], out["seconds"],
                             timed_out=out["timed_out"])

    def dead_service(self) -> str | None:
        """Check, at most every :data:`PROBE_EVERY` seconds, that this machine's raylet and
        runtime-env agent accept a TCP connection; what refused (also kept in
        :attr:`dead`), or None.

        A connection that is refused, reset or not answered within :data:`PROBE_TIMEOUT`
        seconds counts as dead: Ray's driver, waiting on a task, would otherwise wait for
        ever once the raylet is gone. Only services that accepted a connection when the
        runner started are watched.
        """
        with self._lock:
            if self.dead is not None or time.monotonic() - self._probed < PROBE_EVERY:
                return self.dead
            self._probed = time.monotonic()
            services = list(self._services)
        for what, host, port in services:
            if not _accepts(host, port):
                with self._lock:
                    if self.dead is None:
                        self.dead = f"the {what} at {host}:{port}"
                return self.dead
        return None

    def stop(self) -> None:
        """Refuse new tasks and cancel the running ones (their processes die with them).

        After :attr:`dead` is set nothing is cancelled: Ray cannot reach the tasks (and a
        cancel could wait on the dead raylet); the grader processes die with their workers.
        """
        with self._lock:
            self.stopping.set()
            refs = [] if self.dead is not None else list(self._active)
        for ref in refs:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished or gone
                pass

    def close(self) -> None:
        """Stop a local Ray instance this runner started (a session it found is left)."""
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False
