"""The hash table of a sequestered test set and one developer's session (paper 2).

Tang, Whitney, Myers & Giger (papers/thresholdout-auc-midrc-tang.md, section 2.2): the
hash table maps each image id to the ids of the test subsets that hold it, and its inverse
maps a subset id to its images. Subsets of ``N`` images are drawn at a set prevalence,
with or without replacement inside a subset, from a seed that only the custodian keeps.
How one query is answered is :mod:`fedroc.methods.sequester.mechanism`; what a developer
may submit and ask is bounded by :class:`Limits`; :class:`Session` puts them together in
memory (studies, tests) as the service does in its database (:mod:`fedroc.sequester`).
"""

from __future__ import annotations

import io
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from fedroc.exceptions import FedrocError, InputError
from fedroc.methods.sequester.mechanism import Answer, BudgetExhausted, Mechanism, ParameterError
from fedroc.metrics import roc_auc
from fedroc.privacy.ledger import DPEvent
from fedroc.privacy.mechanisms import discrete_laplace_mechanism

__all__ = [
    "PREVALENCE_SD",
    "ClassesTooSmall",
    "Limits",
    "NearDuplicate",
    "NeedsReplacement",
    "QuotaExceeded",
    "Session",
    "SubsetTable",
    "auc_sensitivity",
    "default_max_copies",
    "draw_subsets",
    "noisy_prevalence",
    "prevalence_epsilon",
    "rank_distance",
    "resolve_max_copies",
    "subset_auc",
    "subset_aucs",
]


class QuotaExceeded(FedrocError):
    """The developer has used every submission or query their quota allows."""


class NearDuplicate(InputError):
    """A submission orders the images almost as an earlier one does (a probe)."""


class NeedsReplacement(ParameterError):
    """A cap ``max_copies`` other than 1 was asked for a draw without replacement.

    Parameters
    ----------
    max_copies : object
        The cap asked for (``value``).
    """

    def __init__(self, max_copies: object) -> None:
        super().__init__(
            f"max_copies {max_copies!r} needs replace=True: without replacement a subset "
            "holds each image once",
            parameter="max_copies",
            value=max_copies,
        )


class ClassesTooSmall(ParameterError):
    """Subsets of ``subset_size`` at ``prevalence`` need more images of a class than a draw has.

    Parameters
    ----------
    subset_size : int
        ``N`` (``value``).
    prevalence : float
        The subsets' prevalence.
    needed : tuple of int
        Positives and negatives one subset needs.
    available : tuple of int
        Positives and negatives of the test set.
    max_copies : int or None
        The cap of a draw with replacement (its copies are what is short); None without
        replacement.
    """

    def __init__(
        self,
        *,
        subset_size: int,
        prevalence: float,
        needed: tuple[int, int],
        available: tuple[int, int],
        max_copies: int | None,
    ) -> None:
        head = (
            f"subset_size {subset_size} at prevalence {prevalence:.4g} needs {needed[0]} "
            f"positive and {needed[1]} negative images per subset"
        )
        if max_copies is None:
            tail = (
                f", but the test set has {available[0]} and {available[1]}; draw with "
                "replacement or ask for smaller subsets"
            )
        else:
            tail = (
                f", more than max_copies {max_copies} copies of the test set's "
                f"{available[0]} and {available[1]} make; raise max_copies or ask for "
                "smaller subsets"
            )
        super().__init__(head + tail, parameter="subset_size", value=subset_size)
        self.prevalence = prevalence
        self.needed = needed
        self.available = available
        self.max_copies = max_copies


# --------------------------------------------------------------------------- hash table


@dataclass(frozen=True, eq=False)
class SubsetTable:
    """The hash table: image ids <-> test-subset ids.

    Attributes
    ----------
    image_ids : tuple of str
        Keys, in the order of the test set.
    members : ndarray of int32, shape (n_subsets, subset_size)
        Row ``k`` holds the image indices of subset ``k + 1`` (subset ids start at 1);
        an index may repeat when subsets were drawn with replacement.
    max_copies : int or None
        The most copies of one image a subset may hold *by construction* (public, part of
        the plan): 1 without replacement, the cap of a capped draw, 0 for the paper's
        uncapped draw with replacement; None when unknown (a table built by hand, or a
        plan stored before schema 0005), where :func:`auc_sensitivity` reads the table.
    """

    image_ids: tuple[str, ...]
    members: NDArray[np.int32]
    max_copies: int | None = None
    _inverse: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_images(self) -> int:
        """Number of images in the test set (phi)."""
        return len(self.image_ids)

    @property
    def n_subsets(self) -> int:
        """Number of test subsets (rho)."""
        return int(self.members.shape[0])

    @property
    def subset_size(self) -> int:
        """Images per subset (N)."""
        return int(self.members.shape[1])

    @property
    def load_factor(self) -> float:
        """Values per key: ``N rho / phi``."""
        return self.members.size / self.n_images

    def row(self, subset_id: int) -> NDArray[np.int32]:
        """Image indices of subset ``subset_id`` (1-based), or an error naming it."""
        return self.members[self._index(subset_id)]

    def _index(self, subset_id: int) -> int:
        ok = isinstance(subset_id, (int, np.integer)) and not isinstance(subset_id, bool)
        if not ok:
            raise ParameterError(
                f"subset_id must be an integer; got {subset_id!r}",
                parameter="subset_id",
                value=subset_id,
            )
        if not 1 <= subset_id <= self.n_subsets:
            raise ParameterError(
                f"subset_id must lie in 1..{self.n_subsets}; got {subset_id!r}",
                parameter="subset_id",
                value=subset_id,
            )
        return int(subset_id) - 1

    def images_of(self, subset_id: int) -> list[str]:
        """Image ids of one subset (repeated as drawn)."""
        return [self.image_ids[i] for i in self.row(subset_id).tolist()]

    def _csr(self) -> tuple[dict[str, int], NDArray[np.int64], NDArray[np.int64]]:
        if not self._inverse:
            flat = self.members.ravel()
            order = np.argsort(flat, kind="stable")
            offsets = np.zeros(self.n_images + 1, dtype=np.int64)
            np.cumsum(np.bincount(flat, minlength=self.n_images), out=offsets[1:])
            subsets = (order // self.subset_size + 1).astype(np.int64)
            self._inverse["index"] = {img: i for i, img in enumerate(self.image_ids)}
            self._inverse["offsets"] = offsets
            self._inverse["subsets"] = subsets
        return self._inverse["index"], self._inverse["offsets"], self._inverse["subsets"]

    @property
    def index(self) -> dict[str, int]:
        """Position of each image id in the test set."""
        return self._csr()[0]

    def subsets_of(self, image_id: str) -> NDArray[np.int64]:
        """Subset ids that hold ``image_id`` (one entry per occurrence, ascending)."""
        index, offsets, subsets = self._csr()
        if image_id not in index:
            raise InputError(f"image id {image_id!r} is not in the test set")
        i = index[image_id]
        return subsets[offsets[i] : offsets[i + 1]]

    def members_bytes(self) -> bytes:
        """Serialise :attr:`members` as a ``.npy`` blob (no pickle), for the database."""
        buf = io.BytesIO()
        np.save(buf, self.members, allow_pickle=False)
        return buf.getvalue()

    @staticmethod
    def members_from_bytes(data: bytes) -> NDArray[np.int32]:
        """Read a blob written by :meth:`members_bytes` (pickles refused)."""
        return np.asarray(np.load(io.BytesIO(data), allow_pickle=False), dtype=np.int32)


#: Standard deviation of the noisy prevalence a plan's subsets are drawn at by default.
PREVALENCE_SD = 0.01


def prevalence_epsilon(n_images: int) -> float:
    """Default epsilon of the noisy prevalence: sd about :data:`PREVALENCE_SD`, at most 1.

    The count's discrete Laplace noise has sd about ``sqrt(2) / epsilon`` images, so
    ``epsilon = sqrt(2) / (0.01 n)``: 0.135 for the paper's 1047 images, 1 below 142 images
    (where the sd grows past 0.01).

    Parameters
    ----------
    n_images : int
        Size of the test set (public).

    Returns
    -------
    float
        The epsilon, in (0, 1].
    """
    return min(1.0, math.sqrt(2.0) / (PREVALENCE_SD * max(int(n_images), 1)))


def noisy_prevalence(
    labels: ArrayLike, *, epsilon: float | None = None, rng: np.random.Generator | None = None
) -> tuple[float, DPEvent]:
    """Estimate the test set's prevalence from a differentially private count of positives.

    Subsets drawn at the exact ``labels.mean()`` hold ``round(P N / n)`` positives, which the
    answers' rounding step and the AUC's sensitivity follow: publishing any of them tells a
    developer who knows every other label the last one. Drawn at this prevalence instead,
    everything the plan publishes is ``(epsilon, 0)``-DP in one image's label, besides what
    its answers spend, except whether :func:`draw_subsets` can serve it: it refuses a count
    the true class sizes cannot fill (``tests/test_sequester_refusals.py``: a delta of
    3e-5 at the default cap on 40 images, below 1e-20 at the paper's plan).

    Parameters
    ----------
    labels : array-like of bool, shape (n_images,)
        Labels of the whole test set, True for positive; at least two images.
    epsilon : float, optional
        Privacy of the count (discrete Laplace, sensitivity 1); default
        :func:`prevalence_epsilon` of the set's size.
    rng : numpy.random.Generator, optional
        For reproducible studies; by default OpenDP draws the noise.

    Returns
    -------
    prevalence : float
        The noisy count over ``n_images``, kept within ``[1 / n, 1 - 1 / n]``.
    event : DPEvent
        The count's guarantee.
    """
    y = np.asarray(labels, dtype=bool)
    if y.ndim != 1 or y.size < 2:
        raise InputError(f"labels must be one-dimensional with >= 2 images; got shape {y.shape}")
    eps = prevalence_epsilon(y.size) if epsilon is None else epsilon
    count, event = discrete_laplace_mechanism(int(y.sum()), epsilon=eps, rng=rng)
    return min(max(count, 1), y.size - 1) / y.size, event


def draw_subsets(
    labels: ArrayLike,
    *,
    n_subsets: int,
    subset_size: int,
    prevalence: float | None = None,
    replace: bool = True,
    max_copies: int | None = None,
    seed: int | np.random.Generator | None = None,
    image_ids: Sequence[str] | None = None,
) -> SubsetTable:
    """Draw ``n_subsets`` subsets of ``subset_size`` images at ``prevalence``.

    Each subset holds ``round(prevalence N)`` positives (at least one of each class), drawn
    uniformly from the positives, and the rest from the negatives; ``replace=False`` draws
    without replacement inside a subset (subsets still share images). ``prevalence``
    defaults to the test set's. The seed is the custodian's: with it the table can be
    rebuilt; ``None`` draws one from ``secrets``.

    With replacement, a subset holds at most ``max_copies`` copies of one image: each
    class's slots are drawn without replacement from ``max_copies`` copies of each of its
    images (a uniform subset of the copies). The cap is public and does not depend on the
    labels, so the AUC's sensitivity (:func:`auc_sensitivity`) follows from it and the
    public prevalence alone; the paper's uncapped draw (``max_copies=0``) lets one image
    fill every slot of its class, and its sensitivity is 1. The default,
    :func:`default_max_copies`, keeps at least 3/4 of the uncapped draw's variance of each
    image's count.

    Parameters
    ----------
    labels : array-like of bool, shape (n_images,)
        Label of each image of the test set, True for positive.
    n_subsets : int
        ``rho``, the number of subsets, at least 1.
    subset_size : int
        ``N``, images per subset, at least 2.
    prevalence : float, optional
        Fraction of positives in each subset, in (0, 1); default the test set's.
    replace : bool, default True
        Draw with replacement inside a subset.
    max_copies : int, optional
        With replacement, the most copies of one image in a subset; 0 for no cap (the
        paper's i.i.d. draw). Default :func:`default_max_copies` of the subset size and
        the test set's size. Without replacement it is 1 (another value is refused).
    seed : int or numpy.random.Generator, optional
        The custodian's seed or generator; None draws a seed from ``secrets``.
    image_ids : sequence of str, optional
        Id of each image; default ``"0"``, ``"1"``, ...

    Returns
    -------
    SubsetTable
        The image ids and the members of each subset.

    Raises
    ------
    InputError
        When a subset cannot be drawn: fewer than two images or one class absent;
        :class:`ClassesTooSmall` for more positives or negatives asked for than the test
        set holds (without replacement) or than ``max_copies`` copies of them make;
        :class:`NeedsReplacement` for ``max_copies`` other than 1 without replacement.
    """
    y = np.asarray(labels, dtype=bool)
    if y.ndim != 1:
        raise InputError(f"labels must be one-dimensional; got shape {y.shape}")
    if isinstance(n_subsets, bool) or int(n_subsets) != n_subsets or n_subsets < 1:
        raise InputError(f"n_subsets must be a positive integer; got {n_subsets!r}")
    if isinstance(subset_size, bool) or int(subset_size) != subset_size or subset_size < 2:
        raise InputError(f"subset_size must be an integer >= 2; got {subset_size!r}")
    pos = np.flatnonzero(y).astype(np.int32)
    neg = np.flatnonzero(~y).astype(np.int32)
    if pos.size == 0 or neg.size == 0:
        raise InputError(
            f"the test set needs both classes to draw subsets; it has {pos.size} positive "
            f"and {neg.size} negative images"
        )
    p = pos.size / y.size if prevalence is None else float(prevalence)
    if not 0.0 < p < 1.0:
        raise InputError(f"prevalence must lie in (0, 1); got {prevalence!r}")
    n = int(subset_size)
    n_pos = min(max(round(p * n), 1), n - 1)
    n_neg = n - n_pos
    copies = resolve_max_copies(max_copies, replace, n, y.size)
    short = (
        (n_pos > pos.size or n_neg > neg.size)
        if not replace
        else bool(copies) and (n_pos > copies * pos.size or n_neg > copies * neg.size)
    )
    if short:
        raise ClassesTooSmall(
            subset_size=n, prevalence=p, needed=(n_pos, n_neg),
            available=(int(pos.size), int(neg.size)), max_copies=copies if replace else None,
        )  # fmt: skip
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
        secrets.randbits(128) if seed is None else seed
    )  # fmt: skip
    rho = int(n_subsets)
    if replace and copies == 0:
        take_pos = rng.choice(pos, size=(rho, n_pos), replace=True)
        take_neg = rng.choice(neg, size=(rho, n_neg), replace=True)
    else:
        # Capped; without replacement, copies is 1.
        take_pos = _capped_draw(rng, pos, rho, n_pos, copies)
        take_neg = _capped_draw(rng, neg, rho, n_neg, copies)
    members = np.ascontiguousarray(np.concatenate([take_pos, take_neg], axis=1), dtype=np.int32)
    ids = tuple(str(i) for i in (range(y.size) if image_ids is None else image_ids))
    if len(ids) != y.size:
        raise InputError(f"image_ids has {len(ids)} entries but labels has {y.size}")
    return SubsetTable(ids, members, max_copies=copies)


def default_max_copies(subset_size: int, n_images: int) -> int:
    """Default cap on one image's copies in a subset drawn with replacement.

    An uncapped draw of ``N`` slots gives each image about ``e = N / phi`` copies (in each
    class, at a subset prevalence near the set's). Drawn from ``c`` copies of each image
    instead, an image's count has the finite-population variance ``1 - e / c`` of the
    uncapped one's; ``c = ceil(4 e)`` keeps at least 3/4 of it. The cap sets the AUC's
    sensitivity, ``2 c / min(P, Q)``: at the paper's plan (1047 images, subsets of 4188)
    ``c`` is 16.

    Parameters
    ----------
    subset_size : int
        ``N``, images per subset (public).
    n_images : int
        ``phi``, images in the test set (public).

    Returns
    -------
    int
        The cap, at least 1.

    Examples
    --------
    >>> default_max_copies(4188, 1047), default_max_copies(20, 40)
    (16, 2)
    """
    return max(1, math.ceil(4 * int(subset_size) / max(int(n_images), 1) - 1e-12))


def resolve_max_copies(
    max_copies: int | None, replace: bool, subset_size: int, n_images: int
) -> int:
    """Check ``max_copies`` and give the cap a draw uses (:func:`draw_subsets`, the planner).

    Parameters
    ----------
    max_copies : int or None
        As given: None for the default, 0 for no cap.
    replace : bool
        Drawn with replacement (without, the cap is 1).
    subset_size, n_images : int
        ``N`` and ``phi``, for :func:`default_max_copies`.

    Returns
    -------
    int
        The cap, 0 for none.

    Raises
    ------
    InputError
        For a cap that is not a whole number >= 0; :class:`NeedsReplacement` for one
        other than 1 without replacement.
    """
    if max_copies is None:
        return default_max_copies(subset_size, n_images) if replace else 1
    ok = isinstance(max_copies, (int, np.integer)) and not isinstance(max_copies, bool)
    if not ok or max_copies < 0:
        raise InputError(
            f"max_copies must be a whole number >= 1 (or 0: no cap); got {max_copies!r}"
        )
    if not replace and max_copies != 1:
        raise NeedsReplacement(max_copies)
    return int(max_copies)


def _capped_draw(
    rng: np.random.Generator, pool: NDArray[np.int32], rho: int, k: int, copies: int
) -> NDArray[np.int32]:
    """``rho`` rows of ``k`` draws from ``pool``, each a uniform k-subset of its copies.

    Three exact ways, by cost (``benchmarks/bench_sequester_draw.py``): few slots among
    many copies (``k^2 <= 4 c M``) by rejection for all rows at once
    (:func:`_distinct_rows`); up to :data:`_PERMUTED_MAX` copies by permuting them for
    many rows at once (:func:`_permuted_rows`); more, one ``Generator.choice`` per row (a
    partial shuffle of ``k`` steps, faster than permuting ``c M`` copies from about 600
    on, its call overhead then small beside its work). A call per row cost tens of
    microseconds for each of a million small subsets; permuting every row's whole class
    (the draw without replacement's old way) held ``n_subsets * n_images`` entries.
    """
    m = copies * pool.size
    if k * k <= 4 * m:
        slots = _distinct_rows(rng, m, rho, k)
    elif m <= _PERMUTED_MAX:
        slots = _permuted_rows(rng, m, rho, k)
    else:
        slots = np.empty((rho, k), dtype=np.int64)
        for r in range(rho):
            slots[r] = rng.choice(m, size=k, replace=False)
    return pool[slots // copies]


#: Most copies :func:`_capped_draw` permutes for many rows at once (else one row a call).
_PERMUTED_MAX = 512

#: Entries (rows times copies or slots) one vectorised step holds: 32 MB of int64.
_CHUNK = 2**22


def _permuted_rows(rng: np.random.Generator, m: int, rho: int, k: int) -> NDArray[np.int64]:
    """``rho`` rows of the first ``k`` of a uniform permutation of ``range(m)``."""
    out = np.empty((rho, k), dtype=np.int64)
    base = np.arange(m, dtype=np.int64)
    step = max(1, _CHUNK // m)
    for r0 in range(0, rho, step):
        r1 = min(rho, r0 + step)
        out[r0:r1] = rng.permuted(np.broadcast_to(base, (r1 - r0, m)), axis=1)[:, :k]
    return out


def _distinct_rows(rng: np.random.Generator, m: int, rho: int, k: int) -> NDArray[np.int64]:
    """``rho`` rows of ``k`` distinct values of ``range(m)``, each a uniform k-subset.

    ``k`` uniform draws conditioned on being distinct are a uniform k-subset in a uniform
    order; a row with a repeat is redrawn whole (the condition holds exactly). A row is
    kept with probability ``prod_{j < k} (1 - j / m)``, at least 0.09 for ``k^2 <= 4 m``
    (the least at ``m = k = 4``; near ``exp(-2)`` for large ``m``): a few vectorised
    passes.
    """
    out = rng.integers(0, m, size=(rho, k), dtype=np.int64)
    todo = np.arange(rho)
    chunk = max(1, _CHUNK // k)  # rows sorted at a time: a copy of 32 MB, not of the table
    while todo.size:
        repeat = np.concatenate([
            _has_repeat(out[todo[i : i + chunk]]) for i in range(0, todo.size, chunk)
        ])  # fmt: skip
        todo = todo[repeat]
        out[todo] = rng.integers(0, m, size=(todo.size, k), dtype=np.int64)
    return out


def _has_repeat(rows: NDArray[np.int64]) -> NDArray[np.bool_]:
    ordered = np.sort(rows, axis=1)
    return (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)


def subset_auc(members: NDArray[np.int32], labels: NDArray[np.bool_], scores: ArrayLike) -> float:
    """AUC of one subset (its rows ``members``, repeats counted), ties counted 1/2.

    Parameters
    ----------
    members : ndarray of int32, shape (subset_size,)
        Image indices of the subset (a row of :attr:`SubsetTable.members`).
    labels : ndarray of bool, shape (n_images,)
        Labels of the whole test set.
    scores : array-like of float, shape (n_images,)
        The model's scores of the whole test set.

    Returns
    -------
    float
        The subset's AUC.
    """
    return roc_auc(labels[members], np.asarray(scores, dtype=np.float64)[members])


def subset_aucs(table: SubsetTable, labels: ArrayLike, scores: ArrayLike) -> NDArray[np.float64]:
    """AUC of every subset (one :func:`fedroc.metrics.roc_auc` per subset, not per row).

    Parameters
    ----------
    table : SubsetTable
        The subsets.
    labels : array-like of bool, shape (n_images,)
        Labels of the whole test set.
    scores : array-like of float, shape (n_images,)
        The model's scores of the whole test set.

    Returns
    -------
    ndarray of float64, shape (n_subsets,)
        The AUC of each subset, in the order of the table.
    """
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    return np.array([roc_auc(y[row], s[row]) for row in table.members], dtype=np.float64)


def auc_sensitivity(table: SubsetTable, labels: ArrayLike) -> float:
    """Largest change of a subset AUC when one image's label flips.

    An image held ``m`` times by a subset of ``P`` positives and ``Q`` negatives moves its
    AUC by at most ``m / P + m / (Q + m) <= 2 m / min(P, Q)``: leaving the positives moves
    their mean placement by at most ``m / P``, joining the negatives moves every placement
    by at most ``m / (Q + m)`` (and symmetrically). The maximum over subsets, capped at 1,
    calibrates the differential-privacy events of the answers.

    The subsets are not held fixed between neighbours: :func:`draw_subsets` draws a
    subset's positives from the positives, so two test sets one image's label apart (the
    neighbours of the guarantee; ids and the public prevalence, hence each subset's ``P``
    and ``Q``, the same) draw different tables. The bound still covers them as long as the
    table is the custodian's *secret random* draw, by a coupling. Draw world A's table
    (image ``i`` positive); obtain world B's (``i`` negative) from it slot by slot: a copy
    of ``i`` among a subset's positives becomes a positive drawn uniformly from the others,
    and each negative becomes ``i`` with probability ``1 / (Q_set + 1)`` (``Q_set``
    negatives in the test set; without replacement, ``i`` is swapped for a positive not in
    the subset, and takes the place of a uniform negative with probability
    ``Q / (Q_set + 1)``). Each table then has its own world's distribution and the two
    differ only where ``i`` sits, so a subset's AUC moves by at most ``m / P + m' / Q``
    for ``m`` copies of ``i`` in world A and ``m'`` in world B: replacing one positive
    changes ``Q`` of the ``P Q`` pairs. Answers drawn on a coupled pair are within the
    noise's ``e^epsilon`` of each other, and averaging over the coupling keeps that ratio.
    Without replacement ``m, m' <= 1`` and ``2 / min(P, Q)`` is a bound whatever the draw
    (``scripts/results/sequester_neighbours.md``: one probe answer, ratio 1.50 [1.45, 1.55]
    against ``e^1``). Drawn with at most ``c`` copies (:func:`draw_subsets`' ``max_copies``),
    each class's slots are a uniform subset of ``c`` copies of its images; a uniform
    arrangement of world A's copies, with ``i``'s removed, is a uniform arrangement of
    world B's, so the first slots of the two differ only where ``i``'s copies stood,
    ``m, m' <= c``, and ``2 c / min(P, Q)`` is the bound. It depends on the public cap and
    class sizes only: publishing it (in the plan's epsilon) tells nothing of the labels.
    Uncapped (``max_copies=0``) ``m`` may reach ``P``: the sensitivity is 1. A table of
    unknown cap (``max_copies`` None: built by hand or stored before the cap existed) is
    read as held fixed, ``mult`` being its largest number of copies in one subset; for a
    table drawn uncapped that is not a worst case, and it depends on the labels through
    the draw (fewer positives, more copies of each). With the seed known to a developer the
    tables of the two worlds are fixed functions of the labels that differ in every subset,
    and no bound of this kind holds.

    Parameters
    ----------
    table : SubsetTable
        The subsets, held fixed.
    labels : array-like of bool, shape (n_images,)
        Labels of the whole test set, True for positive.

    Returns
    -------
    float
        The sensitivity, in (0, 1]; 1 when a subset lacks a class.
    """
    y = np.asarray(labels, dtype=bool)
    rho, n = table.members.shape
    n_pos = y[table.members].sum(axis=1)
    smaller = np.minimum(n_pos, n - n_pos)
    if (smaller < 1).any() or table.max_copies == 0:
        return 1.0
    if table.max_copies is not None:
        return float(min(1.0, np.max(2.0 * table.max_copies / smaller)))
    members = np.sort(table.members, axis=1)
    new_run = np.ones(members.shape, dtype=bool)
    new_run[:, 1:] = members[:, 1:] != members[:, :-1]
    starts = np.flatnonzero(new_run.ravel())
    lengths = np.diff(np.append(starts, members.size))
    # Runs never cross rows (each row's first entry starts a run), so reduceat over the
    # index of each row's first run gives the largest multiplicity per subset.
    row_first = np.searchsorted(starts, np.arange(rho) * n)
    mult = np.maximum.reduceat(lengths, row_first)
    return float(min(1.0, np.max(2.0 * mult / smaller)))


def rank_distance(a: ArrayLike, b: ArrayLike) -> float:
    """How far apart two score vectors order the images, in images moved.

    Spearman's footrule between their average ranks divided by ``n - 1``: lifting one
    image from the bottom of a strict ordering to its top counts 2, raising one image of
    a constant vector counts about 1; the footrule lies between the number of pairs the two
    orderings disagree on and twice that (Diaconis & Graham 1977). Two different models
    are hundreds of images apart; a probe that moves a few images is a few.

    Parameters
    ----------
    a, b : array-like of float, shape (n,)
        Two score vectors of the same images.

    Returns
    -------
    float
        The footrule divided by ``n - 1``; 0 for fewer than two images.
    """
    ra = stats.rankdata(np.asarray(a, dtype=np.float64))
    rb = stats.rankdata(np.asarray(b, dtype=np.float64))
    if ra.size < 2:
        return 0.0
    return float(np.abs(ra - rb).sum() / (ra.size - 1))


@dataclass(frozen=True)
class Limits:
    """What one developer may submit and ask, beside the budget of noisy answers.

    Parameters
    ----------
    max_queries : int or None, default 1000
        Queries answered in all (None: no limit).
    max_submissions : int or None, default 100
        Submissions accepted in all (None: no limit).
    min_changed_images : float, default 5
        A submission whose :func:`rank_distance` to an earlier one of the same developer
        is below this is refused (0: never); one-image probes are about 1 apart.
    """

    max_queries: int | None = 1000
    max_submissions: int | None = 100
    min_changed_images: float = 5.0

    def __post_init__(self) -> None:
        """Check the limits: positive integers or None, ``min_changed_images >= 0``."""
        for name in ("max_queries", "max_submissions"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
                raise InputError(f"{name} must be a positive integer or None; got {value!r}")
        if not (self.min_changed_images >= 0 and math.isfinite(self.min_changed_images)):
            raise InputError(
                f"min_changed_images must be a number >= 0; got {self.min_changed_images!r}"
            )

    def check_query(self, n_queries: int) -> None:
        """Raise :class:`QuotaExceeded` when ``n_queries`` answered already use the quota."""
        if self.max_queries is not None and n_queries >= self.max_queries:
            raise QuotaExceeded(
                f"query quota used: {n_queries} of {self.max_queries} queries answered; "
                "ask the custodian for more"
            )

    def check_submission(
        self, scores: NDArray[np.float64], earlier: Sequence[tuple[int, NDArray[np.float64]]]
    ) -> None:
        """Refuse a submission past the quota or too close to an ``(id, scores)`` earlier."""
        if self.max_submissions is not None and len(earlier) >= self.max_submissions:
            raise QuotaExceeded(
                f"submission quota used: {len(earlier)} of {self.max_submissions} submissions "
                "made; ask the custodian for more"
            )
        if self.min_changed_images <= 0:
            return
        for sid, prev in earlier:
            d = rank_distance(scores, prev)
            if d < self.min_changed_images:
                raise NearDuplicate(
                    f"scores order the images almost as submission {sid} does (rank distance "
                    f"{d:.2f} images, below min_changed_images={self.min_changed_images:g}); "
                    f"query submission {sid} instead"
                )


class Session:
    """One developer's answers on an in-memory sequestered set (Python API, simulations).

    The service (:mod:`fedroc.sequester`) does the same with its state in a database.

    Parameters
    ----------
    labels : array-like of bool, shape (n_images,)
        The test set's labels, in the order of ``table.image_ids``.
    table : SubsetTable
        The test subsets.
    mechanism : Mechanism
        The answering rule.
    budget : int
        Perturbed answers the developer may receive.
    limits : Limits, optional
        Default: none at all (studies); the service applies :class:`Limits` ``()`` unless
        the custodian says otherwise.
    rng : numpy.random.Generator, optional
        For reproducible studies; by default every noise draw uses operating-system entropy
        through :mod:`fedroc.privacy`.
    """

    def __init__(
        self,
        labels: ArrayLike,
        table: SubsetTable,
        mechanism: Mechanism,
        budget: int,
        *,
        limits: Limits | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.labels = np.asarray(labels, dtype=bool)
        if self.labels.size != table.n_images:
            raise InputError(
                f"labels has {self.labels.size} entries but the table {table.n_images} images"
            )
        self.table = table
        self.mechanism = mechanism
        self.budget = int(budget)
        self.limits = Limits(None, None, 0.0) if limits is None else limits
        self.rng = rng
        self.sensitivity = auc_sensitivity(table, self.labels)
        self.threshold_noise = mechanism.initial_threshold_noise(rng, sensitivity=self.sensitivity)
        self.submissions: list[NDArray[np.float64]] = []
        self.history: list[Answer] = []

    def _scores(self, scores: ArrayLike) -> NDArray[np.float64]:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != self.labels.shape:
            raise InputError(f"scores must have {self.labels.size} entries; got {s.shape}")
        if not np.isfinite(s).all():
            raise InputError("scores contain NaN or infinite values")
        return s

    def submit(self, scores: ArrayLike) -> int:
        """Register predictions (checked against :class:`Limits`); returns the id (from 1)."""
        s = self._scores(scores)
        self.limits.check_submission(s, list(enumerate(self.submissions, start=1)))
        self.submissions.append(s.copy())
        return len(self.submissions)

    def query(
        self, scores: ArrayLike | int, subset_id: int, *, reference: float | None = None
    ) -> Answer:
        """Answer a submission id, or scores (submitting them first if new)."""
        if isinstance(scores, (int, np.integer)) and not isinstance(scores, bool):
            if not 1 <= scores <= len(self.submissions):
                raise InputError(f"submission {scores} does not exist")
            s = self.submissions[int(scores) - 1]
        else:
            s = self._scores(scores)
            # The same scores again query the earlier submission, as a client would.
            if not any(np.array_equal(s, p) for p in self.submissions):
                self.submit(s)
        row = self.table.row(subset_id)
        self.limits.check_query(len(self.history))
        if self.budget < 1:
            raise BudgetExhausted("the budget is spent; no more answers")
        holdout = subset_auc(row, self.labels, s)
        whole = float("nan") if self.mechanism.needs_reference else roc_auc(self.labels, s)
        ref = self.mechanism.comparison(reference, whole)
        ans = self.mechanism.answer(
            holdout,
            ref,
            budget=self.budget,
            threshold_noise=self.threshold_noise,
            sensitivity=self.sensitivity,
            rng=self.rng,
        )
        self.budget = ans.budget_after
        self.threshold_noise = ans.threshold_noise
        self.history.append(ans)
        return ans
