"""Every callable a public module exports documents what to pass and what comes back.

numpydoc's own validator (the one scikit-learn and pandas run on their API) reads each
function and class named in the ``__all__`` of the modules below. A callable fails on:

- GL08: no docstring;
- PR01: a parameter of its signature is not documented;
- PR02: a documented parameter is not in its signature;
- PR03: its parameters are documented in another order than the signature's;
- RT01: a function that returns a value has no Returns section.

A dataclass documents its fields (the parameters of its constructor) in an Attributes
section, as scipy's and statsmodels' result objects do; it may document properties there
too, in the order that reads best (PR03 does not apply to it). The other checks of
numpydoc (style of the summary, See Also, Examples) are ruff's pydocstyle's business or
left to taste.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import warnings
from typing import Any

import pytest
from numpydoc.docscrape import get_doc_object
from numpydoc.validate import Validator, error, validate

#: The modules whose exports are held to the checks (a module joins when it passes).
MODULES = [
    "fedroc",
    "fedroc.metrics",
    "fedroc.report",
    "fedroc.datasets",
    "fedroc.federation",
    "fedroc.federation.basic",
    "fedroc.privacy",
    "fedroc.methods",
    "fedroc.methods.rocglm",
    "fedroc.methods.histogram",
    "fedroc.methods.clustered",
    "fedroc.methods.mpc",
    "fedroc.methods.sequester",
    "fedroc.secagg",
    "fedroc.mpc",
]

CHECKS = ("GL08", "PR01", "PR02", "PR03", "RT01")


class _Validator(Validator):
    """numpydoc's validator; a dataclass's Attributes count as its constructor's parameters."""

    def __init__(self, obj_name: Any) -> None:
        # Without show_class_members numpydoc would list a class's properties and defaulted
        # fields as if they were documented Attributes.
        super().__init__(get_doc_object(obj_name, config={"show_class_members": False}))

    @property
    def parameter_mismatches(self) -> list[tuple[str, str]]:
        if not dataclasses.is_dataclass(self.obj):
            return super().parameter_mismatches
        documented = [
            name.replace("\\", "")
            for name in self._doc_parameters(["Parameters", "Other Parameters", "Attributes"])
        ]
        # A private field (a cache) is no part of what a reader passes or reads.
        fields = {name for name in self.signature_parameters if not name.startswith("_")}
        errors = []
        missing = fields - set(documented)
        if missing:
            errors.append(error("PR01", missing_params=str(missing)))
        # An attribute that is not a field must at least be an attribute of the class.
        unknown = {name for name in documented if name not in fields}
        unknown -= {name for name in unknown if hasattr(self.obj, name)}
        if unknown:
            errors.append(error("PR02", unknown_params=str(unknown)))
        # No PR03: a result's Attributes may follow the reader (fields grouped by meaning,
        # properties among them) rather than the order of the fields.
        return errors


def _exports() -> list[tuple[str, str]]:
    pairs = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                pairs.append((module_name, name))
    return pairs


EXPORTS = _exports()


@pytest.mark.parametrize(("module_name", "name"), EXPORTS, ids=[f"{m}.{n}" for m, n in EXPORTS])
def test_exported_callable_documents_its_parameters_and_result(module_name, name):
    obj = getattr(importlib.import_module(module_name), name)
    with warnings.catch_warnings():
        # numpydoc warns about sections it does not know (e.g. a class's "Methods" prose).
        warnings.simplefilter("ignore")
        result = validate(obj, validator_cls=_Validator)
    failures = [f"{code} {message}" for code, message in result["errors"] if code in CHECKS]
    where = f"{result['file']}:{result['file_line']}"
    assert not failures, f"{module_name}.{name} ({where}): " + "; ".join(failures)


def test_every_module_in_scope_exports_callables():
    # A module that loses its __all__ (or the whole list) would make the check above vacuous.
    for module_name in MODULES:
        assert any(m == module_name for m, _ in EXPORTS), module_name


def test_fill_doc_puts_shared_entries_in_place_and_refuses_unknown_names():
    from fedroc._docs import ENTRIES, fill_doc

    def documented(y_true):
        """Do nothing.

        Parameters
        ----------
        {y_true}
        """

    doc = fill_doc(documented).__doc__
    first, *rest = ENTRIES["y_true"].splitlines()
    assert f"\n        {first}\n" in doc and all(f"\n        {line}" in doc for line in rest)

    def misspelt(y_true):
        """Do nothing.

        Parameters
        ----------
        {y_ture}
        """

    with pytest.raises(KeyError, match="y_ture"):
        fill_doc(misspelt)
