"""Input checks shared by every entry point.

Messages name the parameter and repeat the bad value, as scikit-learn's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedroc.exceptions import InputError

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def _preview(values: Sequence[Any] | NDArray[Any], limit: int = 5) -> str:
    items = list(values[:limit])
    more = ", ..." if len(values) > limit else ""
    return "[" + ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in items) + more + "]"


def as_1d(values: ArrayLike, name: str) -> NDArray[Any]:
    arr = np.asarray(values)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise InputError(f"{name} must be one-dimensional; got an array of shape {arr.shape}")
    return arr


def _first_non_numeric(values: NDArray[Any]) -> int:
    """Index of the first value that is no number (on the error path only: it loops)."""
    for i, value in enumerate(values):
        try:
            float(value)
        except (TypeError, ValueError):
            return i
    return 0  # pragma: no cover - only called when the array as a whole did not convert


def check_scores(y_score: ArrayLike, name: str = "y_score") -> FloatArray:
    """Return the scores as float64, refusing non-numeric, NaN and infinite values."""
    raw = as_1d(y_score, name)
    if raw.dtype.kind not in "biuf":
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError):
            i = _first_non_numeric(raw)
            raise InputError(
                f"{name} must be numeric; first non-numeric value at index {i}: {raw[i]!r}"
            ) from None
    scores = np.ascontiguousarray(raw, dtype=np.float64)
    finite = np.isfinite(scores)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise InputError(
            f"{name} contains {bad.size} NaN or infinite value(s); first at index "
            f"{bad[0]}: {float(scores[bad[0]])!r}"
        )
    return scores


def _classes(labels: NDArray[Any]) -> NDArray[Any]:
    """Distinct labels, sorted; O(n) for booleans and integers of a small range."""
    if labels.size and labels.dtype.kind in "biu":
        lo, hi = labels.min(), labels.max()
        if int(hi) - int(lo) < 4:
            # No sort: count each value of the (tiny) range.
            if int(lo) >= 0:  # {0, 1} or booleans: count them as they are, no copy
                present = np.bincount(labels, minlength=int(hi) + 1)[int(lo) :]
            else:
                present = np.bincount(labels.astype(np.intp) - int(lo))
            return (np.flatnonzero(present) + lo).astype(labels.dtype)
    return np.unique(labels)


def _names_a_class(text: str, classes: NDArray[Any]) -> bool:
    """Whether ``text`` read as a number is one of the (numeric) ``classes``."""
    try:
        return bool(np.isin([float(text)], classes).all())
    except ValueError:
        return False


def missing_mask(values: NDArray[Any]) -> BoolArray:
    """Which values of an object array are missing: None, NaN or pandas' NA.

    For labels (:func:`check_labels`) and cluster ids (``encode_clusters``), where pandas
    reads an empty cell among strings as NaN.
    """
    try:  # elementwise in numpy's loop: NaN is the value unequal to itself
        none = np.array(None, dtype=object)
        return np.asarray(values != values, dtype=bool) | np.asarray(
            np.equal(values, none), dtype=bool
        )
    except TypeError:  # pd.NA somewhere: its comparisons are NA, which is no bool
        return np.array([_is_missing(v) for v in values], dtype=bool)


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:
        return True


def check_labels(y_true: ArrayLike, *, pos_label: Any = None, name: str = "y_true") -> BoolArray:
    """Return a boolean array, True for the positive class.

    Without ``pos_label`` the labels must be {0, 1}, {-1, 1} or {False, True} (or a subset);
    the positive class is 1 / True. With ``pos_label`` any two values are allowed.
    """
    labels = as_1d(y_true, name)
    if labels.size and labels.dtype.kind == "f" and np.isnan(labels).any():
        raise InputError(f"{name} contains NaN; labels must be binary")
    if labels.dtype.kind == "O":
        # pandas reads an empty label among strings as NaN: only None was looked for, and
        # the NaN was refused as "y_true mixes label types".
        missing = np.flatnonzero(missing_mask(labels))
        if missing.size:
            raise InputError(
                f"{name} contains {len(missing)} missing value(s), first at index "
                f"{missing[0]}: {labels[missing[0]]!r}; labels must be binary"
            )
    try:
        classes = _classes(labels)
    except TypeError:
        raise InputError(f"{name} mixes label types: {_preview(labels)}") from None
    if classes.size > 2:
        raise InputError(
            f"{name} must be binary; found {classes.size} distinct values: {_preview(classes)}"
        )
    if pos_label is None:
        if labels.dtype.kind == "b":
            return labels.astype(bool)
        if (
            labels.dtype.kind not in "iuf"
            or not np.isin(classes, [0, 1, -1]).all()
            or (np.isin(classes, [0]).any() and np.isin(classes, [-1]).any())
        ):
            raise InputError(
                f"{name} has classes {_preview(classes)}; without pos_label the labels must "
                "be {0, 1} or {-1, 1}; pass pos_label to say which value is positive"
            )
        return np.asarray(labels == 1)
    if classes.size == 2 and not np.isin([pos_label], classes).all():
        hint = ""
        if (
            isinstance(pos_label, str)
            and classes.dtype.kind in "iuf"
            and _names_a_class(pos_label, classes)
        ):
            # A sites file's pos_label = "1" (TOML text) beside a column of numbers.
            hint = (
                " (the classes are numbers: give pos_label as a number, "
                f"{pos_label} not {pos_label!r})"
            )
        raise InputError(
            f"{name}: pos_label={pos_label!r} is not one of its classes {_preview(classes)}{hint}"
        )
    return np.asarray(labels == pos_label)


def check_binary(
    y_true: ArrayLike,
    y_score: ArrayLike,
    *,
    pos_label: Any = None,
    name_true: str = "y_true",
    name_score: str = "y_score",
) -> tuple[BoolArray, FloatArray]:
    """Validate a (labels, scores) pair: same length, not empty, binary, finite."""
    y = as_1d(y_true, name_true)
    s = as_1d(y_score, name_score)
    if y.shape[0] != s.shape[0]:
        raise InputError(
            f"{name_true} has {y.shape[0]} elements but {name_score} has {s.shape[0]}; "
            "they must have the same length"
        )
    if y.shape[0] == 0:
        raise InputError(f"{name_true} and {name_score} are empty")
    return check_labels(y, pos_label=pos_label, name=name_true), check_scores(s, name_score)


def check_probabilities(y_prob: FloatArray, name: str = "y_prob") -> None:
    """Refuse probabilities outside [0, 1] (Brier score, calibration)."""
    outside = (y_prob < 0.0) | (y_prob > 1.0)
    if outside.any():
        bad = np.flatnonzero(outside)
        raise InputError(
            f"{name} must lie in [0, 1] for this metric; {bad.size} value(s) do not, first at "
            f"index {bad[0]}: {float(y_prob[bad[0]])!r}"
        )


def check_confidence(confidence_level: float) -> float:
    level = float(confidence_level)
    if not 0.0 < level < 1.0:
        raise InputError(f"confidence_level must lie in (0, 1); got {confidence_level!r}")
    return level
