"""Partial AUC and operating points on the merged secret list (beyond ppAURORA).

A job may ask, besides the AUROC, for scikit-learn's McClish-standardised partial AUC up
to ``max_fpr`` and for operating points: the cut with the highest sensitivity at a
specificity of at least a target, the cut with the highest specificity at a sensitivity of
at least a target, and Youden's cut. Each is computed exactly on the sorted shares (the
same cuts and tie rules as :class:`fedroc.metrics.ScoreCounts`), and only these are opened:

- the partial AUC, rounded to ``2**-frac_bits``;
- for each point: its threshold (the exact score value of the chosen cut: a score of one
  row of some site, or ``inf`` when the cut predicts nothing positive), whether the cut
  predicts every row positive (NPV undefined), and its sensitivity, specificity, PPV and
  NPV rounded to ``2**-frac_bits``.

A partial area over fewer negatives than the job's minimum class count ``m`` is withheld
(``max_fpr N >= m`` is checked under MPC, a flag of its own beside the class counts'):
below ``1 / N`` the area is ``max_fpr t / P`` (``t`` positives above every negative), and its
opened value would be the fraction ``t / P`` whose denominator is the secret ``P``.

The class counts, the 2x2 tables and every other cut stay secret. Targets and ``max_fpr``
are public job terms in parts per million (at most six decimals), so that every comparison
is one of integers: ``specificity >= s`` is ``(N - FP) 10**6 >= K N``.

How. With the list sorted descending, the segmented scans of :mod:`fedroc.mpc.auc` give
every row its cut (``end``: the counts at the end of its tie group) and the cut before
(``beg``). A target's condition on the cuts is monotone along the list, so one layer of
secret comparisons gives an indicator that is a prefix (or suffix) of the rows, and the
difference of neighbours is the one-hot vector of the chosen cut; the tie rule (among cuts
of equal sensitivity the higher specificity) is a second such layer against the chosen
count. Youden's cut is a tournament of secret comparisons (``ceil(log2(n + 1))`` layers,
ties to the higher threshold). The partial area up to ``B = max_fpr N`` negatives is the
area of the whole groups below ``B`` (the negatives' placement sums, as for the AUROC)
plus the trapezoid of the one group that straddles ``B``, interpolated as scikit-learn
does; with ``max_fpr = k / d`` in lowest terms the standardised value is one exact
fraction of secret integers, divided under MPC like the AUROC. Its denominator grows like
``d**4 n**3``: a job whose bound exceeds ``2**60`` is refused before it starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fedroc.exceptions import InputError
from fedroc.mpc.protocols import add_public, constant, lt, mul, mul_sf
from fedroc.mpc.ring import MASK63, U64, UArray
from fedroc.mpc.ring import K as TOP_BIT
from fedroc.mpc.runtime import Party, Program, par

__all__ = ["PPM", "Asks"]

PPM = 10**6
MAX_TARGETS = 16
MAX_BITS = 60  # of the partial AUC's denominator (secret division fits 62-bit comparisons)
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789: "


def _ppm(name: str, value: float, *, positive: bool = False) -> int:
    v = float(value)
    low_ok = v > 0.0 if positive else v >= 0.0
    if not (low_ok and v <= 1.0):
        raise InputError(f"{name} must lie in {'(0, 1]' if positive else '[0, 1]'}; got {value!r}")
    k = round(v * PPM)
    if abs(v * PPM - k) > 1e-6:
        raise InputError(f"{name} takes at most six decimals under mpc; got {value!r}")
    return int(k)


@dataclass(frozen=True)
class Asks:
    """What a job asks beyond the AUROC; targets in parts per million (public job terms)."""

    max_fpr: int | None = None
    at_specificity: tuple[int, ...] = ()
    at_sensitivity: tuple[int, ...] = ()
    youden: bool = False

    def __post_init__(self) -> None:
        """Check the targets.

        Raises
        ------
        InputError
            When ``max_fpr`` is outside (0, 1e6] ppm, a target outside [0, 1e6] ppm, or more
            than ``MAX_TARGETS`` targets are asked.
        """
        if self.max_fpr is not None and not 0 < self.max_fpr <= PPM:
            raise InputError(f"max_fpr must lie in (0, {PPM}] ppm; got {self.max_fpr!r}")
        for v in self.at_specificity + self.at_sensitivity:
            if not 0 <= v <= PPM:
                raise InputError(f"a target must lie in [0, {PPM}] ppm; got {v!r}")
        if len(self.at_specificity) + len(self.at_sensitivity) > MAX_TARGETS:
            raise InputError(f"at most {MAX_TARGETS} targets per job")

    @classmethod
    def from_floats(
        cls,
        max_fpr: float | None = None,
        at_specificity: Sequence[float] = (),
        at_sensitivity: Sequence[float] = (),
        youden: bool = False,
    ) -> Asks:
        """Convert the asks of ``fedroc evaluate`` (floats, at most six decimals) to ppm."""
        return cls(
            None if max_fpr is None else _ppm("--max-fpr", max_fpr, positive=True),
            tuple(_ppm("--at-specificity", v) for v in at_specificity),
            tuple(_ppm("--at-sensitivity", v) for v in at_sensitivity),
            bool(youden),
        )

    def __bool__(self) -> bool:
        """Tell whether the job asks anything beyond the AUROC."""
        return self.max_fpr is not None or self.n_points > 0

    @property
    def n_points(self) -> int:
        """Number of operating points asked (targets and Youden's)."""
        return len(self.at_specificity) + len(self.at_sensitivity) + int(self.youden)

    def criteria(self) -> list[str]:
        """Name the points' criteria, in the order they are opened (as ScoreCounts names them)."""
        out = [f"specificity >= {v / PPM:g}" for v in self.at_specificity]
        out += [f"sensitivity >= {v / PPM:g}" for v in self.at_sensitivity]
        return out + (["youden"] if self.youden else [])

    def encode(self) -> str:
        """Canonical text of the job terms (what the owners sign)."""
        parts = [] if self.max_fpr is None else [f"pauc:{self.max_fpr}"]
        parts += [f"spec:{v}" for v in self.at_specificity]
        parts += [f"sens:{v}" for v in self.at_sensitivity]
        return " ".join(parts + (["youden"] if self.youden else []))

    @classmethod
    def parse(cls, text: str) -> Asks:
        """Inverse of :meth:`encode`; anything not in canonical form is refused."""
        if not isinstance(text, str) or any(c not in _ALPHABET for c in text):
            raise InputError(f"asks must be text of {_ALPHABET!r}; got {text!r}")
        max_fpr: int | None = None
        spec: list[int] = []
        sens: list[int] = []
        youden = False
        for token in text.split(" ") if text else []:
            name, _, value = token.partition(":")
            if name == "youden" and not value:
                youden = True
                continue
            if name not in ("pauc", "spec", "sens") or not value.isdigit():
                raise InputError(f"asks: unknown term {token!r}")
            if name == "pauc":
                max_fpr = int(value)
            else:
                (spec if name == "spec" else sens).append(int(value))
        asks = cls(max_fpr, tuple(spec), tuple(sens), youden)
        if asks.encode() != text:
            raise InputError(f"asks must be in canonical form {asks.encode()!r}; got {text!r}")
        return asks

    def fraction(self) -> tuple[int, int]:
        """``max_fpr`` as ``k / d`` in lowest terms."""
        f = Fraction(self.max_fpr or PPM, PPM)
        return f.numerator, f.denominator

    def partial_auc_bound(self, n: int) -> int:
        """Bound the partial AUC's secret denominator for ``n`` rows (a public number)."""
        k, d = self.fraction()
        # den = (2kd - k^2) d^2 m 2PN with m <= N: N^2 P <= 4 n^3 / 27.
        return (2 * k * d - k * k) * d * d * 2 * (4 * n**3 // 27 + 1)

    def check_size(self, n: int) -> None:
        """Refuse a partial AUC whose exact division does not fit the ring for ``n`` rows.

        Raises
        ------
        InputError
            Suggesting a ``max_fpr`` with a smaller denominator, or fewer rows.
        """
        if self.max_fpr is None:
            return
        if self.partial_auc_bound(n).bit_length() > MAX_BITS:
            k, d = self.fraction()
            raise InputError(
                f"the exact partial AUC at max_fpr {k}/{d} does not fit 60-bit secret "
                f"division for {n} rows; choose a max_fpr with a smaller denominator "
                "(e.g. 0.2 = 1/5) or fewer rows"
            )


def key_to_float(h: int, low: int) -> float:
    """Inverse of :func:`fedroc.mpc.ring.float_key` for one opened key."""
    key = (int(h) << 63) | (int(low) & MASK63)
    bits = key & MASK63 if key & TOP_BIT else ~key & ((1 << 64) - 1)
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def _rep(x: UArray, size: int) -> UArray:
    return np.repeat(x, size)


def _youden(p: Party, cols: UArray) -> Program:
    """Tournament argmax of column 0, ties to the earlier entry; returns the winner's row."""
    size = 1 << max(0, math.ceil(math.log2(cols.shape[0])))
    pad = constant(p, 0, (size - cols.shape[0], cols.shape[1]))
    cols = np.concatenate([cols, pad])
    while cols.shape[0] > 1:
        left, right = cols[0::2], cols[1::2]
        below = yield from lt(p, left[:, 0], right[:, 0], "youden.cmp")
        keep_left = add_public(p, U64(0) - below, 1)  # [v_left >= v_right]
        cols = right + (yield from mul_sf(p, keep_left, left - right, "youden.mux"))
    return cols[0]


def _cuts(end: UArray) -> tuple[UArray, UArray, UArray]:
    """``TP``, ``FP`` and ``j`` (rows above) at each row's cut."""
    return end[:, 0], end[:, 2] - end[:, 0], end[:, 2]


def _points(srt: UArray, end: UArray) -> UArray:
    """Each row's cut as an operating point: the columns ``h, l, TP, FP, j``.

    ``h, l`` is the key of the cut's threshold; a chosen point is opened in this form.
    """
    return np.stack([srt[:, 0], srt[:, 1], *_cuts(end)], axis=1)


def _at_targets(
    p: Party, asks: Asks, srt: UArray, end: UArray, pos: UArray, neg: UArray
) -> Program:
    """Choose the points asked by targets: per point ``(h, l, TP, FP, j, nothing positive)``."""
    points = _points(srt, end)
    n = points.shape[0]
    tp_end, fp_end = points[:, 2], points[:, 3]
    zero = constant(p, 0, (1,))
    n_spec, n_sens = len(asks.at_specificity), len(asks.at_sensitivity)
    # Layer 1: each target's condition at every row's cut ([... < ...]: the cut fails).
    xs = [(np.repeat(neg, n) - fp_end) * U64(PPM) for _ in asks.at_specificity]
    ys = [np.repeat(neg, n) * U64(s) for s in asks.at_specificity]
    xs += [tp_end * U64(PPM) for _ in asks.at_sensitivity]
    ys += [np.repeat(pos, n) * U64(s) for s in asks.at_sensitivity]
    fails = yield from lt(p, np.concatenate(xs), np.concatenate(ys), "asks.cut")
    ok = [add_public(p, U64(0) - fails[i * n : (i + 1) * n], 1) for i in range(len(xs))]
    # A prefix (specificity) ends at the chosen cut's last row; a suffix (sensitivity)
    # starts at its first row (before it: the cut at inf qualifies only for target 0).
    sels = [ok[i] - np.concatenate([ok[i][1:], zero]) for i in range(n_spec)]
    for i, s in enumerate(asks.at_sensitivity):
        o = ok[n_spec + i]
        sels.append(o - np.concatenate([constant(p, 1 if s == 0 else 0, (1,)), o[:-1]]))
    counts = yield from mul(
        p,
        np.concatenate(sels),
        np.concatenate([tp_end] * n_spec + [fp_end] * n_sens),
        "asks.count",
    )
    counts = counts.reshape(n_spec + n_sens, n).sum(axis=1)
    # Layer 2, the tie rule: the first cut with TP >= the chosen TP (over [inf, rows]),
    # the last cut with FP <= the chosen FP.
    xs = [np.concatenate([zero, tp_end]) for _ in range(n_spec)]
    ys = [np.repeat(counts[i : i + 1], n + 1) for i in range(n_spec)]
    xs += [np.repeat(counts[n_spec + i : n_spec + i + 1], n) for i in range(n_sens)]
    ys += [fp_end] * n_sens
    tie = yield from lt(p, np.concatenate(xs), np.concatenate(ys), "asks.tie")
    sels, nothing = [], []
    for i in range(n_spec):
        q = add_public(p, U64(0) - tie[i * (n + 1) : (i + 1) * (n + 1)], 1)
        sels.append(q[1:] - q[:-1])
        nothing.append(q[0:1])
    base = n_spec * (n + 1)
    for i in range(n_sens):
        r = add_public(p, U64(0) - tie[base + i * n : base + (i + 1) * n], 1)
        sels.append(r - np.concatenate([r[1:], zero]))
        nothing.append(add_public(p, U64(0) - r[0:1], 1))
    chosen = yield from mul_sf(p, np.concatenate(sels), np.tile(points, (len(sels), 1)), "pick")
    chosen = chosen.reshape(len(sels), n, 5).sum(axis=1)
    return [(*(c[k : k + 1] for k in range(5)), nothing[i]) for i, c in enumerate(chosen)]


def _partial_auc(
    p: Party, asks: Asks, beg: UArray, end: UArray, neg_b: UArray, neg: UArray, pn2: UArray
) -> Program:
    """Numerator and denominator of the standardised partial AUC (secret integers)."""
    n = end.shape[0]
    k, d = asks.fraction()
    tp_end, fp_end, _ = _cuts(end)
    tp_beg, fp_beg, _ = _cuts(beg)
    one = constant(p, 1, (1,))
    beyond = yield from lt(p, np.repeat(neg, n) * U64(k), fp_end * U64(d), "pauc.cut")
    within = add_public(p, U64(0) - beyond, 1)  # prefix: whole cuts up to max_fpr
    straddle = np.concatenate([one, within[:-1]]) - within  # first row of the next group
    t_s = np.repeat(neg, n) * U64(k) - fp_beg * U64(d)  # d (B - FP_beg)
    stack = np.stack([tp_beg, tp_end - tp_beg, fp_end - fp_beg, t_s], axis=1)
    picked, whole = yield from par(
        mul_sf(p, straddle, stack, "pauc.pick"), mul(p, within, neg_b, "pauc.whole")
    )
    tp_b, dtp, m, t_s = (picked.sum(axis=0)[i : i + 1] for i in range(4))
    a2 = whole.sum(keepdims=True)  # 2 x area of the whole groups below B
    # No straddling group (max_fpr = 1): m = 0 there; use 1 (T_s and dTP are 0 too).
    m = add_public(p, m - straddle.sum(keepdims=True), 1)
    prods = yield from mul(
        p, np.concatenate([m, m, t_s, m]), np.concatenate([a2, t_s, t_s, pn2]), "pauc.prod"
    )
    m_a2, m_t, t_t, m_pn = (prods[i : i + 1] for i in range(4))
    last = yield from mul(p, np.concatenate([m_t, t_t]), np.concatenate([tp_b, dtp]), "pauc.p2")
    # d^2 m (2 x partial area) = d^2 m A2 + 2 d m T_s TP_beg + dTP T_s^2 (T_s = d T).
    u = U64(d * d) * m_a2 + U64(2 * d) * last[0:1] + last[1:2]
    q = U64(d * d) * m_pn  # d^2 m 2 P N
    # McClish: (kd - k^2 + d^2 a) / (2kd - k^2) with a = u / q.
    return U64(k * d - k * k) * q + U64(d * d) * u, U64(2 * k * d - k * k) * q


def _youden_point(
    p: Party, srt: UArray, end: UArray, pos: UArray, neg: UArray, pn: UArray
) -> Program:
    """Youden's cut ``(h, l, TP, FP, j, nothing positive)``; entry 0 is the cut at inf."""
    n = srt.shape[0]
    points = np.concatenate([constant(p, 0, (1, 5)), _points(srt, end)])
    tp_x, fp_x = points[:, 2], points[:, 3]
    prod = yield from mul(
        p,
        np.concatenate([tp_x, fp_x]),
        np.concatenate([np.repeat(neg, n + 1), np.repeat(pos, n + 1)]),
        "youden.j",
    )
    v = prod[: n + 1] - prod[n + 1 :] + np.repeat(pn, n + 1)  # (J + 1) P N >= 0
    inf = np.concatenate([constant(p, 1, (1,)), constant(p, 0, (n,))])
    cols = np.concatenate([v[:, None], points, inf[:, None]], axis=1)
    w = yield from _youden(p, cols)
    return [tuple(w[k : k + 1] for k in range(1, 7))]


def asks_program(
    p: Party,
    asks: Asks,
    srt: UArray,
    beg: UArray,
    end: UArray,
    neg_b: UArray,
    pos: UArray,
    pp: UArray,
) -> Program:
    """Shares of the asked values: ``(quotient groups, raw outputs)``.

    ``srt`` is the sorted list (key in columns 0-1), ``beg`` and ``end`` the scanned
    ``[TP, precision, j]`` of each row's previous cut and own cut, ``neg_b`` the negatives'
    ``B_k`` (zero at the positives), ``pos`` and ``pp`` the shares of ``P`` and ``P^2``.
    The groups are ``(nums, dens, den_bits)`` for
    :func:`~fedroc.mpc.auc._rounded_quotients` (partial AUC first, then per point
    sensitivity, specificity, PPV, NPV); the raw outputs are per point the threshold's
    key ``h, l``, the flag "nothing positive" and the flag "everything positive".
    """
    n = srt.shape[0]
    neg = add_public(p, U64(0) - pos, n)
    pn = U64(n) * pos - pp
    work: list[Program] = []
    if asks.max_fpr is not None:
        work.append(_partial_auc(p, asks, beg, end, neg_b, neg, U64(2) * pn))
    if asks.at_specificity or asks.at_sensitivity:
        work.append(_at_targets(p, asks, srt, end, pos, neg))
    if asks.youden:
        work.append(_youden_point(p, srt, end, pos, neg, pn))
    done = yield from par(*work)
    groups: list[tuple[list[UArray], list[UArray], int]] = []
    if asks.max_fpr is not None:
        num, den = done.pop(0)
        groups.append(([num], [den], asks.partial_auc_bound(n).bit_length()))
    points = [pt for found in done for pt in found]
    raw: list[UArray] = []
    if points:
        js = np.concatenate([pt[4] for pt in points])
        every = yield from lt(p, add_public(p, U64(0) - js, n), constant(p, 1, js.shape), "all")
        nums: list[UArray] = []
        dens: list[UArray] = []
        for i, (h, low, tp, fp, j, inf) in enumerate(points):
            tn = neg - fp
            nums += [tp, tn, tp, tn]
            dens += [pos, neg, j + inf, add_public(p, every[i : i + 1] - j, n)]
            raw += [h, low, inf, every[i : i + 1]]
        groups.append((nums, dens, max(1, n.bit_length())))
    return groups, raw
