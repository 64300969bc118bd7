"""Load a script of benchmarks/ (not a package) as a module of its own, for tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_script(relative: str, name: str | None = None) -> ModuleType:
    """The script `benchmarks/<relative>` run as the module `name` (its file's stem by default)."""
    path = BENCHMARKS / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
