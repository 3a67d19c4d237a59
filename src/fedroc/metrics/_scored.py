"""Pooled metrics of labels and scores as thin layers on :class:`~fedroc.metrics.ScoreCounts`.

Every pooled metric of one score does the same three things (the layout of scikit-learn's
``_ranking.py``): validate the labels and scores, count the classes at each distinct
score, ask the counts. :func:`score_counts_metric` writes the first two once: a metric is
written as a question to the counts, and the decorator gives it the public signature
``(y_true, y_score, <its own parameters>, *, pos_label=None, sample_weight=None)`` and
documents those four parameters in its docstring.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from numpy.typing import ArrayLike

from fedroc._docs import ENTRIES
from fedroc.metrics._counts import ScoreCounts

__all__ = ["KEYWORD_PARAMETERS", "SCORE_PARAMETERS", "score_counts_metric"]

P = ParamSpec("P")
T = TypeVar("T")

#: The parameters :func:`score_counts_metric` adds before a metric's own, as numpydoc entries.
SCORE_PARAMETERS = "\n".join(ENTRIES[name] for name in ("y_true", "y_score"))

#: The keyword-only parameters it adds after them.
KEYWORD_PARAMETERS = "\n".join(ENTRIES[name] for name in ("pos_label", "sample_weight"))

_SECTION = re.compile(r"^(\w[\w ]*)\n-+$", re.MULTILINE)


def _with_parameters(doc: str) -> str:
    """Document the added parameters in ``doc`` (cleaned), numpydoc style.

    Into its Parameters section (before and after the metric's own parameters) or, where it
    has none, in a new one before its first section.
    """
    sections = list(_SECTION.finditer(doc))
    own = next((m for m in sections if m.group(1) == "Parameters"), None)
    if own is None:
        block = f"Parameters\n----------\n{SCORE_PARAMETERS}\n{KEYWORD_PARAMETERS}\n"
        if not sections:
            return f"{doc.rstrip()}\n\n{block}"
        at = sections[0].start()
        return f"{doc[:at]}{block}\n{doc[at:]}"
    later = [m.start() for m in sections if m.start() > own.start()]
    end = later[0] - 1 if later else len(doc)  # the blank line before the next section
    body = doc[own.end() + 1 : end].rstrip("\n")
    parameters = "\n".join(p for p in (SCORE_PARAMETERS, body, KEYWORD_PARAMETERS) if p)
    return doc[: own.end() + 1] + parameters + "\n" + doc[end:]


def score_counts_metric(ask: Callable[Concatenate[ScoreCounts, P], T]) -> Callable[..., T]:
    """Make the pooled metric ``f(y_true, y_score, ...)`` that asks ``ask`` of the counts.

    Parameters
    ----------
    ask : callable
        ``ask(counts, *args, **kwargs)``: the metric of the :class:`ScoreCounts` of the
        scores. Its docstring documents its own parameters (after ``counts``) only; the
        added ones (:data:`SCORE_PARAMETERS`, :data:`KEYWORD_PARAMETERS`) are put around
        them.

    Returns
    -------
    callable
        ``f(y_true, y_score, *args, pos_label=None, sample_weight=None, **kwargs)`` with the
        name, module and completed docstring of ``ask``, and the signature
        ``(y_true, y_score, <ask's parameters after counts>, *, pos_label, sample_weight)``.
    """

    @functools.wraps(ask)
    def metric(y_true: ArrayLike, y_score: ArrayLike, *args: Any, **kwargs: Any) -> T:
        given = {key: kwargs.pop(key, None) for key in ("pos_label", "sample_weight")}
        return ask(ScoreCounts.from_scores(y_true, y_score, **given), *args, **kwargs)

    own = list(inspect.signature(ask).parameters.values())[1:]
    positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    keyword = [p for p in own if p.kind is inspect.Parameter.KEYWORD_ONLY]
    kinds = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    metric.__signature__ = inspect.signature(ask).replace(  # type: ignore[attr-defined]
        parameters=[
            inspect.Parameter("y_true", kinds[0], annotation="ArrayLike"),
            inspect.Parameter("y_score", kinds[0], annotation="ArrayLike"),
            *positional,
            *keyword,
            inspect.Parameter("pos_label", kinds[1], default=None, annotation="Any"),
            inspect.Parameter(
                "sample_weight", kinds[1], default=None, annotation="ArrayLike | None"
            ),
        ]
    )
    metric.__doc__ = _with_parameters(inspect.cleandoc(ask.__doc__ or ""))
    return metric
