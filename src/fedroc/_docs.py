"""Numpydoc entries that many public docstrings share, written once.

A docstring names shared entries by a line that holds only ``{name}`` or
``{name, other, ...}`` (indented as the entries would be); :func:`fill_doc` puts the
entries of :data:`ENTRIES` there, one after the other, when the module is imported, so
``help()``, the rendered docs and the doctests read the full text. This is scipy's
``_lib.doccer`` and pandas' ``@doc`` in small: a parameter that means the
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

import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["ENTRIES", "fill", "fill_doc", "parameters_of"]

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
    Number of equal-width probability bins on [0, 1], their edges ``k / n_bins`` rounded to
    the nearest 1/4096 (:func:`fedroc.metrics.bin_edges`), the last bin closed.""",
    "confidence_level": """\
confidence_level : float, default 0.95
    Coverage of the two-sided confidence interval, in (0, 1).""",
    "seed": """\
seed : int, optional
    Seed of the analyst's own randomness (bootstrap, simulation); None draws from the
    operating system's entropy. It never reaches a site: DP noise is drawn by the sites
    from their own entropy.""",
    "ctx": """\
ctx : SiteContext
    The calling site function's context.""",
    "refused_function": """\
function : str
    Its registered name, for the refusal.""",
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
    "returns_noisy_release": """\
Returns
-------
noisy : ndarray of float64
    The values plus noise, of the shape of ``values``.
event : DPEvent
    The release to record in the site's ledger (mechanism, epsilon, delta, sensitivity,
    noise scale, size, sampler).""",
    "inputs": """\
inputs : EvaluationInputs
    What :func:`fedroc.evaluate` runs the method on: the federation, the pooled rows
    where the caller holds them, the analyst's seed and the confidence level.""",
    "evaluation_result": """\
EvaluationResult
    The common result; ``to_dict()`` is the JSON object of ``fedroc evaluate --json``
    and ``details`` the method's own result object.""",
    "rocglm_thresholds": """\
thresholds : {"grid", "positives"}, default "grid"
    The paper's equidistant grid of false-positive rates ``j / (n_thresholds + 1)``, or
    the reference code's rule: the positives' scores (which must then lie in [0, 1]).""",
    "rocglm_n_thresholds": """\
n_thresholds : int, default 28
    Size of the grid, at least 2 (at most 64 in the distributed fit).""",
    "tol": """\
tol : float, default 1e-8
    Fisher scoring stops when ``|dev_m - dev_(m-1)| / (|dev_m| + 0.1) < tol`` (R's
    ``glm.fit`` rule on the deviance).""",
    "max_iter": """\
max_iter : int, default 25
    Most Fisher-scoring updates; a fit that has not converged by then warns and keeps
    its last coefficients.""",
    "n_breaks": """\
n_breaks : int, optional
    Histogram cells of the sensitivity heuristic; default a third of the site's rows.""",
    "branching": """\
branching : int
    Children of each node of the hierarchical histogram, at least 2.""",
    "tree_levels": """\
levels : sequence of ndarray
    The tree's levels 1..h: ``levels[j]`` holds the ``branching ** (j + 1)`` (noisy)
    counts of level j + 1; the root is not released.""",
    "score_range_lo_hi": """\
lo, hi : float
    The public score range ``[lo, hi]``, divided into leaves of equal width.""",
    "n_leaves": """\
n_leaves : int
    Number of leaves (the finest bins) over the score range.""",
    "quantile_fractions": """\
fractions : ndarray of float
    Probabilities of the quantiles, non-decreasing in [0, 1].""",
    "roc_polylines": """\
fpr_true, tpr_true : ndarray of float
    The pooled (empirical) ROC curve's points, false positive rate non-decreasing.
fpr_hat, tpr_hat : ndarray of float
    The approximated curve's points.""",
    "interpolation": """\
interpolation : {"pchip", "linear", "midpoint"}, default "pchip"
    How each survival function runs between its quantiles: PCHIP (the paper: monotone
    piecewise cubic), straight lines, or the mean of the previous and the next point (a
    step halfway between the left- and right-continuous ECDFs; the reference code's
    ``midpoint``).""",
    "site_sum": """\
federation : Federation
    The sites.
function : str
    The site function to run at every site (a clustered-AUC round).
args : Record
    Its arguments, the same for every site.

Returns
-------
dict of str to ndarray of float64
    For each key of the sites' replies, the sum over the sites; a secure sum adds, under
    ``"__statements__"``, the statement each site made in the clear about its input
    (site name -> bytes: in round 1 its signed rows, which round 2 relays to every site);
    a plain sum adds, under ``"__releases__"``, the replies of sites that signed them
    (site name -> record: in round 1 each site's signed release, which round 2 relays).

Raises
------
SiteError, DisclosureError
    A site failed or refused (the message names it).""",
    "clustered_signed": """\
site : str
    The signing site.
edges : ndarray of float, shape (n_bins + 1,)
    The shared edges of the clustered round-1 summary.""",
    "n_images": """\
n_images : int
    ``phi``, the number of sequestered images, a positive integer.""",
    "n_subsets": """\
n_subsets : int
    ``rho``, the number of test subsets, a positive integer.""",
    "subset_size": """\
subset_size : int
    ``N``, images per subset, a positive integer.""",
    "load_factor": """\
load_factor : float
    ``xi = N rho / phi``: the mean number of subset places per image (values per key of
    the image-to-subset hash table); positive.""",
    "noise_rate": """\
noise_rate : float
    ``sigma``, the Laplace noise rate of eq. 3 (on the AUC scale), in [1e-6, 100].""",
    "budget": """\
budget : float
    ``B``, the h-Thresholdout_AUC budget of eq. 3: perturbed answers allowed; positive.""",
    "planning_auc": """\
auc : float
    The AUC assumed for planning, in (0, 1).""",
    "prevalence": """\
prevalence : float
    Fraction of positive images, in (0, 1).""",
    "power": """\
power : float, default 0.8
    The power the test of AUC = 0.5 must reach, in (0, 1).""",
    "alpha": """\
alpha : float, default 0.05
    Significance level of the two-sided test of AUC = 0.5, in (0, 1).""",
    "secagg_kwargs": """\
**kwargs
    Options of the session, passed to :func:`~fedroc.secagg.secure_sum`: ``sites``,
    ``threshold``, ``bits``, ``frac_bits``, ``allow_dropouts``.""",
    "secagg_failure": """\
ProtocolError
    Fewer than the threshold of sites survived a stage; the session was aborted and the
    sites erased their secrets before anything was unmasked.
SiteError, DisclosureError
    A site failed or refused to take part (without ``allow_dropouts``); the message names
    it.""",
    "secagg_session": """\
session : str
    The session id (hex).
sites : list of str
    The session's members, in order (a site's position, from 1, is its Shamir
    x-coordinate).
threshold : int
    Survivors needed at every stage and shares needed to rebuild a secret.
bits : int
    The ring Z_2^bits of the masked vectors.
frac_bits : int
    Fixed-point scale of float inputs (2^-frac_bits).""",
    "mpc_job_parameters": """\
sort : {"oblivious", "delta"}
    Bitonic merge (nothing opened) or the paper's merge with ``delta``.
delta : int
    Odd; the paper's privacy/speed parameter (``sort="delta"`` only).
noties : bool
    Also compute the paper's no-tie AUROC (Algorithm 5).
frac_bits : int
    Precision of the opened values: each is rounded to a multiple of ``2**-frac_bits``
    (the variance to ``2**-min(2 frac_bits, 60)``); 1 to 52, default 14.
min_class_count : int
    Nothing is opened (every value comes back undefined) unless both classes have at
    least this many samples, checked under MPC; default 5.
ci : bool
    Also compute DeLong's variance of the AUROC (for its standard error and CI).
compare : bool
    Records carry a second model's score: also open its AUROC, AUPR and variance, and
    the variance of the difference of the two AUROCs (paired DeLong), all under MPC.
asks : str
    Partial AUC and operating points of the first model (:class:`~fedroc.mpc.asks.Asks`
    in its canonical text; empty for none).""",
    "binormal_g": """\
g1, g2 : float
    Intercept and slope of the binormal curve ``ROC(t) = Phi(g1 + g2 Phi^-1(t))``.""",
    "returns_noise": """\
Returns
-------
noise : ndarray of float64, shape ``size``
    The noise alone.
event : DPEvent
    The release to record in the site's ledger.""",
    "site_failure": """\
SiteError, DisclosureError
    A site failed the call (:class:`~fedroc.exceptions.SiteError`), or every failing site
    refused it under its disclosure policy (:class:`~fedroc.exceptions.DisclosureError`);
    the message names each site. No partial result is returned.""",
}

# A line holding only {name} or {name, other}; names start with a letter, so that a set
# such as {0, 1} on a line of its own stays text.
_PLACEHOLDER = re.compile(r"^([ \t]*)\{([A-Za-z_]\w*(?:, [A-Za-z_]\w*)*)\}[ \t]*$", re.MULTILINE)


def fill(doc: str, **extra: str) -> str:
    """Put the entries named by placeholder lines of ``doc`` in their place.

    Parameters
    ----------
    doc : str
        A docstring whose lines holding only ``{name}`` (or ``{name, other, ...}``) name
        entries.
    **extra : str
        Entries of this docstring only, besides :data:`ENTRIES` (they win on a clash).

    Returns
    -------
    str
        ``doc`` with each placeholder replaced by its entry, indented as the placeholder.

    Raises
    ------
    KeyError
        A placeholder names no entry.
    """
    entries = {**ENTRIES, **extra}

    def indented(match: re.Match[str]) -> str:
        indent, names = match.groups()
        lines = []
        for name in names.split(", "):
            if name not in entries:
                raise KeyError(f"no shared docstring entry named {name!r}")
            lines += entries[name].split("\n")
        return "\n".join(indent + line if line else line for line in lines)

    return _PLACEHOLDER.sub(indented, doc)


_ENTRY_START = re.compile(r"^(\*{0,2}\w+(?:, \*{0,2}\w+)*)(?: : |$)")


def parameters_of(func: Callable[..., Any], names: Iterable[str]) -> str:
    """Return the Parameters entries of ``func``'s docstring for ``names``, in that order.

    A runner of :func:`fedroc.evaluate` takes most options of the function it runs; this
    lets its docstring show their text without writing it twice.

    Parameters
    ----------
    func : callable
        A function documented numpydoc style.
    names : iterable of str
        Parameters of ``func`` to take. An entry documenting several names at once
        (``epsilon, delta : float``) is taken once.

    Returns
    -------
    str
        The entries, unindented, one after the other.

    Raises
    ------
    KeyError
        ``func``'s docstring documents no parameter of one of ``names``.
    """
    doc = inspect.cleandoc(func.__doc__ or "")
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\n", 1)[0]
    entries: list[list[str]] = []  # the lines of each entry
    entry_of: dict[str, int] = {}  # parameter name -> its entry
    for line in section.splitlines():
        start = _ENTRY_START.match(line)
        if start:
            for name in start.group(1).split(", "):
                entry_of[name.lstrip("*")] = len(entries)
            entries.append([line])
        elif entries:
            entries[-1].append(line)
    taken = list(dict.fromkeys(entry_of[name] for name in names))
    return "\n".join("\n".join(entries[i]) for i in taken)


def fill_doc(obj: T) -> T:
    """Put the shared entries named in ``obj``'s docstring in their place.

    Parameters
    ----------
    obj : function or class
        Its docstring names shared entries by lines that hold only ``{name}`` or
        ``{name, other, ...}``, each name a key of :data:`ENTRIES`; any other text is left
        as written.

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
        obj.__doc__ = fill(doc)
    return obj
