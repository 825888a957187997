"""The one part of relgrade's build that pyproject.toml cannot declare stably: the C module
of the TREC run scan (`relgrade.io._trec_scan`, used by `relgrade evaluate` through
relgrade.io.trec_scan), so a process that scans loads no compiler at run time.

Optional: where it cannot be built (no C compiler or no Python headers; tools/bootstrap.sh
installs both when it can), the package installs without it and every run is read by the
reader, with the same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("relgrade.io._trec_scan", ["src/relgrade/io/_trec_scan.c"],
                             optional=True)])
