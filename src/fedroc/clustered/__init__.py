"""Population and personalized AUCs of clustered data (paper 3: Michael & Tian).

When each patient (cluster) contributes several observations, two AUCs answer different
questions. The *population* AUC ``theta12`` is the chance that a control and a case drawn
from the whole population are ranked correctly (pairs from different clusters, eq. 5); the
*personalized* AUC ``theta11`` is the average within-cluster AUC, how well the marker
separates one patient's own observations. They can disagree, even to Simpson's paradox.

- :func:`clustered_auc`: both estimators, Obuchowski's (1997) estimator with his variance,
  the joint covariance of Corollary 6, Wald intervals, the confidence ellipse (14) and the
  z-test of H0: theta12 = theta11. O(N log N).
- :mod:`fedroc.clustered.bounds`: Theorem 3 (constant cluster sizes).
- :mod:`fedroc.clustered.models`: the data models of section 6.1 with the closed forms of
  eq. 12, vectorized over simulation replicates.
- The federated computation (clusters inside sites) is :mod:`fedroc.methods.clustered`.
"""

from fedroc.clustered._auc import Alternative, ClusteredAUCResult, clustered_auc
from fedroc.clustered._estimators import JointEstimates
from fedroc.clustered.bounds import personalized_auc_bounds, population_auc_bounds

__all__ = [
    "Alternative",
    "ClusteredAUCResult",
    "JointEstimates",
    "clustered_auc",
    "personalized_auc_bounds",
    "population_auc_bounds",
]
