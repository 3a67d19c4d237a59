"""A site's configuration on its SuperNode (Flower node config) and the Site built from it.

Each SuperNode serves one site. Its operator gives the data file, columns, disclosure policy
and audit log in the node config (``flower-supernode --node-config site.toml``, or
``fedroc flower supernode``); the analyst never sees any of it. Keys (kebab-case, as
Flower's node config)::

    site = "north"                  # required: the site's name
    data = "/data/north.csv"        # required: CSV or Parquet file
    label = "label"                 # label column (default "label")
    score = "score"                 # score column (default "score")
    cluster = "patient"             # optional cluster column
    pos-label = 1                   # optional positive label value
    min-count = 5                   # disclosure policy: q
    allow-noisy = true
    allow-shares = true
    allow-exact = true              # false: DP releases only (the histogram under DP)
    epsilon-limit = 3.0             # lifetime budget, kept in the site's ledger
    delta-limit = 1e-5
    allowed-functions = "fedroc.info,fedroc.sum"   # comma-separated
    mpc-proxies = "/etc/fedroc/cluster.toml"       # MPC shares only for this cluster's
                                                   # proxies; "any" or "none" (default)
    mpc-only = false                               # a node that pins a cluster serves
                                                   # only MPC jobs unless false
    mpc-owner-key = "/var/lib/fedroc/north/owner.key"  # the MPC owner key its cluster
                                                   # registered ([owners]); a node has no
                                                   # other way to keep one across runs
    mpc-max-jobs = 1                               # MPC jobs it authorises in its lifetime
    policy-file = "/etc/fedroc/policy.toml"        # instead of the policy keys above
    node-dir = "/var/lib/fedroc/north"             # default ./fedroc-node-SITE
    audit = "/var/log/fedroc/north.jsonl"          # default NODE_DIR/audit.jsonl
    secagg-key = "/etc/fedroc/secagg.key"          # default NODE_DIR/secagg.key
    roster = "/etc/fedroc/roster.toml"             # default NODE_DIR/roster.toml
    site-modules = "mysite.functions"              # extra modules registering site functions

Every SuperNode keeps an audit log and, beside it, its privacy ledger (``audit.ledger.jsonl``):
its spending and its bindings (partner sets, bins) hold across runs and restarts, so there
is no node without one. ``secagg-key`` (the site's Ed25519 signing key) and ``roster`` (the
sites it aggregates with and their keys, :mod:`fedroc.federation.roster`) let it take part
in secure aggregation; a node without them refuses it.

Unknown keys are refused (a misspelt ``min_count`` must not silently weaken the policy).
Relative paths are taken from the SuperNode's working directory.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedroc.data import Columns
from fedroc.exceptions import InputError
from fedroc.federation.roster import KEY_NAME, ROSTER_NAME, SiteIdentity, load_identity
from fedroc.federation.site import Site, check_noise_seed
from fedroc.privacy.policy import DEFAULT_EPSILON_LIMIT, DisclosurePolicy

__all__ = ["NODE_CONFIG_KEYS", "SiteNodeConfig", "cached_site"]

_POLICY_KEYS = {
    "min-count": "min_count",
    "allow-noisy": "allow_noisy",
    "allow-shares": "allow_shares",
    "epsilon-limit": "epsilon_limit",
    "delta-limit": "delta_limit",
    "allowed-functions": "allowed_functions",
    "mpc-proxies": "mpc_proxies",
    "mpc-only": "mpc_only",
    "mpc-owner-key": "mpc_owner_key",
    "mpc-max-jobs": "mpc_max_jobs",
    # The rest of the policy: without them a node config could not carry an operator's
    # floors, and SiteNodeConfig.to_node_config (what LocalDeployment's nodes read) served
    # the defaults in their place (H2, tests/test_attacks_review7.py).
    "secagg-min-sites": "secagg_min_sites",
    "secagg-rebind": "secagg_rebind",
    "opt-in": "opt_in",
    "clear-histograms": "clear_histograms",
    "allow-exact": "allow_exact",
    "rocglm-min-sensitivity": "rocglm_min_sensitivity",
    "histogram-min-epsilon": "histogram_min_epsilon",
    "score-range": "score_range",
}
# A node seals MPC shares for no proxies unless its operator names them: the analyst who
# chooses the proxies' keys would open every share (a site in the analyst's own process,
# whose rows the analyst holds anyway, takes the job's proxies by default).
NODE_MPC_PROXIES = "none"
NODE_CONFIG_KEYS: tuple[str, ...] = (
    "site",
    "data",
    "label",
    "score",
    "cluster",
    "pos-label",
    *_POLICY_KEYS,
    "policy-file",
    "node-dir",
    "audit",
    "secagg-key",
    "roster",
    "site-modules",
    "noise-seed",
)


def _path(config: Mapping[str, Any], key: str) -> Path | None:
    """Return the path ``config[key]``: None when absent or blank; refuse a non-string."""
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise InputError(f"node config {key} must be a path; got {value!r}")
    return Path(value) if str(value).strip() else None


def _node_terms(exc: InputError) -> InputError:
    """Return a policy refusal in the node config's words: ``min-count``, not ``min_count``."""
    text = str(exc)
    for key, name in _POLICY_KEYS.items():
        text = re.sub(rf"\b{name}\b", key, text)
    return InputError(f"node config: {text}")


def _allowed_functions(value: Any) -> list[str]:
    """Split ``allowed-functions`` (comma-separated); an empty list is refused."""
    if not isinstance(value, str):
        raise InputError(
            "node config allowed-functions must be a comma-separated string, e.g. "
            f"'fedroc.info,fedroc.sum'; got {value!r}"
        )
    names = [f.strip() for f in value.split(",") if f.strip()]
    if not names:
        # Empty would serve no function, and an empty --allowed-functions of fedroc flower
        # supernode meant every function: refused rather than read either way.
        raise InputError(
            f"node config allowed-functions names no function ({value!r}); leave it out to "
            "allow every function"
        )
    return names


def _opt_in(value: Any) -> list[str]:
    """Split ``opt-in`` (comma-separated options the policy opts in to; blank: none)."""
    if not isinstance(value, str):
        raise InputError(
            "node config opt-in must be a comma-separated string, e.g. "
            f"'rocglm.positives_rule'; got {value!r}"
        )
    return [f.strip() for f in value.split(",") if f.strip()]


def _score_range(value: Any) -> list[float]:
    """Read ``score-range`` ("LO,HI", as node config values are scalars) as two numbers."""
    parts = value.split(",") if isinstance(value, str) else []
    try:
        pair = [float(v) for v in parts]
    except ValueError:
        pair = []
    if len(pair) != 2:
        raise InputError(f"node config score-range must be 'LO,HI', e.g. '-10,10'; got {value!r}")
    return pair


def _policy_node_config(p: DisclosurePolicy) -> dict[str, Any]:
    """Return the node config keys of a policy: every setting a node would not default to."""
    out: dict[str, Any] = {}
    out["min-count"] = int(p.min_count)
    out["allow-noisy"] = bool(p.allow_noisy)
    out["allow-shares"] = bool(p.allow_shares)
    if p.epsilon_limit != DEFAULT_EPSILON_LIMIT:
        out["epsilon-limit"] = float(p.epsilon_limit)
    if p.delta_limit is not None:
        out["delta-limit"] = float(p.delta_limit)
    if p.allowed_functions is not None:
        out["allowed-functions"] = ",".join(sorted(p.allowed_functions))
    out["mpc-proxies"] = p.mpc_proxies  # always: a node's default differs from a policy's
    if p.mpc_only is not None:
        out["mpc-only"] = bool(p.mpc_only)
    if p.mpc_owner_key is not None:
        out["mpc-owner-key"] = p.mpc_owner_key
    if p.mpc_max_jobs is not None:
        out["mpc-max-jobs"] = int(p.mpc_max_jobs)
    # Every other setting that is not the default: a node reads the policy from this
    # config alone, and a setting left out was served at its default (H2).
    default = DisclosurePolicy()
    for key, kind in (
        ("secagg_min_sites", int),
        ("rocglm_min_sensitivity", float),
        ("histogram_min_epsilon", float),
    ):
        if getattr(p, key) != getattr(default, key):
            out[key.replace("_", "-")] = kind(getattr(p, key))
    for key in ("secagg_rebind", "clear_histograms"):
        if bool(getattr(p, key)):
            out[key.replace("_", "-")] = True
    if not p.allow_exact:
        out["allow-exact"] = False
    if p.opt_in:
        out["opt-in"] = ",".join(sorted(p.opt_in))
    if p.score_range is not None:
        out["score-range"] = f"{p.score_range[0]!r},{p.score_range[1]!r}"
    return out


@dataclass(frozen=True)
class SiteNodeConfig:
    """What a SuperNode needs to serve one site."""

    site: str
    data: Path
    label: str = "label"
    score: str = "score"
    cluster: str | None = None
    pos_label: Any = None
    policy: DisclosurePolicy = field(default_factory=DisclosurePolicy)
    audit: Path | None = None
    site_modules: tuple[str, ...] = ()
    noise_seed: int | None = None
    node_dir: Path | None = None
    secagg_key: Path | None = None
    roster: Path | None = None

    @property
    def node_directory(self) -> Path:
        """Where the node keeps what it must not lose: ``node_dir`` or ./fedroc-node-SITE."""
        return self.node_dir if self.node_dir is not None else Path(f"fedroc-node-{self.site}")

    @property
    def audit_path(self) -> Path:
        """The audit log (its ledger lies beside it): ``audit`` or NODE_DIR/audit.jsonl."""
        return self.audit if self.audit is not None else self.node_directory / "audit.jsonl"

    def identity(self) -> SiteIdentity | None:
        """Read the site's signing key and roster (None when the node has neither).

        Raises
        ------
        InputError
            When a configured file is missing or malformed, or a roster has no key.
        """
        key = self.secagg_key or self.node_directory / KEY_NAME
        roster = self.roster or self.node_directory / ROSTER_NAME
        if self.secagg_key is None and self.roster is None and not roster.exists():
            return None  # secure aggregation not set up: the site refuses it
        return load_identity(self.site, key, roster)

    @classmethod
    def from_node_config(cls, config: Mapping[str, Any]) -> SiteNodeConfig:
        """Read a SuperNode's node config (the keys of :data:`NODE_CONFIG_KEYS`).

        The policy comes either from a ``policy-file`` or from the policy keys (``min-count``,
        ``allowed-functions`` as a comma-separated list, ...), not both.

        Raises
        ------
        InputError
            On an unknown key, a missing ``site`` or ``data``, or a policy given both ways.
        """
        unknown = sorted(set(config) - set(NODE_CONFIG_KEYS))
        if unknown:
            raise InputError(
                f"unknown node config key(s) {unknown}; fedroc knows {list(NODE_CONFIG_KEYS)}"
            )
        for key in ("site", "data"):
            if not str(config.get(key, "")).strip():
                raise InputError(f"the node config needs {key!r} (got {config.get(key)!r})")
        policy_items = {v: config[k] for k, v in _POLICY_KEYS.items() if k in config}
        if "policy-file" in config:
            if policy_items:
                raise InputError(
                    "give the policy either as 'policy-file' or as keys "
                    f"{sorted(k for k in _POLICY_KEYS if k in config)}, not both"
                )
            policy_file = _path(config, "policy-file")
            if policy_file is None:
                raise InputError(
                    f"node config policy-file must be a path; got {config['policy-file']!r}"
                )
            try:
                policy = DisclosurePolicy.from_toml(
                    policy_file, defaults={"mpc_proxies": NODE_MPC_PROXIES}
                )
            except InputError as exc:
                raise InputError(f"node config policy-file: {exc}") from None
        else:
            if "allowed_functions" in policy_items:
                policy_items["allowed_functions"] = _allowed_functions(
                    policy_items["allowed_functions"]
                )
            if "opt_in" in policy_items:
                policy_items["opt_in"] = _opt_in(policy_items["opt_in"])
            if "score_range" in policy_items:
                policy_items["score_range"] = _score_range(policy_items["score_range"])
            policy_items.setdefault("mpc_proxies", NODE_MPC_PROXIES)
            try:
                policy = DisclosurePolicy.from_mapping(policy_items)
            except InputError as exc:
                raise _node_terms(exc) from None
        modules = tuple(
            m.strip() for m in str(config.get("site-modules", "")).split(",") if m.strip()
        )
        cluster = str(config["cluster"]) if str(config.get("cluster", "")).strip() else None
        return cls(
            site=str(config["site"]),
            data=Path(str(config["data"])),
            label=str(config.get("label", "label")),
            score=str(config.get("score", "score")),
            cluster=cluster,
            pos_label=config.get("pos-label"),
            policy=policy,
            site_modules=modules,
            noise_seed=check_noise_seed(config.get("noise-seed"), "node config noise-seed"),
            node_dir=_path(config, "node-dir"),
            audit=_path(config, "audit"),
            secagg_key=_path(config, "secagg-key"),
            roster=_path(config, "roster"),
        )

    def to_node_config(self) -> dict[str, Any]:
        """Return the node config (for a TOML file given to ``--node-config``)."""
        out: dict[str, Any] = {
            "site": self.site,
            "data": str(self.data),
            "label": self.label,
            "score": self.score,
        }
        if self.cluster is not None:
            out["cluster"] = self.cluster
        if self.pos_label is not None:
            out["pos-label"] = self.pos_label
        out.update(_policy_node_config(self.policy))
        for key, path in (
            ("node-dir", self.node_dir),
            ("audit", self.audit),
            ("secagg-key", self.secagg_key),
            ("roster", self.roster),
        ):
            if path is not None:
                out[key] = str(path)
        if self.site_modules:
            out["site-modules"] = ",".join(self.site_modules)
        if self.noise_seed is not None:
            out["noise-seed"] = int(self.noise_seed)
        return out

    def build(self) -> Site:
        """Import the ``site_modules`` (they register site functions) and load the site.

        The site's audit log and ledger are files (:attr:`audit_path`): a SuperNode never
        keeps its spending or its bindings in memory only.
        """
        for module in self.site_modules:
            importlib.import_module(module)
        if self.noise_seed is not None:  # in the node's log: a leftover would be unsafe
            logging.getLogger("fedroc.flower").warning(
                "site %r: its DP noise is seeded (node config noise-seed = %d): reproducible "
                "simulations and tests only; whoever knows the seed can remove the noise",
                self.site,
                self.noise_seed,
            )
        site = Site.from_file(
            self.site,
            self.data,
            Columns(self.label, self.score, self.cluster),
            pos_label=self.pos_label,
            policy=self.policy,
            audit=self.audit_path,
            noise_seed=self.noise_seed,
            identity=self.identity(),
        )
        # For the node's operator; with its ledger, which may hold it to one set (H18-1).
        for warning in self.policy.warnings(n_rows=site.n_rows, ledger=site.ledger):
            logging.getLogger("fedroc.flower").warning("site %r: %s", self.site, warning)
        return site


_CACHE: dict[tuple[Any, ...], Site] = {}
_CACHE_LOCK = threading.Lock()


def cached_site(config: Mapping[str, Any]) -> Site:
    """Return the Site for a node config, built once per process while its data file is unchanged.

    With Flower's default isolation every message runs in a fresh ClientApp process, so
    this only saves work in a long-lived process (``fedroc flower supernode``). State
    between calls never lives here: it travels in the run's ``Context.state``.
    """
    parsed = SiteNodeConfig.from_node_config(config)
    try:
        stat = os.stat(parsed.data)
        stamp: tuple[Any, ...] = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = ()
    key = (json.dumps(dict(config), sort_keys=True, default=str), *stamp)
    with _CACHE_LOCK:
        site = _CACHE.get(key)
        if site is None:
            site = parsed.build()
            _CACHE.clear()  # one site per SuperNode: keep only the current configuration
            _CACHE[key] = site
        return site
