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
job's precision under MPC, multiplied by the released flag ``[P >= m] [N >= m]`` (the
partial AUC by that flag times ``[max_fpr N >= m]``: a region of fewer negatives opens
``t / P``) and opened together with the flags. ``P``, ``N``, the numerators and the
denominators stay secret.

The reference code's no-tie AUROC (its Algorithm 5, with the off-by-one fixed:
``P N AUROC = sum_k TP_k - P (P + 1) / 2``) is available with ``noties=True``; it equals
AUROC when no two scores tie.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc._docs import fill_doc
from fedroc.exceptions import InputError, ProtocolError
from fedroc.mpc.asks import Asks, asks_program, key_to_float
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
    "JOB_PARAMETERS",
    "AucOutputs",
    "AucSpec",
    "JobParameters",
    "auc_program",
    "check_job_parameters",
    "decode_outputs",
    "job_parameters",
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


def owner_records(
    labels: ArrayLike, scores: ArrayLike, scores_b: ArrayLike | None = None
) -> UArray:
    """Encode a data owner's plaintext records, sorted by score descending.

    Rows ``[h, l, label]``, or ``[h, l, label, h_b, l_b]`` with a second model's scores (to compare
    two models).

    Parameters
    ----------
    labels : array-like of shape (n,)
        The owner's labels (truthy for positive).
    scores : array-like of float, shape (n,)
        The model's scores of those rows.
    scores_b : array-like of float, shape (n,), optional
        A second model's scores of the same rows.

    Returns
    -------
    ndarray of uint64, shape (n, 3) or (n, 5)
        The records (each score as two key words ``h, l``), by score descending.

    Raises
    ------
    InputError
        ``scores_b`` of another length.
    """
    y = np.asarray(labels).astype(bool)
    h, low = float_key_parts(scores)
    order = np.lexsort((low, h))[::-1]
    columns = [h[order], low[order], y[order].astype(np.uint64)]
    if scores_b is not None:
        hb, lb = float_key_parts(scores_b)
        if hb.shape != h.shape:
            raise InputError(
                f"the second model's scores have {hb.size} values; the labels {y.size}"
            )
        columns += [hb[order], lb[order]]
    return np.stack(columns, axis=1)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@fill_doc
@dataclass(frozen=True, kw_only=True)
class JobParameters:
    """What a job computes and how much it opens: the parameters its owners agree to.

    :class:`AucSpec` (the computation) and :class:`~fedroc.mpc.owner.JobTerms` (what each
    owner signs) carry them, both checked by :func:`check_job_parameters`; they are given by
    keyword.

    Attributes
    ----------
    {mpc_job_parameters}
    """

    sort: str = "oblivious"
    delta: int = 1
    noties: bool = False
    frac_bits: int = DEFAULT_FRAC_BITS
    min_class_count: int = DEFAULT_MIN_CLASS_COUNT
    ci: bool = True
    compare: bool = False
    asks: str = ""


#: The names of the :class:`JobParameters`, in their order.
JOB_PARAMETERS = tuple(f.name for f in fields(JobParameters))


def job_parameters(obj: Any) -> dict[str, Any]:
    """Return the :data:`JOB_PARAMETERS` of a spec or terms object, by name."""
    return {name: getattr(obj, name) for name in JOB_PARAMETERS}


def check_job_parameters(
    *,
    sort: Any,
    delta: Any,
    noties: Any,
    frac_bits: Any,
    min_class_count: Any,
    ci: Any,
    compare: Any = False,
    asks: Any = "",
) -> None:
    """Validate a job's parameters (types and ranges); raises :class:`InputError`."""
    if sort not in SORTS:
        raise InputError(f"sort must be 'oblivious' or 'delta'; got {sort!r}")
    if not _is_int(delta) or delta < 1 or delta % 2 == 0 or delta > MAX_N:
        raise InputError(f"delta must be a positive odd integer; got {delta!r}")
    for name, value in (("noties", noties), ("ci", ci), ("compare", compare)):
        if not isinstance(value, (bool, np.bool_)):
            raise InputError(f"{name} must be true or false; got {value!r}")
    if not _is_int(frac_bits) or not 1 <= frac_bits <= FULL_PRECISION:
        raise InputError(
            f"frac_bits (the precision of the opened values) must be an integer in "
            f"[1, {FULL_PRECISION}]; got {frac_bits!r}"
        )
    if not _is_int(min_class_count) or not 1 <= min_class_count <= MAX_N:
        raise InputError(f"min_class_count must be a positive integer; got {min_class_count!r}")
    Asks.parse(asks)
    if compare and not ci:
        raise InputError("comparing two models needs the variances: compare requires ci")
    if ci and min_class_count < 2:
        raise InputError(
            f"a confidence interval needs min_class_count >= 2 (DeLong's variance divides "
            f"by P - 1 and N - 1); got {min_class_count}"
        )


@fill_doc
@dataclass(frozen=True)
class AucSpec(JobParameters):
    """Public parameters of one computation: the owners' sizes and the :class:`JobParameters`.

    Attributes
    ----------
    sizes : tuple of int
        Number of samples of each data owner (public, as in the paper).
    {mpc_job_parameters}
    """

    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        """Check the sizes and the job parameters against the limits of the protocol.

        Raises
        ------
        InputError
            On an empty or non-positive ``sizes``, more than :data:`MAX_N` rows (or
            :data:`MAX_N_CI` with ``ci``), a partial AUC that does not fit, a ``delta`` above the
            number of rows, or a parameter :func:`check_job_parameters` refuses.
        """
        if not isinstance(self.sizes, tuple) or not self.sizes or len(self.sizes) > 1 << 16:
            raise InputError(f"sizes must be a non-empty tuple of counts; got {self.sizes!r}")
        if not all(_is_int(v) and v >= 1 for v in self.sizes):
            raise InputError(f"every data owner needs at least one sample; sizes {self.sizes}")
        check_job_parameters(**job_parameters(self))
        if self.n > MAX_N:
            raise InputError(f"at most {MAX_N} samples are supported; got {self.n}")
        if self.ci and self.n > MAX_N_CI:
            raise InputError(
                f"the confidence interval supports at most {MAX_N_CI} samples; got {self.n} "
                "(ask without it: ci=False)"
            )
        Asks.parse(self.asks).check_size(self.n)
        if self.sort == "delta" and self.delta > self.n:
            raise InputError(f"delta {self.delta} exceeds the number of samples {self.n}")

    @property
    def n(self) -> int:
        """Total number of rows over the owners."""
        return int(sum(self.sizes))

    @property
    def model_quotients(self) -> int:
        """Opened quotients before the asks': AUROC, (no-tie AUROC), AUPR, (second model's)."""
        return 2 + int(self.noties) + 2 * int(self.compare)

    @property
    def fields(self) -> int:
        """Columns of a record: key (2), label, and the second model's key (2)."""
        return FIELDS + 2 if self.compare else FIELDS

    @property
    def prec_bits(self) -> int:
        """Fraction bits of the precision values.

        Fraction bits ``F`` of the precision values: the largest keeping ``2 P 2**F 2**b < 2**62``
        (``b`` the radix bits of the division). The AUPR is then within about ``2**-F`` of the exact
        value: 40 bits (1e-12) for ``n = 10**5``, 30 bits (1e-9) at ``n = 2**26``.
        """
        return 62 - PREC_RADIX_BITS - int(2 * self.n).bit_length()

    @property
    def var_frac_bits(self) -> int:
        """Opened bits of the variance.

        Twice the AUC's (its square root, the SE, then has about the AUC's absolute precision), at
        most 60.
        """
        return min(2 * self.frac_bits, VAR_BITS)

    def to_record(self) -> dict[str, Any]:
        """Return the spec as a record (JSON-ready); :meth:`from_record` inverts it."""
        return {
            "sizes": [int(v) for v in self.sizes],
            "sort": self.sort,
            "delta": int(self.delta),
            "noties": bool(self.noties),
            "frac_bits": int(self.frac_bits),
            "min_class_count": int(self.min_class_count),
            "ci": bool(self.ci),
            "compare": bool(self.compare),
            "asks": self.asks,
        }

    to_dict = to_record

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> AucSpec:
        """Strict inverse of :meth:`to_record`: unknown or missing keys are errors."""
        expected = {"sizes", *JOB_PARAMETERS}
        if set(rec) != expected:
            raise InputError(
                f"a job spec has exactly the keys {sorted(expected)}; got {sorted(rec)}"
            )
        sizes = rec["sizes"]
        if not isinstance(sizes, list):
            raise InputError(f"sizes must be a list of counts; got {sizes!r}")
        return cls(sizes=tuple(sizes), **{name: rec[name] for name in JOB_PARAMETERS})

    from_dict = from_record


def _segmented_scan(p: Party, flags: UArray, values: UArray) -> Program:
    """Segmented inclusive scan: the value of the last flagged entry.

    Inclusive scan of ``(flag, value)`` under ``(f_a, v_a) . (f_b, v_b) = (f_a or f_b, v_b if f_b
    else v_a)`` along axis 1: each entry gets the value of the last flagged entry at or before it.
    Hillis-Steele, one shared-factor multiplication per doubling.
    """
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
    """Secure fixed-point division of shared values.

    ``round(num / den * 2**frac_bits)`` for ``num <= den``: one extra quotient bit, then halved
    exactly. ``groups`` are ``(nums, dens, den_bits)``, divided side by side (each group at the
    largest radix its denominators allow).
    """
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


def _variances(
    p: Party,
    spec: AucSpec,
    pos: UArray,
    u_pos: UArray,
    u_neg: UArray,
    s_pos: UArray,
    s_neg: UArray,
    spread: int,
) -> Program:
    """DeLong's variance for several lanes at once, ``VAR_BITS`` fraction bits.

    Lane ``l`` has placement sums ``u_pos[l] = sum_pos A``, ``s_pos[l] = sum_pos A^2`` over
    the positives (values in a range of width ``2 N spread``) and ``u_neg``, ``s_neg`` over
    the negatives (width ``2 P spread``); its variance is ``var(A / 2N) / P + var(B / 2P) / N``
    with sample variances (see the module docstring). ``spread`` is 1 for one model's
    placement values and 2 for the differences of two models' (shifted to be positive).
    Meaningless unless P >= 2 and N >= 2 (the caller masks it).
    """
    n = spec.n
    nb = _bits(n)
    lanes = u_pos.size
    neg = add_public(p, U64(0) - pos, n)
    counts = np.concatenate([np.repeat(pos, lanes), np.repeat(neg, lanes)])  # [P.., N..]
    u = np.concatenate([u_pos, u_neg])
    s = np.concatenate([s_pos, s_neg])
    # Centres c = round(u / P) (round(u / N) for the negatives).
    centre, squares = yield from par(
        divide(
            p,
            (u << U64(1)) + counts,
            counts << U64(1),
            den_bits=nb + 1,
            int_bits=_bits(2 * spread * n + 1),
            frac_bits=0,
            tag="var.centre",
        ),
        mul(p, counts, counts, "var.sq"),
    )
    # x = sum (A - c)^2 = s - c (2 u - P c); e = u - P c, |e| <= P / 2; the denominators
    # N^2 (P - 1) for the positives' lanes and P^2 (N - 1) for the negatives'.
    pc = yield from mul(p, counts, centre, "var.t")
    e = u - pc
    minus_one = add_public(p, counts, (1 << 64) - 1)
    other = np.concatenate([squares[lanes:], squares[:lanes]])
    prods = yield from mul(
        p,
        np.concatenate([centre, e, other]),
        np.concatenate([(u << U64(1)) - pc, e, minus_one]),
        "var.prods",
    )
    width = 2 * lanes
    cross, e2, dens = prods[:width], prods[width : 2 * width], prods[2 * width :]
    x = s - cross  # <= spread^2 P N^2 + P / 4: SS + e^2 / P
    # SS = x - e^2 / P, kept with tb fraction bits so that the floor of the correction
    # costs nothing measurable (SS can be small).
    extra = 0 if spread == 1 else 2  # var < 2**extra
    f1 = 54 - nb
    x_bits = _bits(spread * spread * 4 * n**3 // 27 + n)
    d_bits = _bits(16 * n**3 // 27 + 1)  # 4 N^2 (P - 1) <= 16 n^3 / 27
    tb = max(0, min(f1, 61 - x_bits, 62 - d_bits - extra, 63 - 2 * nb))
    # floor(e^2 2**tb / P): e^2 <= P^2 / 4, so the quotient is below P 2**(tb - 2).
    corr = yield from divide(
        p, e2 << U64(tb), counts, den_bits=nb, int_bits=nb + tb - 1, frac_bits=0, tag="var.corr"
    )
    ss = (x << U64(tb)) - corr
    # var = SS / (4 N^2 (P - 1)) with F1 bits (var10 per lane; var01 likewise).
    var = yield from divide(
        p,
        ss,
        dens << U64(2),
        den_bits=d_bits,
        int_bits=tb + extra,
        frac_bits=f1 - tb,
        tag="var.class",
    )
    # var10 / P and var01 / N with VAR_BITS bits: divide by P 2**F1 (and N 2**F1).
    terms = yield from divide(
        p,
        var,
        counts << U64(f1),
        den_bits=nb + f1,
        int_bits=extra,
        frac_bits=VAR_BITS,
        tag="var.term",
    )
    return terms[:lanes] + terms[lanes:]


@dataclass(frozen=True)
class _Model:
    """One model's placement sums on its sorted list (shares)."""

    tp: UArray
    a_k: UArray  # 2 #negatives below + #tied (meaningful at the positives)
    b_k: UArray  # 2 #positives above + #tied (meaningful at the negatives)
    weighted: UArray  # labels times [B, precision sum, A, carried columns...]
    u2: UArray  # 2 P N AUROC
    pr_num: UArray  # 2 P 2**F AUPR
    beg: UArray  # [TP, precision, j] at the cut before each row's tie group
    end: UArray  # the same at the end of each row's tie group (the row's cut)


def _rank(
    p: Party,
    srt: UArray,
    spec: AucSpec,
    pos: UArray,
    first: Program | None = None,
    carry: UArray | None = None,
) -> Program:
    """Tie pattern, precisions and segmented scans of one sorted list.

    Tie pattern, precisions and the two segmented scans of one sorted list (key in columns 0-1,
    label in 2); ``first`` runs side by side with the first round group and its value is returned
    too; ``carry`` columns are multiplied by the labels with the rest.
    """
    n = spec.n
    F = spec.prec_bits
    h, low, lab = srt[:, 0], srt[:, 1], srt[:, 2]
    tp = np.cumsum(lab, dtype=np.uint64)
    j = np.arange(1, n + 1, dtype=np.uint64)
    # round(2**62 / j): TP_j * recip_j <= 2**62 + j / 2 never wraps, and rounding before
    # the truncation keeps each precision within about half a unit of 2**-F.
    recip = ((U64(1 << PREC_SCALE_BITS) + j // U64(2)) // j).astype(np.uint64)
    half = 1 << (PREC_SCALE_BITS - F - 1)
    group: list[Program] = [
        key_ge(p, h[1:], low[1:], h[:-1], low[:-1], "ties"),
        trunc(p, add_public(p, tp * recip, half), PREC_SCALE_BITS - F, signed=False, tag="prec"),
    ]
    if first is not None:
        group.append(first)
    done = yield from par(*group)
    same, prec = done[0], done[1]
    # c_k = 1 - [key_{k+1} >= key_k] (sorted descending, so equality), c_n = 1.
    change = np.concatenate([add_public(p, U64(0) - same, 1), constant(p, 1, (1,))])
    index = constant(p, j, (n,))
    cols = np.stack([tp, prec, index], axis=1)
    fwd_flags = np.concatenate([constant(p, 1, (1,)), change])
    fwd_vals = np.concatenate([constant(p, np.array([0, 1 << F, 0], np.uint64), (1, 3)), cols])
    bwd_flags = np.concatenate([change[::-1], constant(p, 0, (1,))])
    bwd_vals = np.concatenate([cols[::-1], constant(p, 0, (1, 3))])
    scanned = yield from _segmented_scan(
        p, np.stack([fwd_flags, bwd_flags]), np.stack([fwd_vals, bwd_vals])
    )
    beg = scanned[0, :n]
    end = scanned[1, :n][::-1]
    sums = beg + end  # columns: TP_beg + TP_end (= B), prec_beg + prec_end, j_beg + j_end
    b_k = sums[:, 0]
    # A_k = 2N - (FP_beg + FP_end) = 2 (n - P) - (j_beg + j_end) + B_k.
    a_k = add_public(p, b_k - sums[:, 2] - (pos << U64(1)), 2 * n)
    columns = [b_k, sums[:, 1], a_k]
    if carry is not None:
        columns += list(carry.T)
    weighted = yield from mul_sf(p, lab, np.stack(columns, axis=1), "labels")
    u2 = b_k.sum(keepdims=True) - weighted[:, 0].sum(keepdims=True)
    model = _Model(tp, a_k, b_k, weighted, u2, weighted[:, 1].sum(keepdims=True), beg, end)
    return model, (done[2] if first is not None else None)


def auc_program(p: Party, lists: list[UArray], spec: AucSpec) -> Program:
    """Shares of the rounded, masked outputs and the released flag; see :func:`decode_outputs`.

    ``lists`` are this party's shares of the owners' records (the helper passes zeros of
    the same shapes): rows ``[h, l, label]``, or ``[h, l, label, h_b, l_b]`` with a second
    model's score key (``spec.compare``), sorted by the first key.
    """
    if [int(a.shape[0]) for a in lists] != list(spec.sizes):
        raise ProtocolError(
            f"record lists of sizes {[a.shape[0] for a in lists]} for spec {spec.sizes}"
        )
    rec = np.concatenate(lists, axis=0).astype(np.uint64)
    if rec.shape[1] != spec.fields:
        raise ProtocolError(f"records have {rec.shape[1]} fields; the spec needs {spec.fields}")
    if spec.sort == "oblivious":
        srt = yield from oblivious_sort(p, rec, bitonic_plan(list(spec.sizes)))
    else:
        srt = yield from delta_sort(p, rec, list(spec.sizes), spec.delta)
    n = spec.n
    F = spec.prec_bits
    pos = np.cumsum(srt[:, 2], dtype=np.uint64)[-1:]  # P, shape (1,)

    asks = Asks.parse(spec.asks)
    m = spec.min_class_count
    neg_count = add_public(p, U64(0) - pos, n)  # N
    counts, floors = [pos, neg_count], [m, m]
    if asks.max_fpr is not None:
        # The partial area must span m negatives too (its own flag): below 1 / N it is
        # f t / P, and the opened t / P (t positives above every negative) narrows P (R23).
        fpr_k, fpr_d = asks.fraction()
        counts.append(neg_count * U64(fpr_k))
        floors.append(m * fpr_d)

    def class_counts() -> Program:
        # P*P and whether each class reaches the minimum count (and, with a partial AUC,
        # whether max_fpr N >= m), then all of them.
        pp, below = yield from par(
            mul(p, pos, pos, "pp"),
            lt(
                p,
                np.concatenate(counts),
                constant(p, np.array(floors, dtype=np.uint64), (len(floors),)),
                "released",
            ),
        )
        present = add_public(p, U64(0) - below, 1)  # [P >= m], [N >= m] (, [k N >= m d])
        both = yield from mul(p, present[:1], present[1:2], "released.both")
        spans = None  # the partial AUC's flag: the class counts' and [max_fpr N >= m]
        if len(floors) == 3:
            spans = yield from mul(p, both, present[2:], "released.pauc")
        return pp, (both, spans)

    model, (pp, (released, pauc_released)) = yield from _rank(
        p, srt, spec, pos, first=class_counts()
    )
    # 2 P N = 2 (n P - P^2); 2 P 2**F for the fixed-point precision sum.
    roc_den = U64(2) * (U64(n) * pos - pp)
    pr_den = pos << U64(F + 1)
    roc_nums = [model.u2]
    if spec.noties:
        # Paper's Algorithm 5: 2 (sum_k TP_k - P (P + 1) / 2) over 2 P N.
        roc_nums.append(U64(2) * model.tp.sum(keepdims=True) - pp - pos)
    roc_bits, pr_bits = _bits(n * n // 2 + 1), _bits(n) + F + 1
    groups = [(roc_nums, [roc_den] * len(roc_nums), roc_bits), ([model.pr_num], [pr_den], pr_bits)]
    lab_a, lab_b = model.weighted[:, 2], model.weighted[:, 0]
    if spec.compare:
        # The second model: a full oblivious sort of the records by its key, carrying the
        # first model's placement sums, so that both models' values meet row by row.
        rec_b = np.stack([srt[:, 3], srt[:, 4], srt[:, 2], model.a_k, model.b_k], axis=1)
        srt_b = yield from oblivious_sort(p, rec_b, bitonic_plan([1] * n))
        second, _ = yield from _rank(p, srt_b, spec, pos, carry=srt_b[:, 3:5])
        groups += [([second.u2], [roc_den], roc_bits), ([second.pr_num], [pr_den], pr_bits)]
    raw: list[UArray] = []
    if asks:
        neg_b = model.b_k - model.weighted[:, 0]
        more, raw = yield from asks_program(p, asks, srt, model.beg, model.end, neg_b, pos, pp)
        groups += more
    quotients: Program = _rounded_quotients(p, groups, spec)
    if spec.ci:
        # Squares: A^2 over the positives, B^2 over the negatives, for each lane.
        left = [lab_a, model.b_k - lab_b]
        right = [model.a_k, model.b_k]
        if spec.compare:
            w = second.weighted  # labels times [B_b, prec, A_b, A_a, B_a] on the b-order
            shift = U64(2 * n)  # A_a - A_b + 2n >= 0: the variance does not see the shift
            d = add_public(p, srt_b[:, 3] - second.a_k, 2 * n)
            e = add_public(p, srt_b[:, 4] - second.b_k, 2 * n)
            lab_d = w[:, 3] - w[:, 2] + srt_b[:, 2] * shift
            neg_e = e - (w[:, 4] - w[:, 0] + srt_b[:, 2] * shift)
            left += [w[:, 2], second.b_k - w[:, 0], lab_d, neg_e]
            right += [second.a_k, second.b_k, d, e]
        sq = yield from mul(p, np.concatenate(left), np.concatenate(right), "squares")
        sums = sq.reshape(len(left), n).sum(axis=1)
        u_pos, u_neg = [model.u2], [model.u2]
        s_pos, s_neg = [sums[0:1]], [sums[1:2]]
        if spec.compare:
            u_pos += [second.u2, lab_d.sum(keepdims=True)]
            u_neg += [second.u2, neg_e.sum(keepdims=True)]
            s_pos += [sums[2:3], sums[4:5]]
            s_neg += [sums[3:4], sums[5:6]]
        rounded, variance = yield from par(
            quotients,
            _variances(
                p,
                spec,
                pos,
                np.concatenate(u_pos),
                np.concatenate(u_neg),
                np.concatenate(s_pos),
                np.concatenate(s_neg),
                2 if spec.compare else 1,
            ),
        )
        drop = VAR_BITS - spec.var_frac_bits
        if drop:
            variance = yield from trunc(
                p, add_public(p, variance, 1 << (drop - 1)), drop, signed=False, tag="var.round"
            )
        outputs = np.concatenate([rounded, variance, *raw])
    else:
        outputs = np.concatenate([(yield from quotients), *raw])
    mask = np.repeat(released, outputs.size)
    flags = [released]
    if pauc_released is not None:
        # The partial AUC (the first quotient after the AUROCs and AUPRs) has its own flag:
        # a region of fewer than m negatives withholds it alone, the AUROC still opens.
        mask[spec.model_quotients] = pauc_released[0]
        flags.append(pauc_released)
    masked = yield from mul(p, outputs, mask, "mask")
    return np.concatenate([masked, *flags])


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
    auc_b, pr_auc_b, variance_b : float or None
        The second model's values (only when comparing two models).
    variance_difference : float or None
        DeLong's variance of ``auc - auc_b`` (paired: both models on the same rows).
    partial_auc : float or None
        McClish-standardised partial AUC up to ``max_fpr`` (only when asked).
    max_fpr : float or None
        The job's ``max_fpr``.
    operating_points : tuple of dict
        Per asked point: ``criterion``, ``threshold`` (a score value, ``inf`` when the cut
        predicts nothing positive), ``sensitivity``, ``specificity``, ``ppv``, ``npv``
        (NaN where undefined or withheld).
    frac_bits : int
        The job's precision of the opened values.
    var_frac_bits : int or None
        The variances' precision (None without CI).
    min_class_count : int
        The job's minimum class count.
    """

    released: bool
    auc: float
    pr_auc: float
    variance: float | None
    auc_noties: float | None
    frac_bits: int
    var_frac_bits: int | None
    min_class_count: int
    auc_b: float | None = None
    pr_auc_b: float | None = None
    variance_b: float | None = None
    variance_difference: float | None = None
    partial_auc: float | None = None
    max_fpr: float | None = None
    operating_points: tuple[dict[str, Any], ...] = ()

    @staticmethod
    def _sqrt(value: float | None) -> float | None:
        if value is None:
            return None
        return float(np.sqrt(value)) if value >= 0 else float("nan")

    @property
    def se(self) -> float | None:
        """Standard error of the AUROC (None without CI; NaN for a negative variance)."""
        return self._sqrt(self.variance)

    @property
    def se_b(self) -> float | None:
        """Standard error of the second model's AUROC (None unless comparing with CI)."""
        return self._sqrt(self.variance_b)

    @property
    def se_difference(self) -> float | None:
        """Standard error of ``auc - auc_b`` (None unless comparing with CI)."""
        return self._sqrt(self.variance_difference)

    def values(self) -> dict[str, float]:
        """Return the opened values by name; those not asked are left out."""
        out = {"auc": self.auc, "pr_auc": self.pr_auc}
        optional = {
            "auc_noties": self.auc_noties,
            "auc_variance": self.variance,
            "auc_b": self.auc_b,
            "pr_auc_b": self.pr_auc_b,
            "auc_variance_b": self.variance_b,
            "auc_difference_variance": self.variance_difference,
            "partial_auc": self.partial_auc,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def decode_outputs(opened: NDArray[np.uint64], spec: AucSpec) -> AucOutputs:
    """Turn the opened outputs into floats.

    Turn the opened ``[auc, (noties), pr_auc, (auc_b, pr_auc_b), (variances...), released,
    (partial AUC released)]`` into floats.
    """
    asks = Asks.parse(spec.asks)
    asked = int(asks.max_fpr is not None) + 4 * asks.n_points
    quotients = spec.model_quotients + asked
    variances = (3 if spec.compare else 1) if spec.ci else 0
    n_flags = 1 + int(asks.max_fpr is not None)
    expected = quotients + variances + 4 * asks.n_points + n_flags
    if opened.shape != (expected,):
        raise ProtocolError(f"expected {expected} opened values, got shape {opened.shape}")
    flags = [int(v) for v in opened[expected - n_flags :]]
    if any(f not in (0, 1) for f in flags):
        raise ProtocolError(f"the released flags opened to {flags}: the shares are inconsistent")
    released = flags[0] == 1
    pauc_released = flags[-1] == 1
    nan = float("nan")

    def value(i: int, bits: int, flag: bool | None = None) -> float:
        shown = released if flag is None else flag
        return float(int(opened[i])) / float(1 << bits) if shown else nan

    b = spec.frac_bits
    vb = spec.var_frac_bits
    k = 1
    noties = None
    if spec.noties:
        noties = value(k, b)
        k += 1
    pr = value(k, b)
    k += 1
    auc_b = pr_b = var_b = var_d = None
    if spec.compare:
        auc_b, pr_b = value(k, b), value(k + 1, b)
        k += 2
    variance = None
    if spec.ci:
        variance = value(k, vb)
        if spec.compare:
            var_b, var_d = value(k + 1, vb), value(k + 2, vb)
    partial_auc = None
    at = spec.model_quotients
    if asks.max_fpr is not None:
        partial_auc = value(at, b, pauc_released)
        at += 1
    raw = quotients + variances
    points = []
    for i, criterion in enumerate(asks.criteria()):
        h, low, nothing, everything = (int(v) for v in opened[raw + 4 * i : raw + 4 * i + 4])
        sens, spec_, ppv, npv = (value(at + 4 * i + j, b) for j in range(4))
        if nothing:
            threshold, ppv = float("inf"), nan
        else:
            threshold = key_to_float(h, low) if released else nan
        points.append(
            {
                "criterion": criterion,
                "threshold": threshold,
                "sensitivity": sens,
                "specificity": spec_,
                "ppv": ppv,
                "npv": nan if everything else npv,
            }
        )
    return AucOutputs(
        released,
        value(0, b),
        pr,
        variance,
        noties,
        b,
        vb if spec.ci else None,
        spec.min_class_count,
        auc_b,
        pr_b,
        var_b,
        var_d,
        partial_auc,
        None if asks.max_fpr is None else asks.max_fpr / 1e6,
        tuple(points),
    )
