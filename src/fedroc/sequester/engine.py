"""Test subsets and Thresholdout answers for a sequestered test set (paper 2).

The hash table of Tang et al. maps each image id to the ids of the test subsets that hold
it, and its inverse maps a subset id to its images. Subsets of ``N`` images are drawn at a
set prevalence, with or without replacement inside a subset, from a seed that only the
custodian keeps.

Two answering mechanisms (papers/NOTES.md section 2):

- ``h-thresholdout`` (paper Figure 2): if ``|AUC(subset) - AUC(whole set)| > T`` the answer
  is ``AUC(subset) + psi``, ``psi ~ Lap(sigma)``, and one budget unit is spent; otherwise
  the subset AUC is answered as it is.
- ``thresholdout`` (Dwork et al., Science 2015): a noisy threshold ``T + gamma``,
  ``gamma ~ Lap(2 sigma)``; per query ``eta ~ Lap(4 sigma)``; if
  ``|AUC(subset) - reference| > T + gamma + eta`` the answer is ``AUC(subset) + xi``,
  ``xi ~ Lap(sigma)``, a unit is spent and ``gamma`` redrawn; otherwise the developer's
  own ``reference`` AUC (their training or validation value) is returned.

With no unit left, nothing is answered (:class:`BudgetExhausted`): never an unperturbed
value past the budget.

Threat model
------------
The custodian (who holds labels, the seed and the subset membership) is trusted and runs
this code. Developers are untrusted and may be adaptive or malicious: they choose the
predictions and the order of their queries; they see their answers, their own remaining
budget and their own history, never labels, membership or the seed. The Laplace noise
protects the test set, so by default it is drawn from a generator seeded by ``secrets``
for every answer (tests may inject a seeded ``numpy.random.Generator``).

What is guaranteed: at most ``budget`` perturbed answers per developer and no answer once
the budget is spent. Dwork's original mechanism answers below its noisy threshold with
the developer's own reference value, so the test set only shows through the sparse-vector
decisions and the noisy answers (their (2B/(sigma n), 0)-DP bound assumes a statistic of
sensitivity 1/n; an AUC's sensitivity is 1/min(n_pos, n_neg), so scale sigma accordingly).
The h-variant answers *exact* subset AUCs whenever they lie within ``T`` of the whole-set
AUC. That protects against overfitting one subset (its AUC drifts away from the whole
set's and costs budget) but it is not differentially private: crafted predictions whose
subset AUCs stay within ``T`` (for example, one image raised above all others) reveal
labels without spending budget, and a model overfitted to the whole set is never
flagged. The epsilon ``B / (sigma phi)`` of eq. 3 is the paper's figure, not a guarantee
of this variant; ``scripts/sequester_adaptive.py`` shows both behaviours.
"""

from __future__ import annotations

import io
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from fedroc.exceptions import FedrocError, InputError

__all__ = [
    "MECHANISMS",
    "Answer",
    "BudgetExhausted",
    "Mechanism",
    "Session",
    "SubsetTable",
    "draw_subsets",
    "laplace",
    "subset_auc",
    "subset_aucs",
]

MechanismName = Literal["h-thresholdout", "thresholdout"]
MECHANISMS: tuple[str, ...] = ("h-thresholdout", "thresholdout")


class BudgetExhausted(FedrocError):
    """The developer has spent every unit of the Thresholdout budget; nothing is answered."""


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
    """

    image_ids: tuple[str, ...]
    members: NDArray[np.int32]
    _inverse: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_images(self) -> int:
        return len(self.image_ids)

    @property
    def n_subsets(self) -> int:
        return int(self.members.shape[0])

    @property
    def subset_size(self) -> int:
        return int(self.members.shape[1])

    @property
    def load_factor(self) -> float:
        """Values per key: ``N rho / phi``."""
        return self.members.size / self.n_images

    def _check_subset(self, subset_id: int) -> int:
        if isinstance(subset_id, bool) or int(subset_id) != subset_id:
            raise InputError(f"subset_id must be an integer; got {subset_id!r}")
        if not 1 <= subset_id <= self.n_subsets:
            raise InputError(f"subset_id must lie in 1..{self.n_subsets}; got {subset_id!r}")
        return int(subset_id) - 1

    def images_of(self, subset_id: int) -> list[str]:
        """Image ids of one subset (repeated as drawn)."""
        row = self.members[self._check_subset(subset_id)]
        return [self.image_ids[i] for i in row.tolist()]

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
        buf = io.BytesIO()
        np.save(buf, self.members, allow_pickle=False)
        return buf.getvalue()

    @staticmethod
    def members_from_bytes(data: bytes) -> NDArray[np.int32]:
        return np.asarray(np.load(io.BytesIO(data), allow_pickle=False), dtype=np.int32)


def draw_subsets(
    labels: ArrayLike,
    *,
    n_subsets: int,
    subset_size: int,
    prevalence: float | None = None,
    replace: bool = True,
    seed: int | np.random.Generator | None = None,
    image_ids: Sequence[str] | None = None,
) -> SubsetTable:
    """Draw ``n_subsets`` subsets of ``subset_size`` images at ``prevalence``.

    Each subset holds ``round(prevalence N)`` positives (at least one of each class), drawn
    uniformly from the positives, and the rest from the negatives; ``replace=False`` draws
    without replacement inside a subset (subsets still share images). ``prevalence``
    defaults to the test set's. The seed is the custodian's: with it the table can be
    rebuilt; ``None`` draws one from ``secrets``.

    Raises
    ------
    InputError
        When a subset cannot be drawn: fewer than two images, one class absent, or (without
        replacement) more positives or negatives asked for than the test set holds.
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
    if not replace and (n_pos > pos.size or n_neg > neg.size):
        raise InputError(
            f"subset_size {n} at prevalence {p:.4g} needs {n_pos} positive and {n_neg} "
            f"negative images per subset, but the test set has {pos.size} and {neg.size}; "
            "draw with replacement or ask for smaller subsets"
        )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
        secrets.randbits(128) if seed is None else seed
    )  # fmt: skip
    rho = int(n_subsets)
    if replace:
        take_pos = rng.choice(pos, size=(rho, n_pos), replace=True)
        take_neg = rng.choice(neg, size=(rho, n_neg), replace=True)
    else:
        # One independent permutation per row: vectorized draw without replacement.
        take_pos = rng.permuted(np.broadcast_to(pos, (rho, pos.size)), axis=1)[:, :n_pos]
        take_neg = rng.permuted(np.broadcast_to(neg, (rho, neg.size)), axis=1)[:, :n_neg]
    members = np.ascontiguousarray(np.concatenate([take_pos, take_neg], axis=1), dtype=np.int32)
    ids = tuple(str(i) for i in (range(y.size) if image_ids is None else image_ids))
    if len(ids) != y.size:
        raise InputError(f"image_ids has {len(ids)} entries but labels has {y.size}")
    return SubsetTable(ids, members)


def subset_auc(members: NDArray[np.int32], labels: NDArray[np.bool_], scores: ArrayLike) -> float:
    """AUC of one subset (its rows ``members``, repeats counted), ties counted 1/2."""
    y = labels[members]
    s = np.asarray(scores, dtype=np.float64)[members]
    pos = np.sort(s[y])
    neg = np.sort(s[~y])
    twice = np.searchsorted(neg, pos, "left").sum() + np.searchsorted(neg, pos, "right").sum()
    return float(twice) / (2.0 * pos.size * neg.size)


def subset_aucs(table: SubsetTable, labels: ArrayLike, scores: ArrayLike) -> NDArray[np.float64]:
    """AUC of every subset at once (Mann-Whitney through average ranks per row)."""
    y = np.asarray(labels, dtype=bool)[table.members]
    s = np.asarray(scores, dtype=np.float64)[table.members]
    ranks = stats.rankdata(s, axis=1)
    n_pos = y.sum(axis=1)
    n_neg = y.shape[1] - n_pos
    u = (ranks * y).sum(axis=1) - n_pos * (n_pos + 1) / 2.0
    return np.asarray(u / (n_pos * n_neg), dtype=np.float64)


# --------------------------------------------------------------------------- mechanisms


def laplace(scale: float, rng: np.random.Generator | None = None) -> float:
    """One Laplace(0, scale) draw; without ``rng`` from a generator seeded by ``secrets``."""
    g = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    return float(g.laplace(0.0, scale))


@dataclass(frozen=True)
class Answer:
    """One answered query (``value`` is all the developer receives besides the budget).

    ``holdout`` (the exact subset AUC), ``noise`` and ``threshold_noise`` stay with the
    custodian (audit).
    """

    value: float
    spent: int
    budget_after: int
    holdout: float
    reference: float
    noise: float
    threshold_noise: float


@dataclass(frozen=True)
class Mechanism:
    """A Thresholdout rule with its threshold ``T`` and noise rate ``sigma``."""

    name: MechanismName = "h-thresholdout"
    threshold: float = 0.02
    noise_rate: float = 0.124

    def __post_init__(self) -> None:
        if self.name not in MECHANISMS:
            raise InputError(f"mechanism must be one of {MECHANISMS}; got {self.name!r}")
        if not (self.threshold >= 0 and math.isfinite(self.threshold)):
            raise InputError(f"threshold must be a number >= 0; got {self.threshold!r}")
        if not (self.noise_rate > 0 and math.isfinite(self.noise_rate)):
            raise InputError(f"noise_rate must be a positive number; got {self.noise_rate!r}")

    @property
    def needs_reference(self) -> bool:
        return self.name == "thresholdout"

    def initial_threshold_noise(self, rng: np.random.Generator | None = None) -> float:
        """``gamma ~ Lap(2 sigma)`` for Dwork's rule; 0 for the h-variant (fixed ``T``)."""
        return laplace(2.0 * self.noise_rate, rng) if self.name == "thresholdout" else 0.0

    def answer(
        self,
        holdout: float,
        reference: float,
        *,
        budget: int,
        threshold_noise: float = 0.0,
        rng: np.random.Generator | None = None,
    ) -> Answer:
        """Answer one query, or raise :class:`BudgetExhausted` when ``budget < 1``.

        ``holdout`` is the subset AUC; ``reference`` the whole-set AUC (h-variant) or the
        developer's own AUC (Dwork). Returns the answer and the state after it.
        """
        if budget < 1:
            raise BudgetExhausted("the Thresholdout budget is spent; no more answers")
        sigma = self.noise_rate
        gap = abs(holdout - reference)
        if self.name == "h-thresholdout":
            if gap > self.threshold:
                psi = laplace(sigma, rng)
                return Answer(holdout + psi, 1, budget - 1, holdout, reference, psi, 0.0)
            return Answer(holdout, 0, budget, holdout, reference, 0.0, 0.0)
        eta = laplace(4.0 * sigma, rng)
        if gap > self.threshold + threshold_noise + eta:
            xi = laplace(sigma, rng)
            gamma = laplace(2.0 * sigma, rng)
            return Answer(holdout + xi, 1, budget - 1, holdout, reference, xi, gamma)
        return Answer(reference, 0, budget, holdout, reference, 0.0, threshold_noise)


class Session:
    """One developer's answers on an in-memory sequestered set (Python API, simulations).

    The service (:mod:`fedroc.sequester.service`) does the same with its state in a
    database; this class is for studies such as ``scripts/sequester_adaptive.py``.
    """

    def __init__(
        self,
        labels: ArrayLike,
        table: SubsetTable,
        mechanism: Mechanism,
        budget: int,
        *,
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
        self.rng = rng
        self.threshold_noise = mechanism.initial_threshold_noise(rng)
        self.history: list[Answer] = []

    def query(self, scores: ArrayLike, subset_id: int, *, reference: float | None = None) -> Answer:
        """The (possibly perturbed) AUC of ``scores`` on one subset."""
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != self.labels.shape:
            raise InputError(f"scores must have {self.labels.size} entries; got {s.shape}")
        if not np.isfinite(s).all():
            raise InputError("scores contain NaN or infinite values")
        row = self.table.members[self.table._check_subset(subset_id)]
        holdout = subset_auc(row, self.labels, s)
        if self.mechanism.needs_reference:
            if reference is None:
                raise InputError("the thresholdout mechanism needs the developer's reference AUC")
            ref = float(reference)
        else:
            ref = subset_auc(np.arange(self.labels.size, dtype=np.int32), self.labels, s)
        ans = self.mechanism.answer(
            holdout, ref, budget=self.budget, threshold_noise=self.threshold_noise, rng=self.rng
        )
        self.budget = ans.budget_after
        self.threshold_noise = ans.threshold_noise
        self.history.append(ans)
        return ans
