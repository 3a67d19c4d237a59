"""Sequestered test data: Thresholdout answers and the load-factor planner (paper 2).

Tang, Whitney, Myers & Giger, "Sequestration of imaging studies in MIDRC: controlling for
ingenuous and disingenuous use of sequestered data" (papers/thresholdout-auc-midrc-tang.md,
papers/NOTES.md section 2).

- :mod:`~fedroc.methods.sequester.planner`: load factor, subset size, eq.-3 budget,
  epsilon, power, AUC SE, the inverse questions, warnings on the noise rates.
- :mod:`~fedroc.methods.sequester.engine`: the image <-> subset hash table, the AUC
  sensitivity, a developer's limits and an in-memory session.
- :mod:`~fedroc.methods.sequester.mechanism`: how one query is answered (Dwork's
  Thresholdout, the default; Laplace on every answer; the paper's h-variant), with noise
  and events from :mod:`fedroc.privacy`.

The REST service that puts a test set behind these rules is an application on top:
:mod:`fedroc.sequester` (``fedroc sequester serve``); the paper's Figures 3, 4 and 5 are
reproduced by :mod:`fedroc.experiments.sequester`.

Threat model
------------
The custodian (who holds the labels, the seed of the subsets and their membership) is
trusted and runs this code and the service. Developers are untrusted and may be adaptive
or malicious: they choose their predictions, their reference AUCs and the order of their
queries, and see their answers, their remaining budget and quotas, their own history and
the public part of their plan; never labels, membership, the seed, exact subset AUCs or the
noise drawn. Noise is drawn by :mod:`fedroc.privacy` from the server's own entropy; nothing
a developer sends seeds it.

What a developer can learn, by mechanism (``B`` budget units, noise rate ``sigma``, AUC
sensitivity ``Delta`` of :func:`~fedroc.methods.sequester.engine.auc_sensitivity`):

- ``thresholdout`` (default): whether their model's subset AUC lies within a noisy ``T``
  of the reference AUC they sent (the answer is then their own number), and at most ``B``
  noisy subset AUCs. The interaction is ``2 B Delta / sigma``-differentially private
  with respect to one image's label, whatever the developer does, up to the small delta of
  the draw's check of the noisy prevalence against the true class sizes (the prevalence's
  own epsilon added; docs/privacy.md); the one-image probe that
  reads every label under the paper's variant reads none (``scripts/sequester_adaptive.py``,
  ``tests/test_sequester_attack.py``).
- ``laplace``: at most ``B`` answers, each with ``Lap(sigma)`` noise;
  ``B Delta / sigma``-DP (with the same delta and prevalence epsilon).
- ``h-thresholdout`` (the paper's variant): exact subset AUCs whenever they lie within
  ``T`` of the whole-set AUC, without spending budget. It protects against a developer who
  overfits one subset by accident, not against one who crafts predictions: one-image
  probes read labels for free, limited only by the quotas. Not differentially private; the
  ``epsilon = B / (sigma phi)`` of eq. 3 is the paper's figure, not a guarantee.

Beside the budget, :class:`~fedroc.methods.sequester.engine.Limits` caps submissions and
queries per developer and refuses a submission that orders the images almost as an
earlier one does (a probe). Answers computed from the test set are clipped to [0, 1] and
rounded to the precision the subset size supports. What no mechanism here hides: the size
of the test set, the plan's public parameters, and the developer's own predictions.

The prevalence the subsets are drawn at is public (their class sizes follow from it, and
with them the answers' rounding step and the AUC's sensitivity). The service takes the
custodian's, or counts the test set's positives with discrete Laplace noise
(:func:`~fedroc.methods.sequester.engine.noisy_prevalence`) and adds that epsilon to the
plan's ``epsilon_guarantee``. Drawn with replacement, a subset holds at most a public
number of copies of one image (``max_copies``, default
:func:`~fedroc.methods.sequester.engine.default_max_copies`), and the sensitivity follows
from that cap: the most copies an uncapped draw happens to make depends on the class sizes
and, published in the plan's epsilon, told a label (``scripts/results/sequester_neighbours.md``).

The subsets are drawn from the labels, so neighbouring test sets have different tables; the
answers' guarantee rests on the table being the custodian's secret random draw (a coupling
of the two worlds' draws, :func:`~fedroc.methods.sequester.engine.auc_sensitivity`), not
on the subsets being held fixed: a custodian's seed must be random and kept secret.
"""

from fedroc.methods.sequester import planner
from fedroc.methods.sequester.engine import (
    PREVALENCE_SD,
    ClassesTooSmall,
    Limits,
    NearDuplicate,
    NeedsReplacement,
    QuotaExceeded,
    Session,
    SubsetTable,
    auc_sensitivity,
    default_max_copies,
    draw_subsets,
    noisy_prevalence,
    prevalence_epsilon,
    rank_distance,
    subset_auc,
    subset_aucs,
)
from fedroc.methods.sequester.mechanism import (
    DEFAULT_MECHANISM,
    MECHANISMS,
    Answer,
    BudgetExhausted,
    Mechanism,
    ParameterError,
    ReferenceRequired,
    answer_step,
)
from fedroc.methods.sequester.planner import *  # noqa: F403  (the planner's public names)

__all__ = [
    "DEFAULT_MECHANISM",
    "MECHANISMS",
    "PREVALENCE_SD",
    "Answer",
    "BudgetExhausted",
    "ClassesTooSmall",
    "Limits",
    "Mechanism",
    "NearDuplicate",
    "NeedsReplacement",
    "ParameterError",
    "QuotaExceeded",
    "ReferenceRequired",
    "Session",
    "SubsetTable",
    "answer_step",
    "auc_sensitivity",
    "default_max_copies",
    "draw_subsets",
    "noisy_prevalence",
    "planner",
    "prevalence_epsilon",
    "rank_distance",
    "subset_auc",
    "subset_aucs",
]
__all__ += planner.__all__
