"""The analyst's handle on a set of sites."""

from __future__ import annotations

import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

from fedroc._results import ResultMixin, jsonable
from fedroc.data import Columns
from fedroc.exceptions import InputError
from fedroc.federation._progress import CallProgress
from fedroc.federation.records import Record, check_record
from fedroc.federation.roster import SiteIdentity, load_identity, provide_identities
from fedroc.federation.site import AuditLog, Site, check_noise_seed, split_meta
from fedroc.federation.transport import Exchange, InProcessTransport, Transport
from fedroc.privacy.ledger import DPEvent
from fedroc.privacy.policy import DisclosurePolicy, policy_paths_relative_to

__all__ = ["CallProgress", "CallRecord", "Federation", "Released"]


@dataclass(frozen=True)
class CallRecord:
    """One call of a site function, as the analyst saw it.

    Attributes
    ----------
    function : str
        The site function called.
    sites : tuple of str
        The sites that answered, in order.
    bytes_sent : dict of str to int
        Bytes of the arguments sent to each site.
    bytes_received : dict of str to int
        Bytes of each site's reply.
    kinds : dict of str to str
        Kind of each site's reply ("aggregate", "noisy", "shares").
    dp : dict of str to list of DPEvent
        The differential-privacy releases in each site's reply.
    seconds : float
        Wall-clock time of the call.
    """

    function: str
    sites: tuple[str, ...]
    bytes_sent: dict[str, int]
    bytes_received: dict[str, int]
    kinds: dict[str, str]
    dp: dict[str, list[DPEvent]]
    seconds: float


@dataclass(frozen=True, repr=False)
class Released(ResultMixin):
    """What left the sites during a computation.

    Attributes
    ----------
    rounds : int
        Calls of site functions (each is one round trip to every site called).
    functions : list of str
        Site functions called, in order of first use.
    bytes_received, bytes_sent : dict
        Bytes from each site to the analyst and back.
    kinds : dict
        Number of replies of each kind ("aggregate", "noisy", "shares").
    dp : dict
        Differential-privacy events per site (as dicts).
    epsilon, delta : dict
        Privacy spent per site by basic composition.
    notes : list of str
        Method-specific remarks (suppressed bins, ...).
    """

    rounds: int
    functions: list[str]
    bytes_received: dict[str, int]
    bytes_sent: dict[str, int]
    kinds: dict[str, int]
    dp: dict[str, list[dict[str, Any]]]
    epsilon: dict[str, float]
    delta: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def with_notes(self, *notes: str) -> Released:
        """Return a copy with ``notes`` appended to the method-specific remarks."""
        return Released(
            self.rounds,
            self.functions,
            self.bytes_received,
            self.bytes_sent,
            self.kinds,
            self.dp,
            self.epsilon,
            self.delta,
            [*self.notes, *notes],
        )

    @classmethod
    def from_calls(cls, calls: Sequence[CallRecord]) -> Released:
        """Sum up a transcript of calls: rounds, bytes, reply kinds and privacy spent per site."""
        functions: list[str] = []
        received: dict[str, int] = {}
        sent: dict[str, int] = {}
        kinds: dict[str, int] = {}
        dp: dict[str, list[dict[str, Any]]] = {}
        eps: dict[str, float] = {}
        delta: dict[str, float] = {}
        for call in calls:
            if call.function not in functions:
                functions.append(call.function)
            for site in call.sites:
                received[site] = received.get(site, 0) + call.bytes_received[site]
                sent[site] = sent.get(site, 0) + call.bytes_sent[site]
                kind = call.kinds[site]
                kinds[kind] = kinds.get(kind, 0) + 1
                for event in call.dp.get(site, []):
                    dp.setdefault(site, []).append(jsonable(event))
                    eps[site] = eps.get(site, 0.0) + event.epsilon
                    delta[site] = delta.get(site, 0.0) + event.delta
        return cls(len(calls), functions, received, sent, kinds, dp, eps, delta)

    @classmethod
    def pooled(cls, n_rows: int) -> Released:
        """Marker for the pooled reference: every row was seen by the analyst."""
        return cls(0, [], {}, {}, {}, {}, {}, {}, [f"all {n_rows} rows pooled (no privacy)"])


class TableOptions(TypedDict, total=False):
    """Keywords of :meth:`Federation.from_frames` and :meth:`Federation.from_files`.

    Attributes
    ----------
    label, score : str
        Columns of the labels and of the scores (default ``"label"``, ``"score"``).
    cluster : str or None
        Column of cluster ids (clustered AUCs).
    score_b : str or None
        Column of a second model's score (paired comparisons).
    pos_label : optional
        The positive class, where the labels are not {0, 1}, {-1, 1} or booleans.
    policy : DisclosurePolicy or None
        Every site's disclosure policy (default: :class:`DisclosurePolicy`'s defaults).
    audit_dir : str, Path or None
        Each site keeps its audit log and its privacy ledger there (``<name>.jsonl``,
        ``<name>.ledger.jsonl``), so that its spending carries over to later runs; without
        it both live in memory.
    noise_seed : int or None
        Configures the sites' DP noise for reproducible simulations (each site derives its
        own stream); it is a setting of the sites, not of the analyst.
    requester, timeout
        As in :class:`Federation`.
    """

    label: str
    score: str
    cluster: str | None
    score_b: str | None
    pos_label: Any
    policy: DisclosurePolicy | None
    audit_dir: str | Path | None
    noise_seed: int | None
    requester: str
    timeout: float | None


_COLUMN_OPTIONS = ("label", "score", "cluster", "score_b")  # fedroc.data.Columns
_SITE_OPTIONS = ("pos_label", "policy", "noise_seed")  # Site.from_frame / Site.from_file


def _where_it_goes(site: str, keys: list[str]) -> str:
    """Say under which table of a site a misplaced setting goes.

    ``min_count = 3`` in ``[sites.north]`` was refused as an unknown key with no hint.
    """
    hints = []
    if set(keys) & {f.name for f in fields(DisclosurePolicy)}:
        hints.append(f"policy settings go under [sites.{site}.policy]")
    if set(keys) & {*_COLUMN_OPTIONS, "pos_label"}:
        hints.append(f"column settings under [sites.{site}.columns]")
    return "".join(f"; {h}" for h in hints)


class Federation:
    """The analyst's handle: call a site function on every site, get one reply per site.

    Parameters
    ----------
    transport : Transport
        Where the sites are. Build an in-process federation with :meth:`from_sites`,
        :meth:`from_frames`, :meth:`from_files` or :meth:`from_toml`.
    requester : str
        Name recorded in the sites' audit logs.
    timeout : float or None
        Seconds a call may take before the transport gives up (networked transports).

    Attributes
    ----------
    progress : callable or None
        Called with a :class:`CallProgress` as each call starts, as it reaches each site
        (where the transport calls the sites in turn) and when all have answered
        (``fedroc evaluate`` shows them on a terminal). None (the default) reports nothing.
    """

    def __init__(
        self, transport: Transport, *, requester: str = "analyst", timeout: float | None = None
    ) -> None:
        self.transport = transport
        self.requester = requester
        self.timeout = timeout
        self.transcript: list[CallRecord] = []
        self.progress: Callable[[CallProgress], None] | None = None
        self._phase: tuple[str | None, int] = (None, 0)
        if not transport.site_names:
            raise InputError("a federation needs at least one site")

    def __repr__(self) -> str:
        """Show the site names and the transport's type."""
        return f"Federation(sites={self.site_names}, transport={type(self.transport).__name__})"

    def __enter__(self) -> Federation:
        """Return the federation, so that ``with`` closes its transport at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the transport (see :meth:`close`)."""
        self.close()

    def close(self) -> None:
        """Close the transport: its connections, servers or processes."""
        self.transport.close()

    @property
    def site_names(self) -> list[str]:
        """Names of the sites, in the transport's order."""
        return self.transport.site_names

    # -- calls ---------------------------------------------------------------------------
    def call(
        self, function: str, /, *, sites: Iterable[str] | None = None, **args: Any
    ) -> dict[str, Record]:
        """Run ``function`` with the same ``args`` on every site (or on ``sites``)."""
        names = list(sites) if sites is not None else self.site_names
        record = check_record(args, f"arguments of {function!r}")
        return self.call_each(function, {name: record for name in names})

    def call_each(
        self, function: str, args_by_site: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Record]:
        """Run ``function`` on each site with that site's own arguments."""
        unknown = [n for n in args_by_site if n not in self.site_names]
        if unknown:
            raise InputError(f"unknown site(s) {unknown}; sites are {self.site_names}")
        records = {
            n: check_record(a, f"arguments of {function!r}") for n, a in args_by_site.items()
        }
        start = time.perf_counter()
        exchanges = self._call_transport(function, records)
        replies: dict[str, Record] = {}
        kinds: dict[str, str] = {}
        dp: dict[str, list[DPEvent]] = {}
        for name, ex in exchanges.items():
            replies[name], kinds[name], dp[name] = split_meta(ex.reply)
        self.transcript.append(
            CallRecord(
                function,
                tuple(exchanges),
                {n: ex.bytes_sent for n, ex in exchanges.items()},
                {n: ex.bytes_received for n, ex in exchanges.items()},
                kinds,
                dp,
                time.perf_counter() - start,
            )
        )
        return replies

    def _call_transport(self, function: str, records: dict[str, Record]) -> dict[str, Exchange]:
        progress = self.progress
        if progress is None:
            return self.transport.call(
                function, records, requester=self.requester, timeout=self.timeout
            )
        phase, since = self._phase
        step = CallProgress(len(self.transcript) - since + 1, function, tuple(records), phase=phase)
        progress(step)
        self.transport.on_site = lambda site: progress(replace(step, site=site))
        try:
            exchanges = self.transport.call(
                function, records, requester=self.requester, timeout=self.timeout
            )
        finally:
            self.transport.on_site = None
        progress(replace(step, done=True))
        return exchanges

    @contextmanager
    def progress_phase(self, name: str) -> Iterator[None]:
        """Show the block's calls as ``name``'s, numbered from 1, in :attr:`progress`.

        ``evaluate`` runs the Brier score and calibration after the method in one: their
        calls were numbered on from the method's, so ROC-GLM's progress reached round 17
        where its result's ``released.rounds`` is 10 (and ``calibration_released`` 7).
        """
        saved = self._phase
        self._phase = (name, len(self.transcript))
        try:
            yield
        finally:
            self._phase = saved

    def mark(self) -> int:
        """Position in the transcript; pass it to :meth:`released` to cover later calls."""
        return len(self.transcript)

    def released(self, since: int = 0) -> Released:
        """Summarise what left the sites in the calls since ``since`` (see :meth:`mark`)."""
        return Released.from_calls(self.transcript[since:])

    # -- construction --------------------------------------------------------------------
    @classmethod
    def from_sites(cls, sites: Iterable[Site], **kwargs: Any) -> Federation:
        """Build an in-process federation of ``sites`` (names must be unique).

        A site without an identity (signing key and roster, :mod:`fedroc.federation.roster`)
        gets one here, with a roster of this federation's sites, so that secure aggregation
        runs among them; a site that has one keeps it and aggregates only with its roster.
        """
        sites = list(sites)
        transport = InProcessTransport(sites)
        provide_identities(sites)
        return cls(transport, **kwargs)

    @classmethod
    def from_frames(cls, frames: Mapping[str, Any], **options: Unpack[TableOptions]) -> Federation:
        """In-process federation from ``{site name: pandas DataFrame}``.

        ``options`` are the columns, the sites' settings and the federation's keywords
        (:class:`TableOptions`).
        """
        return cls._from_tables(Site.from_frame, frames, options)

    @classmethod
    def from_files(
        cls, paths: Mapping[str, str | Path], **options: Unpack[TableOptions]
    ) -> Federation:
        """In-process federation from ``{site name: CSV or Parquet path}``.

        ``options`` as in :meth:`from_frames`.
        """
        return cls._from_tables(Site.from_file, paths, options)

    @classmethod
    def _from_tables(
        cls, make_site: Callable[..., Site], tables: Mapping[str, Any], options: TableOptions
    ) -> Federation:
        given: dict[str, Any] = dict(options)
        columns = Columns(**{k: given.pop(k) for k in _COLUMN_OPTIONS if k in given})
        settings = {k: given.pop(k) for k in _SITE_OPTIONS if k in given}
        audit_dir = given.pop("audit_dir", None)
        sites = [
            make_site(name, table, columns, audit=_audit_path(audit_dir, name), **settings)
            for name, table in tables.items()
        ]
        return cls.from_sites(sites, **given)

    @classmethod
    def from_toml(
        cls,
        path: str | Path,
        *,
        columns: Mapping[str, Any] | None = None,
        policy: Mapping[str, Any] | None = None,
        audit_dir: str | Path | None = None,
        **kwargs: Any,
    ) -> Federation:
        """In-process federation described by a TOML file.

        ``columns`` (label, score, score_b, cluster, pos_label) and ``policy`` settings replace the
        file's values for every site, and ``audit_dir`` puts each site's audit log at
        ``audit_dir/NAME.jsonl``: what a caller states explicitly (the command line) wins
        over the file.

        ::

            [columns]            # defaults for every site
            label = "y"
            score = "p"
            [policy]             # defaults for every site
            min_count = 5
            [sites.north]
            path = "north.csv"   # relative to this file
            audit = "audit/north.jsonl"   # the ledger goes beside it
            # noise_seed = 7     # reproducible DP noise, for simulations only
            [sites.north.policy]
            min_count = 10
            epsilon_limit = 10.0
            # secagg_key = "keys/north.key"   # the site's Ed25519 signing key (PEM) and
            # roster = "roster.toml"          # the peers it aggregates with (also top-level)

        Without ``secagg_key`` and ``roster`` a site gets a signing key and a roster of this
        file's sites when the federation is built
        (:func:`~fedroc.federation.roster.provide_identities`).
        """
        config_path = Path(path)
        try:
            with config_path.open("rb") as fh:
                config = tomllib.load(fh)
        except FileNotFoundError:
            raise InputError(f"federation file {str(config_path)!r} does not exist") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:  # binary: was a traceback
            raise InputError(
                f"federation file {str(config_path)!r} is not valid TOML: {exc}"
            ) from None
        except OSError as exc:  # a directory, no permission
            raise InputError(
                f"cannot read federation file {str(config_path)!r}: {exc.strerror or exc}"
            ) from None
        sites_cfg = config.get("sites")
        if not isinstance(sites_cfg, dict) or not sites_cfg:
            raise InputError(f"federation file {str(config_path)!r} has no [sites.NAME] tables")
        # A misspelt table ([sitse.east]) would otherwise leave its site out unnoticed.
        unknown_tables = sorted(set(config) - {"sites", "columns", "policy", "roster"})
        if unknown_tables:
            raise InputError(
                f"federation file {str(config_path)!r} has unknown key(s) {unknown_tables}; "
                "known: sites, columns, policy, roster"
            )
        base = config_path.parent
        where = repr(str(config_path))
        top_columns = _toml_table(config, "columns", f"federation file {where}")
        # The file's own policy paths (an MPC cluster, an owner key) mean its folder, as its
        # other paths do; the caller's settings stay as given.
        top_policy = policy_paths_relative_to(
            _toml_table(config, "policy", f"federation file {where}"), base
        )
        _check_shared_tables(top_columns, top_policy, where)
        sites = []
        for name, cfg in sites_cfg.items():
            if not isinstance(cfg, dict):
                raise InputError(
                    f"site {name!r} in {where} must be a table ([sites.{name}] with path = "
                    f"...); got {cfg!r}"
                )
            if "path" not in cfg:
                raise InputError(f"site {name!r} in {where} has no 'path'")
            known = {"path", "columns", "policy", "audit", "noise_seed", "secagg_key", "roster"}
            unknown = sorted(set(cfg) - known)
            if unknown:
                raise InputError(
                    f"site {name!r} in {where} has unknown key(s) {unknown}; known: "
                    f"{', '.join(sorted(known))}" + _where_it_goes(name, unknown)
                )
            context = f"site {name!r} in {where}"
            site_columns = _toml_table(cfg, "columns", context)
            cols = {**top_columns, **site_columns, **(columns or {})}
            pos_label = cols.pop("pos_label", None)
            unknown = sorted(set(cols) - set(COLUMN_SETTINGS))
            if unknown:
                raise InputError(
                    f"{context}: unknown column setting(s) "
                    f"{unknown}; known: {', '.join(COLUMN_SETTINGS)}"
                )
            site_policy_table = policy_paths_relative_to(_toml_table(cfg, "policy", context), base)
            try:
                site_policy = DisclosurePolicy.from_mapping(
                    {**top_policy, **site_policy_table, **(policy or {})}
                )
            except InputError as exc:  # which site of which file
                raise InputError(f"{context}: {exc}") from None
            path_value = _toml_path(cfg, "path", context)
            audit = _toml_path(cfg, "audit", context)
            try:
                noise_seed = check_noise_seed(cfg.get("noise_seed"))
            except InputError as exc:  # which site of which file
                raise InputError(f"{context}: {exc}") from None
            if audit_dir is not None:  # relative to the caller's directory, not the file's
                audit = str(Path(audit_dir).absolute() / f"{name}.jsonl")
            sites.append(
                Site.from_file(
                    name,
                    base / str(path_value),
                    Columns(**cols),
                    pos_label=pos_label,
                    policy=site_policy,
                    audit=None if audit is None else AuditLog(base / audit),
                    noise_seed=noise_seed,
                    identity=_toml_identity(name, cfg, config, base, config_path),
                )
            )
        return cls.from_sites(sites, **kwargs)


#: The keys of a sites file's [columns] tables.
COLUMN_SETTINGS = ("label", "score", "score_b", "cluster", "pos_label")


def _check_shared_tables(columns: Mapping[str, Any], policy: Mapping[str, Any], where: str) -> None:
    """Refuse an unknown key of a sites file's shared [columns] or [policy], naming the table.

    It was reported as the first site's ("site 'north' in ...: unknown column setting(s)"),
    sending the user to a [sites.north] table that was right.
    """
    unknown = sorted(set(columns) - set(COLUMN_SETTINGS))
    if unknown:
        raise InputError(
            f"federation file {where}, table [columns]: unknown column setting(s) {unknown}; "
            f"known: {', '.join(COLUMN_SETTINGS)}"
        )
    try:
        DisclosurePolicy.from_mapping(policy)
    except InputError as exc:  # other refusals may depend on a site's own table
        if str(exc).startswith("unknown policy setting"):
            raise InputError(f"federation file {where}, table [policy]: {exc}") from None


def _toml_table(config: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """Return the table ``config[key]`` (empty when absent); anything else is refused."""
    value = config.get(key, {})
    if not isinstance(value, dict):
        raise InputError(f"{where}: {key} must be a table ([{key}]); got {value!r}")
    return value


def _toml_path(config: Mapping[str, Any], key: str, where: str) -> str | None:
    """Return the path ``config[key]`` (None when absent); an empty or non-string one is refused."""
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: {key} must be a path; got {value!r}")
    return value


def _toml_identity(
    name: str, cfg: Mapping[str, Any], config: Mapping[str, Any], base: Path, path: Path
) -> SiteIdentity | None:
    """Return a TOML site's signing key and roster, when the file configures them."""
    key, roster = cfg.get("secagg_key"), cfg.get("roster", config.get("roster"))
    if key is None and roster is None:
        return None
    if key is None or roster is None:
        raise InputError(
            f"site {name!r} in {str(path)!r}: give both 'secagg_key' (its signing key) and "
            "'roster' (the peers it aggregates with), or neither"
        )
    return load_identity(name, base / str(key), base / str(roster))


def _audit_path(audit_dir: str | Path | None, name: str) -> Path | None:
    return None if audit_dir is None else Path(audit_dir) / f"{name}.jsonl"
