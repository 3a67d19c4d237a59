"""The examples in fedroc.metrics' docstrings run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

import fedroc.metrics

MODULES = sorted(f"fedroc.metrics.{m.name}" for m in pkgutil.iter_modules(fedroc.metrics.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, extraglobs={"np": np}, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
