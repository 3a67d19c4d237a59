"""The layers of DESIGN.md: a lower layer never imports a higher one (checked on the source).

The check reads every ``import`` (also those inside functions, which run later but still
tie the layers) with :mod:`ast`, so it fails on the first upward import anyone adds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "fedroc"

# Package -> its layer (DESIGN.md, "Layers"). Modules of the same layer may import each other.
LAYER = {
    "metrics": 1,
    "privacy": 2,
    "federation": 3,
    "secagg": 4,
    "mpc": 4,
    "methods": 5,
    "clustered": 5,  # the former home of paper 3, re-exports fedroc.methods.clustered
    "sequester": 6,  # the sequestration service and its database, on top of the method
    "experiments": 6,  # the papers' figures, simulations and example data (gbsg2)
    "apps": 6,
    "report": 6,
    "figures": 6,
    "datasets": 6,
    "cli": 7,
}
# Checked strictly: these layers must stay importable without anything above them.
STRICT = ("metrics", "privacy", "federation", "secagg", "mpc", "methods", "clustered")
# The package root (``import fedroc``, ``from fedroc import __version__``) names every layer.
ROOT_LAYER = max(LAYER.values())


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "fedroc" and node.level == 0:
            out += [(node.lineno, f"fedroc.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def _layer(module: str) -> int:
    """The layer of an imported fedroc module; 0 for the shared helpers that sit below all."""
    parts = module.split(".")
    if len(parts) == 1:
        return ROOT_LAYER
    if parts[1] in LAYER:
        return LAYER[parts[1]]
    if (SRC / f"{parts[1]}.py").exists():
        return 0  # fedroc.data, fedroc.exceptions, fedroc._results, ...
    return ROOT_LAYER  # a name defined by the package root: fedroc.__version__, fedroc.evaluate


def _upward(package: str) -> list[str]:
    found = []
    for path in sorted((SRC / package).rglob("*.py")):
        for line, module in _imports(path):
            if module.split(".")[0] == "fedroc" and _layer(module) > LAYER[package]:
                found.append(f"{path.relative_to(SRC.parent)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("package", STRICT)
def test_no_layer_imports_a_higher_one(package: str) -> None:
    assert _upward(package) == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    # The test above would pass vacuously if _imports missed imports inside functions.
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from fedroc.methods import evaluate\n    import fedroc.cli\n")
    assert [m for _, m in _imports(module)] == ["fedroc.methods", "fedroc.cli"]


def test_the_check_sees_the_package_root(tmp_path: Path) -> None:
    # ``import fedroc`` to read the version ties a low layer to the root, which names them all.
    module = tmp_path / "m.py"
    module.write_text("import fedroc\nfrom fedroc import __version__, secagg\n")
    found = [(m, _layer(m)) for _, m in _imports(module)]
    assert found == [
        ("fedroc", ROOT_LAYER),
        ("fedroc.__version__", ROOT_LAYER),
        ("fedroc.secagg", LAYER["secagg"]),
    ]


def _private_crossings(path: Path, source: str | None = None) -> list[str]:
    """Private names (and private modules) that ``path`` imports from outside their owner.

    The owner of ``_x`` in ``a.b._x`` is ``a.b``: a private module serves its own package, a
    private name its own module. fedroc's own helpers (``fedroc._results``, ...) serve all.
    """
    here = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    here = here.removesuffix(".__init__")
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = []
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, module] if module else base)
        if not module.startswith("fedroc"):
            continue
        for alias in node.names:
            parts = f"{module}.{alias.name}".split(".")
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                private = part.startswith("_") and not part.startswith("__")
                if private and not (here == owner or here.startswith(owner + ".")):
                    found.append(f"{here}:{node.lineno} imports {'.'.join(parts[: i + 1])}")
                    break
    return found


def test_no_private_name_crosses_its_owner() -> None:
    # What another module needs is exported under a public name (issue 15: _Stop,
    # _check_subset, ... were imported across modules).
    found = [f for path in sorted(SRC.rglob("*.py")) for f in _private_crossings(path)]
    assert found == []


def test_the_private_check_sees_a_crossing() -> None:
    code = (
        "from fedroc.methods.rocglm._core import rocglm\n"
        "from fedroc.secagg import _crypto\n"
        "from ._common import _helper, emit_json\n"
        "from fedroc._results import ResultMixin\n"
        "from fedroc.cli._common import err\n"
    )
    assert _private_crossings(SRC / "cli" / "m.py", code) == [
        "fedroc.cli.m:1 imports fedroc.methods.rocglm._core",
        "fedroc.cli.m:2 imports fedroc.secagg._crypto",
        "fedroc.cli.m:3 imports fedroc.cli._common._helper",
    ]


def test_site_functions_register_with_the_layer_that_owns_them() -> None:
    # The federation layer loads no plugin list by name: a higher layer's site function is
    # known once that layer (or the application, fedroc.apps.application) is imported.
    import subprocess
    import sys

    code = (
        "from fedroc.federation.site import registered_site_functions as r\n"
        "before = r()\n"
        "import fedroc.apps.application\n"
        "print(sorted(set(r()) - set(before)))\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added = got.stdout
    assert "fedroc.secagg.advertise_keys" in added and "rocglm.setup" in added
