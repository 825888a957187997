"""The one part of relgrade's build that pyproject.toml cannot declare stably: the C modules
of the TREC run scan (`relgrade.io._trec_scan`, used by `relgrade evaluate` through
relgrade.io.trec_scan) and of the click log's check (`relgrade.clicks._log_scan`, used by
relgrade.clicks.log for a log stored sorted by session), so a process that scans loads no
compiler at run time.

Optional: where they cannot be built (no C compiler or no Python headers; tools/bootstrap.sh
installs both when it can), the package installs without them: every run is read by the
reader and every click log checked by DuckDB alone, with the same results.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("relgrade.io._trec_scan", ["src/relgrade/io/_trec_scan.c"],
                             optional=True),
                   Extension("relgrade.clicks._log_scan", ["src/relgrade/clicks/_log_scan.c"],
                             optional=True)])
