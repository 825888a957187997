"""What every stage script and CLI command shares: loading params and reporting errors.

A stage script is ``run_stage(main)`` around a ``main(params)`` that reads its inputs, calls
the library and writes its outputs. A :class:`~relgrade.errors.RelgradeError` becomes one
``Error: ...`` line on stderr and exit status 1; outputs are written atomically, so a failed
stage leaves none half-written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from relgrade.errors import GateFailed, InputError, RelgradeError
from relgrade.io.files import read_yaml


def load_params(path="params.yaml") -> dict:
    """The experiment's params as a dict.

    Raises
    ------
    InputError
        ``path`` is missing, is not YAML, or lacks the ``paths`` section.
    """
    params = read_yaml(path)
    if not isinstance(params, dict) or "paths" not in params:
        raise InputError("params file has no `paths` section", path=path)
    return params


def section(params: dict, name: str, path="params.yaml") -> dict:
    """``params[name]`` as a dict; an :class:`InputError` naming the section if absent."""
    value = params.get(name)
    if not isinstance(value, dict):
        raise InputError(f"params has no `{name}` section", path=path)
    return value


def run_stage(main: Callable[[dict], None], params_path="params.yaml") -> None:
    """Load params, call ``main(params)``, map relgrade errors to exit status 1."""
    try:
        main(load_params(params_path))
    except GateFailed as e:
        for line in e.lines:
            print(f"Gate failed: {line}", file=sys.stderr)
        sys.exit(1)
    except RelgradeError as e:
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)


def path_of(params: dict, name: str) -> Path:
    """The path ``params['paths'][name]``; an :class:`InputError` if it is not declared."""
    try:
        return Path(params["paths"][name])
    except KeyError:
        raise InputError(f"params `paths` has no entry `{name}`", path="params.yaml") from None
