"""AUROC and AUPR on the merged secret list (ppAURORA Section 5, NOTES.md section 4).

With the pooled list sorted by score, descending, labels ``l_k``, ``TP_k = sum_{i<=k} l_i``
and change points ``c_k = [score_k != score_k+1]`` (``c_n = 1``), every tie group ends at a
change point. For each sample ``k`` let ``beg`` be the values at the last change point
before ``k`` (``TP = 0``, precision 1 before the first) and ``end`` those at the first
change point at or after ``k``. Then, exactly (ties counted one half, trapezoids only at
distinct thresholds, starting at recall 0, precision 1)::

    2 P N AUROC = sum over negatives k of (TP_end + TP_beg)
    2 P   AUPR  = sum over positives k of (prec_end + prec_beg),   prec_j = TP_j / j

which are the trapezoid formulas of NOTES.md summed per sample instead of per group (a
negative in group g sees ``TP_{g-1}`` positives above it and ``dTP_g`` tied with it; each
positive of group g carries ``(prec_g + prec_{g-1}) / P`` of ``dTP_g`` trapezoid width).

Secret steps, all vectorized: one layer of comparisons of neighbours gives ``c`` (the
helper sees only blinded private-compare vectors, so not the tie pattern); ``prec_j`` is
``TP_j * round(2**62 / j)`` rounded exactly to ``F`` bits (error about half a unit of
``2**-F``); ``beg`` and ``end`` are two segmented scans run side by side
(``ceil(log2(n + 1))`` rounds, one multiplication each); one multiplication by the labels;
then one long division of each numerator by its denominator to 52 bits. ``P``, ``N`` and
the numerators stay secret; only the quotients are opened, masked to zero (and reported as
undefined) when a class is missing. The reference code's no-tie AUROC (its Algorithm 5,
with the off-by-one fixed: ``P N AUROC = sum_k TP_k - P (P + 1) / 2``) is available with
``noties=True``; it equals AUROC when no two scores tie.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.protocols import add_public, constant, div_frac, key_ge, lt, mul, mul_sf, trunc
from fedroc.mpc.ring import U64, UArray, float_key_parts
from fedroc.mpc.runtime import Party, Program, par
from fedroc.mpc.sort import bitonic_plan, delta_sort, oblivious_sort

__all__ = ["AucSpec", "auc_program", "decode_outputs", "owner_records"]

FIELDS = 3  # h (top bit of the key), l (low 63 bits), label
PREC_SCALE_BITS = 62
RADIX_BITS = 4


def owner_records(labels: ArrayLike, scores: ArrayLike) -> UArray:
    """A data owner's plaintext records, sorted by score descending: rows ``[h, l, label]``."""
    y = np.asarray(labels).astype(bool)
    h, low = float_key_parts(scores)
    order = np.lexsort((low, h))[::-1]
    return np.stack([h[order], low[order], y[order].astype(np.uint64)], axis=1)


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
        Bits of the opened quotients (52: the float64 mantissa).
    """

    sizes: tuple[int, ...]
    sort: str = "oblivious"
    delta: int = 1
    noties: bool = False
    frac_bits: int = 52
    extra: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sort not in ("oblivious", "delta"):
            raise InputError(f"sort must be 'oblivious' or 'delta'; got {self.sort!r}")
        if self.sort == "delta" and (self.delta < 1 or self.delta % 2 == 0):
            raise InputError(f"delta must be a positive odd integer; got {self.delta!r}")
        if not self.sizes or min(self.sizes) < 1:
            raise InputError(f"every data owner needs at least one sample; sizes {self.sizes}")
        if self.n >= 1 << 28:
            raise InputError(f"at most 2**28 samples are supported; got {self.n}")

    @property
    def n(self) -> int:
        return int(sum(self.sizes))

    @property
    def prec_bits(self) -> int:
        """Fraction bits ``F`` of the precision values: the largest keeping
        ``2 P 2**F 2**b < 2**62`` (``b`` the radix bits of the division). The AUPR is then
        within about ``2**-F`` of the exact value: 40 bits (1e-12) for ``n = 10**5``, 30 bits
        (1e-9) at ``n = 2**26``."""
        return 62 - RADIX_BITS - int(2 * self.n).bit_length()

    def to_dict(self) -> dict[str, object]:
        return {
            "sizes": list(self.sizes),
            "sort": self.sort,
            "delta": self.delta,
            "noties": self.noties,
            "frac_bits": self.frac_bits,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> AucSpec:
        return cls(
            sizes=tuple(int(v) for v in d["sizes"]),  # type: ignore[attr-defined]
            sort=str(d.get("sort", "oblivious")),
            delta=int(d.get("delta", 1)),  # type: ignore[call-overload]
            noties=bool(d.get("noties", False)),
            frac_bits=int(d.get("frac_bits", 52)),  # type: ignore[call-overload]
        )


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


def auc_program(p: Party, lists: list[UArray], spec: AucSpec) -> Program:
    """Shares of the masked quotients; see :func:`decode_outputs`.

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
    # whether each class is present.
    same, prec, pp, missing = yield from par(
        key_ge(p, h[1:], low[1:], h[:-1], low[:-1], "ties"),
        trunc(p, add_public(p, tp * recip, half), PREC_SCALE_BITS - F, signed=False, tag="prec"),
        mul(p, pos, pos, "pp"),
        lt(
            p,
            np.concatenate([pos, add_public(p, U64(0) - pos, n)]),
            constant(p, 1, (2,)),
            "defined",
        ),
    )
    # c_k = 1 - [key_{k+1} >= key_k] (sorted descending, so equality), c_n = 1.
    change = np.concatenate([add_public(p, U64(0) - same, 1), constant(p, 1, (1,))])
    fwd_flags = np.concatenate([constant(p, 1, (1,)), change])
    fwd_vals = np.concatenate(
        [
            np.stack([constant(p, 0, (1,)), constant(p, 1 << F, (1,))], axis=1),
            np.stack([tp, prec], axis=1),
        ]
    )
    bwd_flags = np.concatenate([change[::-1], constant(p, 0, (1,))])
    bwd_vals = np.concatenate([np.stack([tp, prec], axis=1)[::-1], constant(p, 0, (1, 2))])
    present = add_public(p, U64(0) - missing, 1)  # [P >= 1], [N >= 1]
    scanned, both = yield from par(
        _segmented_scan(p, np.stack([fwd_flags, bwd_flags]), np.stack([fwd_vals, bwd_vals])),
        mul(p, present[:1], present[1:], "defined.both"),
    )
    beg = scanned[0, :n]
    end = scanned[1, :n][::-1]
    sums = beg + end  # columns: TP_beg + TP_end, prec_beg + prec_end
    weighted = yield from mul_sf(p, lab, sums, "labels")
    roc_num = sums[:, 0].sum(keepdims=True) - weighted[:, 0].sum(keepdims=True)
    pr_num = weighted[:, 1].sum(keepdims=True)
    # 2 P N = 2 (n P - P^2); 2 P 2**F for the fixed-point precision sum.
    roc_den = U64(2) * (U64(n) * pos - pp)
    pr_den = pos << U64(F + 1)
    nums = [roc_num, pr_num]
    dens = [roc_den, pr_den]
    defined = [both, present[:1]]
    if spec.noties:
        # Paper's Algorithm 5: 2 (sum_k TP_k - P (P + 1) / 2) over 2 P N.
        nums.append(U64(2) * tp.sum(keepdims=True) - pp - pos)
        dens.append(roc_den)
        defined.append(both)
    quotients = yield from div_frac(
        p, np.concatenate(nums), np.concatenate(dens), spec.frac_bits, radix_bits=RADIX_BITS
    )
    flags = np.concatenate(defined)
    masked = yield from mul(p, quotients, flags, "mask")
    return np.concatenate([masked, flags])


OUTPUT_NAMES = ("auc", "pr_auc", "auc_noties")


def decode_outputs(opened: NDArray[np.uint64], spec: AucSpec) -> dict[str, float]:
    """Turn the opened ``[quotients..., defined flags...]`` into floats (NaN if undefined)."""
    k = opened.size // 2
    out: dict[str, float] = {}
    for name, q, flag in zip(OUTPUT_NAMES[:k], opened[:k], opened[k:], strict=True):
        out[name] = float(int(q)) / float(1 << spec.frac_bits) if int(flag) == 1 else float("nan")
    return out
