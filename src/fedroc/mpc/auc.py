"""AUROC, AUPR and DeLong's variance on the merged secret list (ppAURORA Section 5).

With the pooled list sorted by score, descending, labels ``l_k``, ``TP_k = sum_{i<=k} l_i``
and change points ``c_k = [score_k != score_k+1]`` (``c_n = 1``), every tie group ends at a
change point. For each sample ``k`` let ``beg`` be the values at the last change point
before ``k`` (``TP = 0``, precision 1, index 0 before the first) and ``end`` those at the
first change point at or after ``k``. Then, exactly (ties counted one half, trapezoids only
at distinct thresholds, starting at recall 0, precision 1)::

    B_k = TP_beg + TP_end          = 2 #positives above k + #positives tied with k
    A_k = 2N - (FP_beg + FP_end)    = 2 #negatives below k + #negatives tied with k
    2 P N AUROC = sum over negatives of B_k = sum over positives of A_k   (=: U2)
    2 P   AUPR  = sum over positives k of (prec_end + prec_beg),   prec_j = TP_j / j

with ``FP_j = j - TP_j``. ``A_k / 2N`` (positives) and ``B_k / 2P`` (negatives) are DeLong's
placement values ``V10`` and ``V01`` with ties counted one half, so the same two scans give
the exact DeLong variance (paper 1, eq. 2)::

    var(AUC) = var10 / P + var01 / N,   var10 = SSA / (4 N^2 (P - 1)),
    SSA = sum over positives of (A_k - mean A)^2

SSA is computed without 128-bit numbers: with ``c = round(U2 / P)`` (a secret integer
division), ``x = sum_pos (A_k - c)^2 = sum_pos A_k^2 - c (2 U2 - P c)`` and ``e = U2 - P c``
(``|e| <= P / 2``), ``SSA = x - e^2 / P``, kept with as many fraction bits ``t`` as fit in
62 bits (``t = 27`` at ``n = 3072``). Then ``var10`` (``F1 = 54 - bitlen(n)`` bits) and
``var10 / P`` (60 bits) by two secret divisions; likewise for the negatives.

Secret steps, all vectorized: one layer of comparisons of neighbours gives ``c`` (the
helper sees only blinded private-compare vectors, so not the tie pattern); ``prec_j`` is
``TP_j * round(2**62 / j)`` rounded exactly to ``F`` bits; ``beg`` and ``end`` are two
segmented scans run side by side (``ceil(log2(n + 1))`` rounds, one multiplication each);
one multiplication by the labels, one for the squares; the class counts are compared with
the minimum ``m`` under MPC; long divisions give the quotients, which are rounded to the
job's precision under MPC, multiplied by the released flag ``[P >= m] [N >= m]`` and opened
together with that flag. ``P``, ``N``, the numerators and the denominators stay secret.

The reference code's no-tie AUROC (its Algorithm 5, with the off-by-one fixed:
``P N AUROC = sum_k TP_k - P (P + 1) / 2``) is available with ``noties=True``; it equals
AUROC when no two scores tie.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.protocols import (
    add_public,
    constant,
    divide,
    key_ge,
    lt,
    mul,
    mul_sf,
    trunc,
)
from fedroc.mpc.ring import U64, UArray, float_key_parts
from fedroc.mpc.runtime import Party, Program, par
from fedroc.mpc.sort import bitonic_plan, delta_sort, oblivious_sort

__all__ = [
    "DEFAULT_FRAC_BITS",
    "DEFAULT_MIN_CLASS_COUNT",
    "FULL_PRECISION",
    "AucOutputs",
    "AucSpec",
    "auc_program",
    "check_job_parameters",
    "decode_outputs",
    "owner_records",
]

FIELDS = 3  # h (top bit of the key), l (low 63 bits), label
PREC_SCALE_BITS = 62
PREC_RADIX_BITS = 4
# Opened values are rounded to 2**-DEFAULT_FRAC_BITS (about 6e-5, four decimals) unless the
# job asks for more and every owner agrees: at full precision the exact rational AUROC
# pins the class counts (scripts/mpc_precision.py measures how often).
DEFAULT_FRAC_BITS = 14
FULL_PRECISION = 52
DEFAULT_MIN_CLASS_COUNT = 5
MAX_N = (1 << 28) - 1
MAX_N_CI = 1 << 20  # the variance's integers stay below 2**62 up to here
VAR_BITS = 60  # fraction bits of the variance before rounding
SORTS = ("oblivious", "delta")


def owner_records(labels: ArrayLike, scores: ArrayLike) -> UArray:
    """A data owner's plaintext records, sorted by score descending: rows ``[h, l, label]``."""
    y = np.asarray(labels).astype(bool)
    h, low = float_key_parts(scores)
    order = np.lexsort((low, h))[::-1]
    return np.stack([h[order], low[order], y[order].astype(np.uint64)], axis=1)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_job_parameters(
    *,
    sort: Any,
    delta: Any,
    noties: Any,
    frac_bits: Any,
    min_class_count: Any,
    ci: Any,
) -> None:
    """Validate a job's parameters (types and ranges); raises :class:`InputError`."""
    if sort not in SORTS:
        raise InputError(f"sort must be 'oblivious' or 'delta'; got {sort!r}")
    if not _is_int(delta) or delta < 1 or delta % 2 == 0 or delta > MAX_N:
        raise InputError(f"delta must be a positive odd integer; got {delta!r}")
    for name, value in (("noties", noties), ("ci", ci)):
        if not isinstance(value, (bool, np.bool_)):
            raise InputError(f"{name} must be true or false; got {value!r}")
    if not _is_int(frac_bits) or not 1 <= frac_bits <= FULL_PRECISION:
        raise InputError(
            f"frac_bits (the precision of the opened values) must be an integer in "
            f"[1, {FULL_PRECISION}]; got {frac_bits!r}"
        )
    if not _is_int(min_class_count) or not 1 <= min_class_count <= MAX_N:
        raise InputError(f"min_class_count must be a positive integer; got {min_class_count!r}")
    if ci and min_class_count < 2:
        raise InputError(
            f"a confidence interval needs min_class_count >= 2 (DeLong's variance divides "
            f"by P - 1 and N - 1); got {min_class_count}"
        )


@dataclass(frozen=True)
class AucSpec:
    """Public parameters of one computation.

    Attributes
    ----------
    sizes : tuple of int
        Number of samples of each data owner (public, as in the paper).
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
    """

    sizes: tuple[int, ...]
    sort: str = "oblivious"
    delta: int = 1
    noties: bool = False
    frac_bits: int = DEFAULT_FRAC_BITS
    min_class_count: int = DEFAULT_MIN_CLASS_COUNT
    ci: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.sizes, tuple) or not self.sizes or len(self.sizes) > 1 << 16:
            raise InputError(f"sizes must be a non-empty tuple of counts; got {self.sizes!r}")
        if not all(_is_int(v) and v >= 1 for v in self.sizes):
            raise InputError(f"every data owner needs at least one sample; sizes {self.sizes}")
        check_job_parameters(
            sort=self.sort,
            delta=self.delta,
            noties=self.noties,
            frac_bits=self.frac_bits,
            min_class_count=self.min_class_count,
            ci=self.ci,
        )
        if self.n > MAX_N:
            raise InputError(f"at most {MAX_N} samples are supported; got {self.n}")
        if self.ci and self.n > MAX_N_CI:
            raise InputError(
                f"the confidence interval supports at most {MAX_N_CI} samples; got {self.n} "
                "(ask without it: ci=False)"
            )
        if self.sort == "delta" and self.delta > self.n:
            raise InputError(f"delta {self.delta} exceeds the number of samples {self.n}")

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    @property
    def prec_bits(self) -> int:
        """Fraction bits ``F`` of the precision values: the largest keeping
        ``2 P 2**F 2**b < 2**62`` (``b`` the radix bits of the division). The AUPR is then
        within about ``2**-F`` of the exact value: 40 bits (1e-12) for ``n = 10**5``, 30 bits
        (1e-9) at ``n = 2**26``."""
        return 62 - PREC_RADIX_BITS - int(2 * self.n).bit_length()

    @property
    def var_frac_bits(self) -> int:
        """Opened bits of the variance: twice the AUC's (its square root, the SE, then has
        about the AUC's absolute precision), at most 60."""
        return min(2 * self.frac_bits, VAR_BITS)

    def to_record(self) -> dict[str, Any]:
        return {
            "sizes": [int(v) for v in self.sizes],
            "sort": self.sort,
            "delta": int(self.delta),
            "noties": bool(self.noties),
            "frac_bits": int(self.frac_bits),
            "min_class_count": int(self.min_class_count),
            "ci": bool(self.ci),
        }

    to_dict = to_record

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> AucSpec:
        """Strict inverse of :meth:`to_record`: unknown or missing keys are errors."""
        expected = {"sizes", "sort", "delta", "noties", "frac_bits", "min_class_count", "ci"}
        if set(rec) != expected:
            raise InputError(
                f"a job spec has exactly the keys {sorted(expected)}; got {sorted(rec)}"
            )
        sizes = rec["sizes"]
        if not isinstance(sizes, list):
            raise InputError(f"sizes must be a list of counts; got {sizes!r}")
        return cls(
            sizes=tuple(sizes),
            sort=rec["sort"],
            delta=rec["delta"],
            noties=rec["noties"],
            frac_bits=rec["frac_bits"],
            min_class_count=rec["min_class_count"],
            ci=rec["ci"],
        )

    from_dict = from_record


def _segmented_scan(p: Party, flags: UArray, values: UArray) -> Program:
    """Inclusive scan of ``(flag, value)`` under ``(f_a, v_a) . (f_b, v_b) = (f_a or f_b,
    v_b if f_b else v_a)`` along axis 1: each entry gets the value of the last flagged entry
    at or before it. Hillis-Steele, one shared-factor multiplication per doubling."""
    length = flags.shape[1]
    dist = 1
    while dist < length:
        f_cur, f_prev = flags[:, dist:], flags[:, :-dist]
        v_cur, v_prev = values[:, dist:], values[:, :-dist]
        last = dist * 2 >= length
        cols = (
            v_cur - v_prev if last else np.concatenate([v_cur - v_prev, f_prev[..., None]], axis=2)
        )
        prod = yield from mul_sf(p, f_cur, cols, "scan")
        new_values = values.copy()
        new_values[:, dist:] = v_prev + prod[..., : values.shape[2]]
        values = new_values
        if not last:
            new_flags = flags.copy()
            new_flags[:, dist:] = f_cur + f_prev - prod[..., values.shape[2]]
            flags = new_flags
        dist *= 2
    return values


def _bits(value: int) -> int:
    return max(1, int(value).bit_length())


def _rounded_quotients(
    p: Party, groups: list[tuple[list[UArray], list[UArray], int]], spec: AucSpec
) -> Program:
    """``round(num / den * 2**frac_bits)`` for ``num <= den``: one extra quotient bit, then
    halved exactly. ``groups`` are ``(nums, dens, den_bits)``, divided side by side (each
    group at the largest radix its denominators allow)."""
    parts = yield from par(
        *[
            divide(
                p,
                np.concatenate(nums),
                np.concatenate(dens),
                den_bits=den_bits,
                int_bits=1,
                frac_bits=spec.frac_bits + 1,
                tag=f"div{i}",
            )
            for i, (nums, dens, den_bits) in enumerate(groups)
        ]
    )
    q = np.concatenate(parts)
    return (yield from trunc(p, add_public(p, q, 1), 1, signed=False, tag="div.round"))


def _variance(p: Party, spec: AucSpec, pos: UArray, u2: UArray, sa: UArray, sb: UArray) -> Program:
    """Shares of DeLong's variance of the AUROC, ``VAR_BITS`` fraction bits (see the module
    docstring); meaningless unless P >= 2 and N >= 2 (the caller masks it)."""
    n = spec.n
    nb = _bits(n)
    neg = add_public(p, U64(0) - pos, n)
    counts = np.concatenate([pos, neg])  # [P, N]
    # Centres c10 = round(U2 / P), c01 = round(U2 / N): quotients up to 2n + 1.
    twice = (np.concatenate([u2, u2]) << U64(1)) + counts
    centre, squares = yield from par(
        divide(
            p,
            twice,
            counts << U64(1),
            den_bits=nb + 1,
            int_bits=nb + 1,
            frac_bits=0,
            tag="var.centre",
        ),
        mul(p, counts, counts, "var.sq"),
    )
    # t = [P c10, N c01]; then c (2 U2 - t) and e = U2 - t, e^2; N^2 (P - 1), P^2 (N - 1).
    t = yield from mul(p, counts, centre, "var.t")
    e = np.concatenate([u2, u2]) - t
    minus_one = add_public(p, counts, (1 << 64) - 1)  # [P - 1, N - 1]
    prods = yield from mul(
        p,
        np.concatenate([centre, e, squares[::-1]]),
        np.concatenate([(np.concatenate([u2, u2]) << U64(1)) - t, e, minus_one]),
        "var.prods",
    )
    cross, e2, dens = prods[:2], prods[2:4], prods[4:6]
    # x = sum_pos (A - c10)^2 <= P N^2 + P / 4; SSA = x - e^2 / P, kept with t fraction bits
    # so that the correction's floor costs nothing measurable (SSA can be small).
    x = np.concatenate([sa, sb]) - cross
    f1 = 54 - nb
    x_bits = _bits(4 * n**3 // 27 + n)
    d_bits = _bits(16 * n**3 // 27 + 1)  # 4 N^2 (P - 1) <= 16 n^3 / 27
    t = max(0, min(f1, 61 - x_bits, 62 - d_bits, 63 - 2 * nb))
    # floor(e^2 2**t / P): e^2 <= P^2 / 4, so the quotient is below P 2**(t - 2).
    corr = yield from divide(
        p, e2 << U64(t), counts, den_bits=nb, int_bits=nb + t - 1, frac_bits=0, tag="var.corr"
    )
    ss = (x << U64(t)) - corr  # SSA 2**t, SSB 2**t (floored)
    # var10 = SSA / (4 N^2 (P - 1)) < 1/2, with F1 bits.
    var = yield from divide(
        p,
        ss,
        dens << U64(2),
        den_bits=d_bits,
        int_bits=t,
        frac_bits=f1 - t,
        tag="var.class",
    )
    # var10 / P and var01 / N with VAR_BITS bits: divide by P 2**F1 (and N 2**F1).
    terms = yield from divide(
        p,
        var,
        counts << U64(f1),
        den_bits=nb + f1,
        int_bits=0,
        frac_bits=VAR_BITS,
        tag="var.term",
    )
    return terms[:1] + terms[1:]


def auc_program(p: Party, lists: list[UArray], spec: AucSpec) -> Program:
    """Shares of the rounded, masked outputs and the released flag; see :func:`decode_outputs`.

    ``lists`` are this party's shares of the owners' records (the helper passes zeros of
    the same shapes).
    """
    if [int(a.shape[0]) for a in lists] != list(spec.sizes):
        raise ProtocolError(
            f"record lists of sizes {[a.shape[0] for a in lists]} for spec {spec.sizes}"
        )
    rec = np.concatenate(lists, axis=0).astype(np.uint64)
    if spec.sort == "oblivious":
        srt = yield from oblivious_sort(p, rec, bitonic_plan(list(spec.sizes)))
    else:
        srt = yield from delta_sort(p, rec, list(spec.sizes), spec.delta)
    n = spec.n
    F = spec.prec_bits
    h, low, lab = srt[:, 0], srt[:, 1], srt[:, 2]
    tp = np.cumsum(lab, dtype=np.uint64)
    pos = tp[-1:]  # P, shape (1,)
    j = np.arange(1, n + 1, dtype=np.uint64)
    # round(2**62 / j): TP_j * recip_j <= 2**62 + j / 2 never wraps, and rounding before
    # the truncation keeps each precision within about half a unit of 2**-F.
    recip = ((U64(1 << PREC_SCALE_BITS) + j // U64(2)) // j).astype(np.uint64)
    half = 1 << (PREC_SCALE_BITS - F - 1)

    # Round group A: neighbour comparisons (tie pattern), exact precision values, P*P and
    # whether each class reaches the minimum count.
    same, prec, pp, below = yield from par(
        key_ge(p, h[1:], low[1:], h[:-1], low[:-1], "ties"),
        trunc(p, add_public(p, tp * recip, half), PREC_SCALE_BITS - F, signed=False, tag="prec"),
        mul(p, pos, pos, "pp"),
        lt(
            p,
            np.concatenate([pos, add_public(p, U64(0) - pos, n)]),
            constant(p, spec.min_class_count, (2,)),
            "released",
        ),
    )
    # c_k = 1 - [key_{k+1} >= key_k] (sorted descending, so equality), c_n = 1.
    change = np.concatenate([add_public(p, U64(0) - same, 1), constant(p, 1, (1,))])
    index = constant(p, j, (n,))
    cols = np.stack([tp, prec, index], axis=1)
    fwd_flags = np.concatenate([constant(p, 1, (1,)), change])
    fwd_vals = np.concatenate([constant(p, np.array([0, 1 << F, 0], np.uint64), (1, 3)), cols])
    bwd_flags = np.concatenate([change[::-1], constant(p, 0, (1,))])
    bwd_vals = np.concatenate([cols[::-1], constant(p, 0, (1, 3))])
    present = add_public(p, U64(0) - below, 1)  # [P >= m], [N >= m]
    scanned, released = yield from par(
        _segmented_scan(p, np.stack([fwd_flags, bwd_flags]), np.stack([fwd_vals, bwd_vals])),
        mul(p, present[:1], present[1:], "released.both"),
    )
    beg = scanned[0, :n]
    end = scanned[1, :n][::-1]
    sums = beg + end  # columns: TP_beg + TP_end (= B), prec_beg + prec_end, j_beg + j_end
    b_k = sums[:, 0]
    # A_k = 2N - (FP_beg + FP_end) = 2 (n - P) - (j_beg + j_end) + B_k.
    a_k = add_public(p, b_k - sums[:, 2] - (pos << U64(1)), 2 * n)
    weighted = yield from mul_sf(p, lab, np.stack([b_k, sums[:, 1], a_k], axis=1), "labels")
    u2 = b_k.sum(keepdims=True) - weighted[:, 0].sum(keepdims=True)  # 2 P N AUROC
    pr_num = weighted[:, 1].sum(keepdims=True)
    # 2 P N = 2 (n P - P^2); 2 P 2**F for the fixed-point precision sum.
    roc_den = U64(2) * (U64(n) * pos - pp)
    pr_den = pos << U64(F + 1)
    roc_nums = [u2]
    if spec.noties:
        # Paper's Algorithm 5: 2 (sum_k TP_k - P (P + 1) / 2) over 2 P N.
        roc_nums.append(U64(2) * tp.sum(keepdims=True) - pp - pos)
    groups = [
        (roc_nums, [roc_den] * len(roc_nums), _bits(n * n // 2 + 1)),
        ([pr_num], [pr_den], _bits(n) + F + 1),
    ]
    quotients: Program = _rounded_quotients(p, groups, spec)
    if spec.ci:
        # Squares for the variance: A_k^2 over positives, B_k^2 over negatives.
        neg_b = b_k - weighted[:, 0]
        sq = yield from mul(
            p, np.concatenate([weighted[:, 2], neg_b]), np.concatenate([a_k, b_k]), "squares"
        )
        sa, sb = sq[:n].sum(keepdims=True), sq[n:].sum(keepdims=True)
        rounded, variance = yield from par(quotients, _variance(p, spec, pos, u2, sa, sb))
        shift = VAR_BITS - spec.var_frac_bits
        if shift:
            variance = yield from trunc(
                p, add_public(p, variance, 1 << (shift - 1)), shift, signed=False, tag="var.round"
            )
        outputs = np.concatenate([rounded, variance])
    else:
        outputs = yield from quotients
    masked = yield from mul(p, outputs, np.repeat(released, outputs.size), "mask")
    return np.concatenate([masked, released])


@dataclass(frozen=True)
class AucOutputs:
    """The opened values of one job.

    Attributes
    ----------
    released : bool
        Whether both classes reached the minimum count (checked under MPC); if not, every
        value below is NaN.
    auc, pr_auc : float
        Rounded to a multiple of ``2**-frac_bits``.
    variance : float or None
        DeLong's variance of the AUROC, rounded to ``2**-var_frac_bits`` (None without CI).
    auc_noties : float or None
        The paper's no-tie AUROC (only when asked).
    """

    released: bool
    auc: float
    pr_auc: float
    variance: float | None
    auc_noties: float | None
    frac_bits: int
    var_frac_bits: int | None
    min_class_count: int

    @property
    def se(self) -> float | None:
        if self.variance is None:
            return None
        return float(np.sqrt(self.variance)) if self.variance >= 0 else float("nan")

    def values(self) -> dict[str, float]:
        out = {"auc": self.auc, "pr_auc": self.pr_auc}
        if self.auc_noties is not None:
            out["auc_noties"] = self.auc_noties
        if self.variance is not None:
            out["auc_variance"] = self.variance
        return out


def decode_outputs(opened: NDArray[np.uint64], spec: AucSpec) -> AucOutputs:
    """Turn the opened ``[auc, (noties), pr_auc, (variance), released]`` into floats."""
    expected = 2 + int(spec.noties) + int(spec.ci) + 1
    if opened.shape != (expected,):
        raise ProtocolError(f"expected {expected} opened values, got shape {opened.shape}")
    flag = int(opened[-1])
    if flag not in (0, 1):
        raise ProtocolError(f"the released flag opened to {flag}: the shares are inconsistent")
    released = flag == 1
    nan = float("nan")

    def value(i: int, bits: int) -> float:
        return float(int(opened[i])) / float(1 << bits) if released else nan

    b = spec.frac_bits
    k = 1
    noties = None
    if spec.noties:
        noties = value(k, b)
        k += 1
    pr = value(k, b)
    variance = value(k + 1, spec.var_frac_bits) if spec.ci else None
    return AucOutputs(
        released,
        value(0, b),
        pr,
        variance,
        noties,
        b,
        spec.var_frac_bits if spec.ci else None,
        spec.min_class_count,
    )
