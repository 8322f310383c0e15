"""verify/check.py (the Spin driver, independent of freehours) loaded for the tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

VERIFY = Path(__file__).resolve().parents[2] / "verify"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("freehours_verify_check", VERIFY / "check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


check = _load()


def require_spin() -> None:
    """Skip (one line) where Spin or a C compiler is missing; under FREEHOURS_REQUIRE_SERVICES
    (``make ci``) fail instead."""
    missing = check.spin_available()
    if missing is None:
        return
    if os.environ.get("FREEHOURS_REQUIRE_SERVICES"):
        pytest.fail(f"the protocol model checker is required here but {missing}")
    pytest.skip(f"the protocol model is not checked: {missing}")
