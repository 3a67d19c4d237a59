"""Numpydoc entries that many public docstrings share, written once.

A docstring names a shared entry by a line that holds only ``{name}`` (indented as the
entry would be); :func:`fill_doc` puts the entry of :data:`ENTRIES` there when the
module is imported, so ``help()``, the rendered docs and the doctests read the full text.
This is scipy's ``_lib.doccer`` and pandas' ``@doc`` in small: a parameter that means the
same everywhere is explained in one place.

>>> @fill_doc
... def f(y_true):
...     '''Do nothing.
...
...     Parameters
...     ----------
...     {y_true}
...     '''
>>> print(f.__doc__.splitlines()[4])
    y_true : array-like of shape (n_samples,)
"""

from __future__ import annotations

import re
from typing import TypeVar

__all__ = ["ENTRIES", "fill_doc"]

T = TypeVar("T")

#: Shared numpydoc entries (a parameter's name, type and indented description, or a raised
#: error's), by name.
ENTRIES: dict[str, str] = {
    "y_true": """\
y_true : array-like of shape (n_samples,)
    Binary labels: {0, 1}, {-1, 1} or booleans (1 / True is positive), or any two
    values with ``pos_label`` naming the positive one.""",
    "y_score": """\
y_score : array-like of shape (n_samples,)
    Scores, higher means more likely positive (probabilities, logits or any other
    scale). NaN or infinite scores raise :class:`~fedroc.exceptions.InputError`.""",
    "y_prob": """\
y_prob : array-like of shape (n_samples,)
    Predicted probabilities of the positive class, in [0, 1].""",
    "pos_label": """\
pos_label : int, float, bool or str, optional
    The positive class. Needed only when the labels are not {0, 1}, {-1, 1} or
    booleans.""",
    "sample_weight": """\
sample_weight : array-like of shape (n_samples,), optional
    Non-negative weights (scikit-learn's semantics: zero-weight rows make no point).
    None weighs every row 1.""",
    "n_bins": """\
n_bins : int, default 10
    Number of equal-width probability bins on [0, 1]: ``[k / n_bins, (k + 1) / n_bins)``,
    the last bin closed.""",
    "confidence_level": """\
confidence_level : float, default 0.95
    Coverage of the two-sided confidence interval, in (0, 1).""",
    "seed": """\
seed : int, optional
    Seed of the analyst's own randomness (bootstrap, simulation); None draws from the
    operating system's entropy. It never reaches a site: DP noise is drawn by the sites
    from their own entropy.""",
    "federation": """\
federation : Federation
    The sites, reached only through their registered site functions (each call is
    checked against the site's disclosure policy and logged).""",
    "column": """\
column : {"score", "label"}, default "score"
    The column of each site's rows to summarise (labels as 0/1).""",
    "subset": """\
subset : {"all", "positive", "negative"}, default "all"
    The rows to use: all, or those of one class.""",
    "epsilon": """\
epsilon : float
    Privacy loss epsilon of this release, a positive number.""",
    "delta": """\
delta : float
    Probability delta with which the epsilon bound may fail, in (0, 1).""",
    "l2_sensitivity": """\
sensitivity : float
    l2-sensitivity: the largest Euclidean distance between the released values of two
    data sets that differ in one row; positive.""",
    "l1_sensitivity": """\
sensitivity : float
    l1-sensitivity: the largest sum of absolute differences between the released values
    of two data sets that differ in one row; positive.""",
    "calibration": """\
calibration : {"classic", "analytic"}, default "classic"
    How sigma is set: the classic bound (paper 1; exact only for epsilon < 1) or the
    analytic one of Balle & Wang (the smallest sigma, any epsilon).""",
    "mechanism_rng": """\
rng : numpy.random.Generator, optional
    A generator seeded from the site's own configuration (simulations, tests): numpy
    draws the noise. None (production): OpenDP draws it from the operating system's
    entropy and rounds the result to its 2^-30 grid.""",
    "noise_rng": """\
rng : numpy.random.Generator, int or None, optional
    A seeded generator or a seed (simulations, tests); None lets OpenDP draw the noise,
    as in the mechanism.""",
    "noisy_release": """\
noisy : ndarray of float64
    The values plus noise, of the shape of ``values``.
event : DPEvent
    The release to record in the site's ledger (mechanism, epsilon, delta, sensitivity,
    noise scale, size, sampler).""",
    "site_failure": """\
SiteError, DisclosureError
    A site failed the call (:class:`~fedroc.exceptions.SiteError`), or every failing site
    refused it under its disclosure policy (:class:`~fedroc.exceptions.DisclosureError`);
    the message names each site. No partial result is returned.""",
}

_PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$", re.MULTILINE)


def _indented(match: re.Match[str]) -> str:
    indent, name = match.groups()
    if name not in ENTRIES:
        raise KeyError(f"no shared docstring entry named {name!r}")
    return "\n".join(indent + line if line else line for line in ENTRIES[name].split("\n"))


def fill_doc(obj: T) -> T:
    """Put the shared entries named in ``obj``'s docstring in their place.

    Parameters
    ----------
    obj : function or class
        Its docstring names shared entries by lines that hold only ``{name}``, ``name`` a
        key of :data:`ENTRIES`; any other text is left as written.

    Returns
    -------
    function or class
        ``obj`` itself, its ``__doc__`` completed.

    Raises
    ------
    KeyError
        A placeholder names no entry of :data:`ENTRIES` (at import, not at a reader's
        ``help()``).
    """
    doc = getattr(obj, "__doc__", None)
    if doc:
        obj.__doc__ = _PLACEHOLDER.sub(_indented, doc)
    return obj
