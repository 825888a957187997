"""`grade run --executor ray` with an address it cannot use ends at once in one `Error:`
naming the address: nothing listening (instead of minutes of Ray's own retries), and the
`ray://` form without Ray Client installed. No Ray cluster is started here."""

from __future__ import annotations

import importlib.util
import socket
import time

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import RelgradeError
from relgrade.graders.rayexec import _host_port, check_reachable
from tests.graders import experiment as ex

pytest.importorskip("ray")


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("address, target", [
    ("127.0.0.1:6379", ("127.0.0.1", 6379)), ("ray://head.example:10001", ("head.example", 10001)),
    ("[::1]:6379", ("::1", 6379)), ("auto", None), ("local", None), ("head", None)])
def test_the_host_and_port_of_each_address_form(address, target):
    assert _host_port(address) == target


def test_an_address_where_nothing_listens_is_refused_at_once_naming_it(tmp_path):
    ex.build(tmp_path, queries=1, chunks=3,
             graders={"grader-a": {"role": "grader", "kind": "model", "family": "test",
                                   "command": ex.command("ok")}})
    address = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--executor", "ray",
                                    "--address", address, "--params",
                                    str(tmp_path / "params.yaml"), "--no-progress"])
    took = time.monotonic() - t0
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output == (f"Error: cannot reach the Ray cluster at {address} (connection "
                          "refused). Start it (ray start --head), or fix --address / "
                          "graders.NAME.address; --connect-timeout sets the wait\n")
    assert took < 30  # Ray's own retries took 150 s and more
    assert not (tmp_path / "data/grades/grader-a/round-1.jsonl").exists()


def test_a_listening_address_passes_the_check(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_reachable(f"127.0.0.1:{server.getsockname()[1]}", timeout=5)


@pytest.mark.skipif(importlib.util.find_spec("grpc") is not None,
                    reason="Ray Client is installed here")
def test_a_ray_client_address_without_ray_client_names_the_extra_to_install():
    with pytest.raises(RelgradeError) as e:
        check_reachable(f"ray://127.0.0.1:{free_port()}", timeout=5)
    assert str(e.value).startswith("the Ray address ray://127.0.0.1:") and \
        "needs Ray Client: pip install 'ray[client]'" in str(e.value)


def test_connect_timeout_is_a_positive_number(tmp_path):
    from relgrade.errors import InputError
    from relgrade.graders.command import grader_setup

    spec = {"role": "grader", "kind": "model", "command": ["g"], "connect_timeout": 0}
    with pytest.raises(InputError, match=r"graders.g.connect_timeout must be a number of "
                                         r"seconds > 0 \(found 0\)"):
        grader_setup(spec, "g")
    assert grader_setup({**spec, "connect_timeout": 5}, "g").connect_timeout == 5.0
    assert grader_setup({**spec, "connect_timeout": 5}, "g",
                        connect_timeout=2).connect_timeout == 2.0
    del spec["connect_timeout"]
    assert grader_setup(spec, "g").connect_timeout == 30.0
