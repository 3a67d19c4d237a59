"""Population and personalized AUCs of clustered data (paper 3: Michael & Tian).

When each patient (cluster) contributes several observations, two AUCs answer different
questions. The *population* AUC ``theta12`` is the chance that a control and a case drawn
from the whole population are ranked correctly (pairs from different clusters, eq. 5); the
*personalized* AUC ``theta11`` is the average within-cluster AUC, how well the marker
separates one patient's own observations. They can disagree, even to Simpson's paradox.

One package, in the shape of every method of fedroc:

- pooled analysis (one table holds every cluster): :func:`clustered_auc` gives both
  estimators, Obuchowski's (1997) estimator with his variance, the joint covariance of
  Corollary 6, intervals (t on I - 1 df on the logit scale, t, or Wald), the confidence
  ellipse (14) and the z-test of H0: theta12 = theta11 (section 6.3), in O(N log N);
  :class:`ClusteredAUCResult`;
- site side (``_site``): the two site functions of the federated computation;
- analyst side (``_federated``): :func:`federated_clustered_auc`, registered with
  :func:`fedroc.evaluate` as ``method="clustered"``;
- :mod:`~fedroc.methods.clustered.bounds`: Theorem 3 and the finite-support bound of
  section 4;
- :mod:`~fedroc.methods.clustered.models`: the simulation models of sections 3 and 6.1
  with their closed forms;
- :mod:`~fedroc.methods.clustered.plots`: the confidence ellipses (Figure 5's view) and the
  clusters' rug plot (Figure 1's view); the paper's figures are reproduced by
  :mod:`fedroc.experiments.clustered`.

``fedroc.clustered`` re-exports this package (its name before fedroc 0.2).
"""

from fedroc.methods.clustered._estimators import (
    POPULATION_ESTIMATORS,
    SIGMA11_DIVISORS,
    JointEstimates,
    equality_z,
)
from fedroc.methods.clustered._federated import (
    FederatedClusteredResult,
    SiteSum,
    federated_clustered_auc,
    plain_sum,
    run_clustered,
    secure_site_sum,
)
from fedroc.methods.clustered._pooled import clustered_auc, obuchowski_auc
from fedroc.methods.clustered._result import (
    INTERVALS,
    MIN_CLUSTERS,
    Alternative,
    ClusteredAUCResult,
    ClusteredAUCWarning,
    ObuchowskiResult,
    cluster_ci,
)
from fedroc.methods.clustered._site import (
    FUNCTION_MOMENTS,
    FUNCTION_SUMMARY,
    bin_scores,
    score_bin_edges,
)
from fedroc.methods.clustered.bounds import (
    finite_support_bounds,
    personalized_auc_bounds,
    population_auc_bounds,
)

__all__ = [
    "FUNCTION_MOMENTS",
    "FUNCTION_SUMMARY",
    "INTERVALS",
    "MIN_CLUSTERS",
    "POPULATION_ESTIMATORS",
    "SIGMA11_DIVISORS",
    "Alternative",
    "ClusteredAUCResult",
    "ClusteredAUCWarning",
    "FederatedClusteredResult",
    "JointEstimates",
    "ObuchowskiResult",
    "SiteSum",
    "bin_scores",
    "cluster_ci",
    "clustered_auc",
    "equality_z",
    "federated_clustered_auc",
    "finite_support_bounds",
    "obuchowski_auc",
    "personalized_auc_bounds",
    "plain_sum",
    "population_auc_bounds",
    "run_clustered",
    "score_bin_edges",
    "secure_site_sum",
]
