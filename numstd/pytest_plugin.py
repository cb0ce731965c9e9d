"""pytest plugin (entry point ``pytest11``): the ``numstd_check`` fixture and ``--numstd-report``.

``numstd_check(actual, op=..., inputs=..., **params)`` asserts conformance like
:func:`numstd.assert_conforms` and records the verdict; ``--numstd-report PATH`` writes every
verdict of the session as JSON (``.json``) or Arrow/Parquet (``.parquet``).  Failures show the
verdict's full message: counts, the worst elements and what was allowed.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

import pytest

__all__ = ["pytest_addoption", "pytest_configure", "pytest_sessionfinish", "numstd_check"]

_KEY = pytest.StashKey[list]() if hasattr(pytest, "StashKey") else None


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("numstd")
    group.addoption("--numstd-report", default=None, metavar="PATH",
                    help="write every numstd verdict of the session to PATH (.json or .parquet)")


def pytest_configure(config: Any) -> None:
    config.stash[_KEY] = []
    config._numstd_lock = threading.Lock()


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = session.config.getoption("--numstd-report", default=None)
    records = session.config.stash.get(_KEY, [])
    if not path:
        return
    if str(path).endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        tables = [v.to_arrow().append_column("test", pa.array([nodeid])) for nodeid, v in records]
        if tables:
            pq.write_table(pa.concat_tables(tables), path)
        return
    with open(path, "w", encoding="utf-8") as fh:
        json.dump([dict(v.to_dict(), test=nodeid) for nodeid, v in records], fh, indent=1)


@pytest.fixture
def numstd_check(request: Any) -> Callable[..., Any]:
    """Assert that an output conforms to its numstd standard; returns the (passing) verdict."""
    from .check import check
    from .errors import NonConformance

    def _check(actual: Any, *, op: str, inputs: Any, standard: Any = None, **params: Any) -> Any:
        v = check(actual, op=op, inputs=inputs, standard=standard, **params)
        with request.config._numstd_lock:
            request.config.stash[_KEY].append((request.node.nodeid, v))
        if not v.passed:
            raise NonConformance(v.message, v)
        return v

    return _check
