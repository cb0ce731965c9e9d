"""Test-session settings that must precede any import of Ray: every Ray test stays on loopback.

``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray take 127.0.0.1 as this machine's address
(``ray._private.services.get_node_ip_address``) instead of the external interface's, which it
finds by opening a socket towards a public address.  ``RAY_ADDRESS`` is dropped so that no test
joins a cluster of the environment, and ``RAY_TMPDIR`` points to a directory of this session so that
``ray.init()`` never joins another session's cluster through ``/tmp/ray/ray_current_cluster``.
For tests on one machine only: a real cluster uses its nodes' addresses (docs/scale-out.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.pop("RAY_ADDRESS", None)
_RAY_TMP = None
if "RAY_TMPDIR" not in os.environ:  # short: Ray's Unix socket paths live under it (108-byte limit)
    _RAY_TMP = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="nsray-", dir="/tmp")


def pytest_unconfigure(config) -> None:  # noqa: ANN001 - pytest.Config
    if _RAY_TMP is not None:
        shutil.rmtree(_RAY_TMP, ignore_errors=True)
