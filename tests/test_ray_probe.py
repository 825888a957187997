"""The check that this machine's raylet and runtime-env agent still accept connections
(:mod:`relgrade.graders.rayexec`), on real sockets: a port that listens is alive; once its
listener is gone (as when a raylet is killed) it is not, at once, not after a timeout."""

from __future__ import annotations

import socket
import time

from relgrade.graders.rayexec import PROBE_TIMEOUT, _accepts, node_services


def test_a_listening_port_accepts_and_a_closed_one_is_refused_at_once():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    assert _accepts("127.0.0.1", port)
    listener.close()
    t0 = time.monotonic()
    assert not _accepts("127.0.0.1", port)
    assert time.monotonic() - t0 < PROBE_TIMEOUT  # refused, not waited out


def test_only_the_driver_s_node_and_real_ports_are_watched():
    nodes = [{"NodeID": "other", "NodeManagerAddress": "10.0.0.9", "NodeManagerPort": 1,
              "RuntimeEnvAgentPort": 2},
             {"NodeID": "mine", "NodeManagerAddress": "10.0.0.5", "NodeManagerPort": 41725,
              "RuntimeEnvAgentPort": -1}]
    assert node_services(nodes, "mine") == [("Ray raylet", "10.0.0.5", 41725)]
    assert node_services(nodes, "absent") == []
