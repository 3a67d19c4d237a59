"""Loading a site's table: CSV or Parquet, with a column mapping."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from fedroc._files import check_data_file, reading
from fedroc._validation import check_labels, check_scores
from fedroc.exceptions import InputError

__all__ = ["Columns", "SiteData", "load_table"]


@dataclass(frozen=True)
class Columns:
    """Which columns hold the label, the score and (optionally) the cluster id.

    ``score_b`` names a second model's score of the same rows, for paired comparisons
    (``fedroc evaluate --compare-score``); ``weight`` a column of sample weights (the pooled
    reference's ``--sample-weight``).

    Attributes
    ----------
    label : str, default "label"
        Column of the binary labels.
    score : str, default "score"
        Column of the scores (higher means more likely positive).
    cluster : str, optional
        Column of cluster ids (patients with several rows), for clustered AUCs.
    score_b : str, optional
        Column of a second model's score of the same rows.
    weight : str, optional
        Column of non-negative sample weights.
    """

    label: str = "label"
    score: str = "score"
    cluster: str | None = None
    score_b: str | None = None
    weight: str | None = None


# The frame's positions (0 = the first row) as the messages of from_frame and check_scores
# name them: "first at row 3", "first non-numeric value at index 3", "row 3 has".
_POSITION = re.compile(r"(\bat (?:row|index)|\brow) (\d+)\b")


def _in_file_terms(message: str, path: Path) -> str:
    """Name a row of a file as its user finds it: the line of a CSV, the row from 1 else."""
    text = path.name.lower()
    csv = text.endswith((".csv", ".csv.gz", ".txt", ".tsv", ".tsv.gz"))

    def where(match: re.Match[str]) -> str:
        at = "at " if match.group(1).startswith("at") else ""
        k = int(match.group(2))
        return f"{at}line {k + 2}" if csv else f"{at}row {k + 1} (counting from 1)"

    return _POSITION.sub(where, message)


def load_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.csv.gz``, ``.tsv``) or Parquet (``.parquet``, ``.pq``) file."""
    p = check_data_file(path)
    name = p.name.lower()
    with reading(p, "data file", Exception):  # pandas raises many types
        if name.endswith((".parquet", ".pq")):
            return pd.read_parquet(p)
        if name.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(p)
        if name.endswith((".tsv", ".tsv.gz")):
            return pd.read_csv(p, sep="\t")
    if p.is_dir():  # not "an unknown format": name what it is
        raise InputError(f"data file {str(p)!r} is a directory; give the CSV or Parquet file")
    raise InputError(f"data file {str(p)!r} has an unknown format; use .csv, .tsv or .parquet")


def _check_distinct_columns(columns: Columns, source: str) -> None:
    """Refuse one column in two roles, naming both roles and the column.

    ``--label y --score y`` gave an AUC of 1, a cluster column of scores made every row its
    own cluster, a score compared with itself a difference of 0 in [0, 0], each with exit 0.
    """
    roles = [
        ("label", columns.label),
        ("score", columns.score),
        ("cluster", columns.cluster),
        ("second score", columns.score_b),
        ("weight", columns.weight),
    ]
    seen: dict[str, str] = {}
    for role, name in roles:
        if name is None:
            continue
        if name in seen:
            raise InputError(
                f"the {seen[name]} and {role} columns of {source} are both {name!r}: each "
                "needs a column of its own"
            )
        seen[name] = role


def _column(frame: pd.DataFrame, column: str, role: str, source: str) -> pd.Series:
    if column not in frame.columns:
        available = ", ".join(map(str, list(frame.columns)[:20]))
        hint = ""
        if len(frame.columns) == 1:  # one column whose name holds them all: another separator
            name = str(frame.columns[0])
            if "\t" in name:
                hint = " (its fields look separated by tabs: name the file .tsv)"
            elif sep := next((s for s in (";", "|") if s in name), None):
                hint = f" (its fields look separated by {sep!r}; fedroc reads CSV separated by ',')"
        near = [str(c) for c in frame.columns if str(c).strip().lower() == column.strip().lower()]
        if near and not hint:
            # ' risk' (a space after the header's comma) or 'Risk' read as just 'risk' in the
            # list of columns, which named no difference.
            hint = f" (the file has {near[0]!r}: names must match exactly, spaces and case too)"
        raise InputError(
            f"{role} column {column!r} not found in {source}; available columns: {available}{hint}"
        )
    series = frame[column]
    if series.isna().any():
        raise InputError(
            f"{role} column {column!r} in {source} has {int(series.isna().sum())} missing "
            f"value(s), first at row {int(np.flatnonzero(series.isna().to_numpy())[0])}; "
            "fedroc drops no rows: remove or impute them first"
        )
    return series


def _weights(weight: Any, n: int, source: str) -> NDArray[np.float64]:
    """Sample weights: one finite, non-negative number per row."""
    try:
        w = np.asarray(weight, dtype=np.float64).reshape(-1)
    except (ValueError, TypeError):
        raise InputError(f"weight of {source} must be numbers") from None
    if w.size != n:
        raise InputError(f"{source}: {n} labels but {w.size} weights")
    bad = ~np.isfinite(w) | (w < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"weight of {source} must be finite and non-negative; row {i} has {float(w[i])!r}"
        )
    return np.ascontiguousarray(w)


# The rows' digest (SiteData.projection_digests): chunks that stay in the cache, and the
# multipliers that fold each column into a row's hash.
_DIGEST_CHUNK = 1 << 16
_OPTIONAL_COLUMNS = ("score_b", "weight", "cluster")
_FOLD = {
    name: np.uint64(0x9E3779B97F4A7C15 + k) for k, name in enumerate(("score", *_OPTIONAL_COLUMNS))
}
_SALT = np.uint64(0xD6E8FEB86659FD93)


def _mix64(x: NDArray[np.uint64], tmp: NDArray[np.uint64]) -> None:
    """Apply splitmix64's finalizer to ``x`` in place (``tmp``: scratch of its shape)."""
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(x, np.uint64(shift), out=tmp)
        x ^= tmp
        x *= np.uint64(multiplier)
    np.right_shift(x, np.uint64(31), out=tmp)
    x ^= tmp


_INT64_LIMIT = 2.0**63


def _canonical_ids(ids: NDArray[Any]) -> NDArray[Any]:
    """Return the cluster ids with one representation per value, for the rows' digest.

    A number is one value however it was read: patient 7 is 7 in an int64 column of a CSV,
    an int32 or float column of a Parquet file, an object column of a data frame, and "7"
    or "007" in a text column (pandas' CSV reader makes "007" 7 too), so each becomes an
    int64 (a non-integral number a float64, -0.0 as 0.0). Text that is not all numbers, and
    numbers beyond int64, keep their values. A text column whose numbers would merge two
    of its ids ("7" and "007", two patients) keeps its texts: the ids' canonical form never
    joins two clusters, so any change of an id, or of the clusters, still changes it.
    """
    values = np.asarray(ids)
    kind = values.dtype.kind
    if kind in "biu":
        if kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
            return values.astype(object)  # hashed as text, as the same number read as text
        return values.astype(np.int64, copy=False)
    if kind == "f":
        numbers = values
    elif kind in "OUS":
        try:  # "007" as 7, the number pandas' CSV reader gives; "P7": kept as text
            numbers = np.asarray(pd.to_numeric(values.astype(object, copy=False)))
        except (ValueError, TypeError):
            return values
        if numbers.dtype.kind not in "iuf":
            return values
    else:  # dates, ...: pandas hashes them by value
        return values
    if numbers.dtype.kind == "f":
        integral = np.isfinite(numbers) & (np.abs(numbers) < _INT64_LIMIT)
        integral &= numbers == np.trunc(numbers)
        canonical: NDArray[Any] = (
            numbers.astype(np.int64) if integral.all() else numbers.astype(np.float64) + 0.0
        )
    elif numbers.dtype.kind == "u" and numbers.size and int(numbers.max()) > np.iinfo(np.int64).max:
        return values  # text of numbers beyond int64
    else:
        canonical = numbers.astype(np.int64, copy=False)
    if kind != "f" and pd.unique(canonical).size != pd.unique(values).size:
        return values  # two texts of one number: two ids
    return canonical


def _column_bits(name: str, values: NDArray[Any]) -> NDArray[np.uint64]:
    """64 bits per value: a float's bits (-0.0 as 0.0), or pandas' hash of a cluster id.

    The digest hashes the ids' canonical form (:func:`_canonical_ids`).
    """
    if name == "cluster":  # ids of any type
        return pd.util.hash_array(np.asarray(values)).astype(np.uint64, copy=False)
    return (values + 0.0).view(np.uint64)  # no release tells -0.0 from 0.0


@dataclass(frozen=True, repr=False)
class SiteData:
    """One site's validated rows: labels (True = positive), scores, optional cluster ids.

    ``score_b`` is an optional second model's score of the same rows (paired comparisons),
    ``weight`` optional sample weights (finite, non-negative).
    The arrays are read-only so that site functions cannot alter the table.

    Attributes
    ----------
    label : ndarray of bool, shape (n,)
        True for the positive rows.
    score : ndarray of float64, shape (n,)
        The model's scores, finite.
    cluster : ndarray of shape (n,), optional
        Cluster id of each row (rows of one patient share it).
    score_b : ndarray of float64, shape (n,), optional
        A second model's scores of the same rows.
    weight : ndarray of float64, shape (n,), optional
        Sample weights, finite and non-negative.
    """

    label: NDArray[np.bool_]
    score: NDArray[np.float64]
    cluster: NDArray[Any] | None = None
    score_b: NDArray[np.float64] | None = None
    weight: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        """Make the arrays read-only, so that no site function can alter the table."""
        for arr in (self.label, self.score, self.cluster, self.score_b, self.weight):
            if arr is not None:
                arr.setflags(write=False)

    def __repr__(self) -> str:
        """Show the row counts only: a repr never prints a site's rows."""
        return f"SiteData(n={self.n}, n_pos={self.n_pos})"

    @cached_property
    def digest(self) -> str:
        """A digest of the rows as a multiset: the same rows in any order give the same one.

        What a site binds in its ledger at its first exact release
        (:func:`fedroc.federation.site.disclosure_mod`): exact releases of two versions of
        its rows would subtract to the rows that changed. The order of the rows changes no
        release, so it does not change the digest either: a table exported again in another
        order is the same table.

        Returns
        -------
        str
            Hexadecimal, 64 characters.

        Examples
        --------
        >>> a = SiteData.from_arrays([0, 1, 1], [0.2, 0.9, 0.4])
        >>> b = SiteData.from_arrays([1, 0, 1], [0.4, 0.2, 0.9])
        >>> a.digest == b.digest
        True
        >>> a.digest == SiteData.from_arrays([0, 1, 1], [0.2, 0.9, 0.5]).digest
        False
        """
        return self.projection_digests[tuple(k for k, _ in self._optional_columns())]

    def _optional_columns(self) -> list[tuple[str, NDArray[Any]]]:
        named = (("score_b", self.score_b), ("weight", self.weight), ("cluster", self.cluster))
        return [(k, c) for k, c in named if c is not None]

    @cached_property
    def projection_digests(self) -> dict[tuple[str, ...], str]:
        """The :attr:`digest` of the labels and scores with each subset of the other columns.

        Keyed by the names of the optional columns taken (``()``: labels and scores only;
        ``("cluster",)``; ...), for every subset of those loaded: the same table read with
        and without its cluster column or second score holds the same rows, and a release
        depends only on the columns it was given (:func:`fedroc.federation.site.bind_rows`).

        Each row is folded to 64 bits (splitmix64's finalizer over its columns' bits), and
        the multiset to two sums of them mod 2^64: free of the rows' order, and changed by
        one row changed, added or withdrawn but with probability about 2^-128. One pass over
        the rows in chunks, about 0.1 s per 10^7 rows of labels and scores.
        """
        return self._digests(canonical_ids=True)

    @cached_property
    def read_ids_digests(self) -> dict[tuple[str, ...], str]:
        """The :attr:`projection_digests` of the cluster ids as they were read.

        What ledgers bound before the ids' canonical form (fedroc up to main fbbc328):
        pandas' hash of each id as read ("007" as text, an int32 as int32), so that such
        a ledger still answers the same reading
        (:func:`fedroc.federation.site.check_rows`). As strict: any change of an id changes
        it. Computed when asked only.
        """
        return self._digests(canonical_ids=False)

    def _digests(self, *, canonical_ids: bool) -> dict[tuple[str, ...], str]:
        optional = dict(self._optional_columns())
        if "cluster" in optional and canonical_ids:
            optional["cluster"] = _canonical_ids(optional["cluster"])
        loaded = [k for k in _OPTIONAL_COLUMNS if k in optional]
        subsets = [
            tuple(k for j, k in enumerate(loaded) if mask >> j & 1)
            for mask in range(2 ** len(loaded))
        ]
        sums = {names: [0, 0] for names in subsets}
        for start in range(0, self.n, _DIGEST_CHUNK):
            rows = slice(start, start + _DIGEST_CHUNK)
            base = self.label[rows].astype(np.uint64)
            tmp = np.empty_like(base)
            base *= _FOLD["score"]
            base ^= _column_bits("score", self.score[rows])
            _mix64(base, tmp)
            bits = {k: _column_bits(k, optional[k][rows]) for k in loaded}
            for names in subsets:
                h = base.copy()
                for k in names:
                    h *= _FOLD[k]
                    h ^= bits[k]
                    _mix64(h, tmp)
                salted = h ^ _SALT
                _mix64(h, tmp)
                _mix64(salted, tmp)
                sums[names][0] += int(h.sum(dtype=np.uint64))
                sums[names][1] += int(salted.sum(dtype=np.uint64))
        out = {}
        for names in subsets:
            head = hashlib.sha256(f"fedroc rows v1 {self.n} {'+'.join(names)}".encode())
            for total in sums[names]:
                head.update((total % 2**64).to_bytes(8, "little"))
            out[names] = head.hexdigest()
        return out

    @property
    def n(self) -> int:
        """Number of rows."""
        return int(self.label.size)

    @property
    def n_pos(self) -> int:
        """Number of positive rows."""
        return int(np.count_nonzero(self.label))

    @property
    def n_neg(self) -> int:
        """Number of negative rows."""
        return self.n - self.n_pos

    @classmethod
    def from_arrays(
        cls,
        label: Any,
        score: Any,
        cluster: Any = None,
        *,
        score_b: Any = None,
        weight: Any = None,
        pos_label: Any = None,
        source: str = "the data",
    ) -> SiteData:
        """Validate arrays of labels and scores into a site's rows.

        Parameters
        ----------
        label : array-like of shape (n,)
            Binary labels ({0, 1}, {-1, 1}, booleans, or two values with ``pos_label``).
        score : array-like of shape (n,)
            Finite scores, higher means more likely positive.
        cluster : array-like of shape (n,), optional
            Cluster (e.g. patient) id of each row.
        score_b : array-like of shape (n,), optional
            A second model's score of the same rows.
        weight : array-like of shape (n,), optional
            Finite, non-negative sample weights.
        pos_label : optional
            The positive class.
        source : str, default "the data"
            How error messages name the data (a file, a site).

        Returns
        -------
        SiteData

        Raises
        ------
        InputError
            On labels that are not binary, non-finite scores or weights, arrays of different
            lengths, or no rows.
        """
        names = {role: f"{role} of {source}" for role in ("label", "score", "second score")}
        return cls._validated(label, score, cluster, score_b, weight, pos_label, source, names)

    @classmethod
    def _validated(
        cls,
        label: Any,
        score: Any,
        cluster: Any,
        score_b: Any,
        weight: Any,
        pos_label: Any,
        source: str,
        names: dict[str, str],
    ) -> SiteData:
        """Validate the arrays; ``names`` says how messages name the label and scores."""
        if np.size(label) == 0:  # checked first: the label check would ask for classes
            raise InputError(f"{source} has no rows")
        y = check_labels(np.asarray(label), pos_label=pos_label, name=names["label"])
        s = check_scores(np.asarray(score), name=names["score"])
        if y.size != s.size:
            raise InputError(f"{source}: {y.size} labels but {s.size} scores")
        c = None if cluster is None else np.asarray(cluster).copy()
        b = None
        if score_b is not None:
            b = np.ascontiguousarray(check_scores(np.asarray(score_b), name=names["second score"]))
            if b.size != y.size:
                raise InputError(f"{source}: {y.size} labels but {b.size} second scores")
        w = None if weight is None else _weights(weight, y.size, source)
        return cls(np.ascontiguousarray(y), np.ascontiguousarray(s), c, b, w)

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        columns: Columns = Columns(),
        *,
        pos_label: Any = None,
        source: str = "the data frame",
    ) -> SiteData:
        """Validate the label, score and optional columns of a data frame.

        Parameters
        ----------
        frame : DataFrame
            The table.
        columns : Columns, optional
            Which columns hold what (default: ``label`` and ``score``).
        pos_label : optional
            The positive class.
        source : str, default "the data frame"
            How error messages name the data.

        Raises
        ------
        InputError
            On a missing column (the message lists the available ones), a missing value, or
            what :meth:`from_arrays` refuses.
        """
        _check_distinct_columns(columns, source)
        label = _column(frame, columns.label, "label", source).to_numpy()
        score = _column(frame, columns.score, "score", source).to_numpy()
        cluster = (
            None
            if columns.cluster is None
            else _column(frame, columns.cluster, "cluster", source).to_numpy()
        )
        score_b = (
            None
            if columns.score_b is None
            else _column(frame, columns.score_b, "second score", source).to_numpy()
        )
        weight = (
            None
            if columns.weight is None
            else _column(frame, columns.weight, "weight", source).to_numpy()
        )
        # Messages name the column as well as the file: "label column 'y' of file 'a.csv'".
        names = {
            "label": f"label column {columns.label!r} of {source}",
            "score": f"score column {columns.score!r} of {source}",
            "second score": f"second score column {columns.score_b!r} of {source}",
        }
        return cls._validated(label, score, cluster, score_b, weight, pos_label, source, names)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        columns: Columns = Columns(),
        *,
        pos_label: Any = None,
        site: str | None = None,
    ) -> SiteData:
        """Read and validate a site's CSV or Parquet file (see :func:`load_table`).

        ``site`` names the site in error messages, with the file.
        """
        source = f"file {str(path)!r}" if site is None else f"site {site!r} (file {str(path)!r})"
        try:
            frame = load_table(path)
        except InputError as exc:  # which site's file, when several are read
            if site is None:
                raise
            raise InputError(f"site {site!r}: {exc}") from None
        try:
            return cls.from_frame(frame, columns, pos_label=pos_label, source=source)
        except InputError as exc:
            raise InputError(_in_file_terms(str(exc), Path(path))) from None
