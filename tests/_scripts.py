"""Load a study under ``scripts/`` as a module (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(filename: str, name: str) -> ModuleType:
    """Execute ``scripts/<filename>`` afresh as module ``name`` (registered in sys.modules,
    where dataclasses look their module up). The scripts import each other (``from _results
    import git_commit``), as they do when run from ``scripts/``."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_benchmark(filename: str, name: str) -> ModuleType:
    """Execute ``benchmarks/<filename>`` afresh as module ``name``, as :func:`load_script`."""
    path = SCRIPTS.parent / "benchmarks" / filename
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
