"""The hosts of the cluster test (``tests.cluster.hosts``), or one line saying why they cannot be
made here.

Not root, or no ``ip``/``nft``/PostgreSQL server/``redis-server``: skipped. Root, with the tools,
but the kernel refuses a namespace, a bridge or an nftables table: under
FREEHOURS_REQUIRE_SERVICES (``make ci``, which runs as root) that fails, as a missing service does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.hosts import NamespacesUnavailable, Network
from tests.cluster.services import missing_tools


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    missing = missing_tools()
    if os.geteuid() != 0 or missing is not None:
        pytest.skip(f"network namespaces cannot be made here ({missing or 'not root'})")
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        made = Network(logs)
    except NamespacesUnavailable as exc:
        if os.environ.get("FREEHOURS_REQUIRE_SERVICES"):
            pytest.fail(f"network namespaces are required here (root) but {exc}")
        pytest.skip(f"network namespaces cannot be made here ({exc})")
    with made:
        yield made
