"""State of the sequestration service in a database (SQLAlchemy Core, Alembic migrations).

SQLite file by default (created 0600, WAL journal, ``synchronous=FULL``, busy timeout),
PostgreSQL by URL. Tables: test sets (image ids, labels), plans (mechanism, parameters,
limits, the custodian's seed and the subset membership), developers (token *hashes*,
budget, quotas, revoked or not), submissions (predictions), queries (every answer with
what the custodian needs to audit it, including its differential-privacy events) and
admin actions (who created, revoked, rotated or topped up what).

The schema is versioned by Alembic (``fedroc/sequester/migrations``): :class:`Store`
upgrades a database to the current schema when it opens it, including one created by
fedroc 0.1 before migrations existed.

Spending is atomic. A query runs in one transaction that starts with the conditional
``UPDATE developers SET n_queries = n_queries + 1 WHERE id = :id AND active AND
budget_remaining >= 1 AND (max_queries IS NULL OR n_queries < max_queries) RETURNING
budget_remaining, threshold_noise``: on PostgreSQL it takes the developer's row lock and
re-checks the condition after a concurrent commit; on SQLite it takes the database's write
lock. Only then is the answer decided from the state it returned and the new budget and
the answer written, and the transaction
commits before the service responds; so concurrent queries never spend a unit twice or
answer past zero, and a crash loses no answer that was sent. Submissions take the same
lock before their quota and near-duplicate checks.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    inspect,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Engine, make_url

from fedroc.exceptions import FedrocError, InputError, warn_user
from fedroc.methods.sequester import (
    Answer,
    BudgetExhausted,
    Limits,
    Mechanism,
    QuotaExceeded,
    SubsetTable,
    auc_sensitivity,
    subset_auc,
)
from fedroc.privacy import DPEvent

__all__ = [
    "DeveloperRow",
    "NotFound",
    "PlanRow",
    "Revoked",
    "Store",
    "hash_token",
    "migrate",
    "normalize_url",
]

metadata = MetaData()


def _table(name: str, *columns: Column[Any]) -> Table:
    """Declare a table of the service: its integer key ``id`` (all have one), then ``columns``."""
    return Table(
        name, metadata, Column("id", Integer, primary_key=True, autoincrement=True), *columns
    )


test_sets = _table(
    "test_sets",
    Column("name", String(200), nullable=False),
    Column("n_images", Integer, nullable=False),
    Column("n_pos", Integer, nullable=False),
    Column("image_ids", Text, nullable=False),  # JSON list of str
    Column("labels", LargeBinary, nullable=False),  # uint8 per image
    Column("created_at", Float, nullable=False),
    # Schema 0004: the set's prevalence counted with DP noise, once (NULL: not counted),
    # and that count's epsilon (see Store.count_prevalence).
    Column("counted_prevalence", Float, nullable=True),
    Column("prevalence_epsilon", Float, nullable=True),
)

plans = _table(
    "plans",
    Column("test_set_id", Integer, ForeignKey("test_sets.id"), nullable=False),
    Column("mechanism", String(40), nullable=False),
    Column("n_subsets", Integer, nullable=False),
    Column("subset_size", Integer, nullable=False),
    Column("load_factor", Float, nullable=False),
    Column("noise_rate", Float, nullable=False),  # sigma of eq. 3 (the budget)
    Column("threshold", Float, nullable=False),
    Column("budget", Float, nullable=False),
    Column("budget_units", Integer, nullable=False),
    Column("epsilon", Float, nullable=False),
    Column("prevalence", Float, nullable=False),
    Column("replace", Boolean, nullable=False),
    Column("seed", Text, nullable=False),  # the custodian's; never shown to developers
    Column("members", LargeBinary, nullable=False),  # np.save of int32 (rho, N)
    Column("created_at", Float, nullable=False),
    # Schema 0002: answers' own noise rate (NULL: noise_rate), rounding step, the AUC
    # sensitivity (NULL: computed when loaded), limits (NULL: none).
    Column("answer_noise_rate", Float, nullable=True),
    Column("answer_step", Float, nullable=False, server_default="0"),
    Column("sensitivity", Float, nullable=True),
    Column("max_queries", Integer, nullable=True),
    Column("max_submissions", Integer, nullable=True),
    Column("min_changed_images", Float, nullable=False, server_default="0"),
    # Schema 0003: epsilon of the noisy prevalence (NULL: the custodian's prevalence, or a
    # plan of 0002, which stored the test set's exact one).
    Column("prevalence_epsilon", Float, nullable=True),
    # Schema 0005: the public cap on one image's copies in a subset, which the sensitivity
    # follows from (NULL: a plan drawn before the cap, uncapped with replacement).
    Column("max_copies", Integer, nullable=True),
)

developers = _table(
    "developers",
    Column("plan_id", Integer, ForeignKey("plans.id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True, index=True),
    Column("budget_total", Integer, nullable=False),
    Column("budget_remaining", Integer, nullable=False),
    Column("n_queries", Integer, nullable=False, default=0),
    Column("threshold_noise", Float, nullable=False, default=0.0),
    Column("created_at", Float, nullable=False),
    Column("active", Boolean, nullable=False, server_default=true()),
    Column("max_queries", Integer, nullable=True),
    Column("max_submissions", Integer, nullable=True),
    Column("n_submissions", Integer, nullable=False, server_default="0"),
    Column("token_rotated_at", Float, nullable=True),
)

submissions = _table(
    "submissions",
    Column("developer_id", Integer, ForeignKey("developers.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("scores", LargeBinary, nullable=False),  # float64 in test-set order
    Column("whole_auc", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)

queries = _table(
    "queries",
    Column("developer_id", Integer, ForeignKey("developers.id"), nullable=False, index=True),
    Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=False),
    Column("subset_id", Integer, nullable=False),
    Column("answer", Float, nullable=False),
    Column("spent", Integer, nullable=False),
    Column("budget_after", Integer, nullable=False),
    # Custodian-only audit columns: exact subset AUC, reference, the noise drawn and the
    # differential-privacy events of the answer (JSON list of fedroc.privacy.DPEvent).
    Column("holdout", Float, nullable=False),
    Column("reference", Float, nullable=False),
    Column("noise", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("events", Text, nullable=False, server_default="[]"),
)

admin_actions = _table(
    "admin_actions",
    Column("created_at", Float, nullable=False),
    Column("action", String(40), nullable=False),
    Column("target", String(80), nullable=False),
    Column("details", Text, nullable=False),  # JSON object; never a token
)

_d = developers.c
# The statements of a query, built once (building them costs more than running them).
# The first takes the developer's row (or the database's write lock) and re-checks the
# budget, the quota and the token under it; RETURNING gives the state it locked.
_SPEND = (
    update(developers)
    .where(_d.id == bindparam("dev"), _d.active, _d.token_hash == bindparam("token"))
    .where(_d.budget_remaining >= 1)
    .where(or_(_d.max_queries.is_(None), _d.n_queries < _d.max_queries))
    .values(n_queries=_d.n_queries + 1)
    .returning(_d.budget_remaining, _d.threshold_noise, _d.n_queries)
)
_SETTLE = (
    update(developers)
    .where(_d.id == bindparam("dev"), _d.budget_remaining == bindparam("before"))
    .values(budget_remaining=bindparam("after"), threshold_noise=bindparam("gamma"))
)

MIGRATIONS = Path(__file__).parent / "migrations"
MAX_COUNT = 2**31 - 1  # INTEGER columns are 32-bit in PostgreSQL
# Seconds a worker trusts its memory of a token's developer before asking the database
# again: a revoke or rotation on another worker reaches this one's reads within it (its
# spending, never: the query's conditional UPDATE matches the token's hash, S3).
TOKEN_TTL = 5.0

#: SQLite's ``synchronous`` settings the store accepts.
SQLITE_SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


class NotFound(InputError):
    """A referenced object does not exist (or belongs to someone else)."""


class Revoked(FedrocError):
    """The developer's token was revoked or rotated while the request was running."""


class Conflict(FedrocError):
    """What was asked for clashes with a stored object (a developer name taken on a plan)."""


class BadDatabase(InputError):
    """The database URL or file path (``db``, as given) cannot be used.

    Typed so that a caller naming its own option (the CLI's ``--db``) need not read the
    message to know what it is about.
    """

    def __init__(self, message: str, *, db: str) -> None:
        super().__init__(message)
        self.db = db


def _new_id(result: Any) -> int:
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def hash_token(token: str) -> str:
    """SHA-256 of a token: tokens are 256-bit random strings, so no salt or slow hash."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return "fsq_" + secrets.token_urlsafe(32)


def normalize_url(db: str) -> str:
    """Turn a database URL, or a file path, into a URL (``sqlite:///PATH`` for a path)."""
    if "://" in db:
        url = make_url(db)
        if url.get_backend_name() not in ("sqlite", "postgresql", "postgres"):
            raise BadDatabase(
                f"database URL scheme {url.drivername!r} is not supported: give a SQLite file "
                "path, sqlite:///PATH or postgresql://...",
                db=db,
            )
        if url.drivername in ("postgresql", "postgres"):
            # psycopg 3 is the driver fedroc installs (extra "postgres").
            url = url.set(drivername="postgresql+psycopg")
        return url.render_as_string(hide_password=False)
    return f"sqlite:///{db}"


_SQLITE_HEADER = b"SQLite format 3\x00"


def _private_sqlite_file(path: str) -> None:
    """Create the database file 0600 before SQLite does, or tighten an existing one.

    A new file is made in a folder that exists only (InputError naming the path otherwise).

    The file holds labels, exact AUCs and the seed of the subsets. SQLite gives its -wal
    and -shm files the permissions of the database file.
    """
    p = Path(path)
    if not p.exists():
        # The folder is the operator's to make: made here, a typo in it (/srv/fedrco/...)
        # started the service on a new, empty database beside the real one.
        if not p.parent.is_dir():
            what = "is not a folder" if p.parent.exists() else "does not exist"
            raise BadDatabase(
                f"database path {str(p)!r}: its folder {str(p.parent)!r} {what}; a new "
                "database is made in a folder that exists (check the path, or make the folder)",
                db=path,
            )
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        return
    # Checked before the chmod below, which made a directory 600 (--db ~ locked the home
    # directory) and tightened files that were never fedroc's.
    if p.is_dir():
        raise BadDatabase(f"database path {str(p)!r} is a directory, not a SQLite file", db=path)
    try:
        with p.open("rb") as fh:
            head = fh.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise BadDatabase(
            f"database path {str(p)!r} cannot be read: {exc.strerror}", db=path
        ) from None
    if head and head != _SQLITE_HEADER:  # an empty file is a new database to SQLite
        raise BadDatabase(
            f"database path {str(p)!r} is not a SQLite database (it does not start with "
            "'SQLite format 3'); give a new path or a fedroc database",
            db=path,
        )
    mode = stat.S_IMODE(p.stat().st_mode)
    if mode & 0o077:
        os.chmod(p, 0o600)
        warn_user(
            f"the database file {str(p)!r} was readable by others (mode {mode:o}); "
            "its mode is now 600",
            UserWarning,
        )


def migrate(engine: Engine) -> str:
    """Upgrade the database to the current schema (Alembic ``upgrade head``).

    A database created by fedroc 0.1 (tables, no ``alembic_version``) is stamped with the
    first revision, which is its schema, and upgraded from there. Returns the revision.
    """
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        tables = set(inspect(conn).get_table_names())
        if "test_sets" in tables and "alembic_version" not in tables:
            command.stamp(cfg, "0001")
        command.upgrade(cfg, "head")
        rev = MigrationContext.configure(conn).get_current_revision()
    return str(rev)


@dataclass(frozen=True)
class PlanRow:
    """A plan with what answering needs (cached: plans never change).

    ``id`` is 0 for a plan not stored yet (:meth:`Store.add_plan` gives it one).
    """

    test_set_id: int
    mechanism: Mechanism
    labels: NDArray[np.bool_]
    table: SubsetTable
    budget: float
    budget_units: int
    epsilon: float
    prevalence: float
    replace: bool
    seed: str
    noise_rate: float
    sensitivity: float
    limits: Limits
    id: int = 0
    prevalence_epsilon: float | None = None

    def answers_epsilon(self, budget_units: int | None = None) -> float | None:
        """Epsilon in one image's label of the answers' whole budget (None: not DP).

        The plan's ``budget_units`` by default, or a developer's (after top-ups).
        """
        units = self.budget_units if budget_units is None else budget_units
        return self.mechanism.epsilon(units, self.sensitivity)

    def epsilon_guarantee(self, budget_units: int | None = None) -> float | None:
        """Epsilon in one image's label of all a developer sees: answers and prevalence.

        For the plan's ``budget_units`` by default, or a developer's (after top-ups).
        """
        eps = self.answers_epsilon(budget_units)
        if eps is None or self.prevalence_epsilon is None:
            return eps
        return eps + self.prevalence_epsilon

    def public(self) -> dict[str, Any]:
        """Return what a developer may know about the plan.

        The plan's settings have the names of their columns in the ``plans`` table.
        """
        return {
            "plan_id": self.id,
            "mechanism": self.mechanism.name,
            "n_images": self.table.n_images,
            "n_subsets": self.table.n_subsets,
            "subset_size": self.table.subset_size,
            "load_factor": self.table.load_factor,
            "noise_rate": self.noise_rate,
            "answer_noise_rate": self.mechanism.noise_rate,
            "threshold": self.mechanism.threshold,
            "answer_step": self.mechanism.step,
            "budget": self.budget,
            "budget_units": self.budget_units,
            "epsilon": self.epsilon,
            "epsilon_guarantee": self.epsilon_guarantee(),
            "prevalence": self.prevalence,
            "prevalence_epsilon": self.prevalence_epsilon,
            "replace": self.replace,
            "max_copies": self.table.max_copies,
            "min_changed_images": self.limits.min_changed_images,
        }

    def columns(self) -> dict[str, Any]:
        """Return the plan's row of the ``plans`` table (without its id and creation time).

        The public settings, and what only the custodian sees: the test set, the seed and
        the subsets' members, the AUC's sensitivity and the limits.
        """
        settings = {k: v for k, v in self.public().items() if k in plans.c}
        return {
            **settings,
            "test_set_id": self.test_set_id,
            "seed": self.seed,
            "members": self.table.members_bytes(),
            "sensitivity": self.sensitivity,
            **_limits_dict(self.limits),
        }


@dataclass(frozen=True)
class DeveloperRow:
    """A developer as a request sees it: id, plan and name (never the token).

    ``token_hash`` is the hash of the token the request came with: spending and submitting
    match it in their conditional UPDATE, so that a token rotated by another worker, whose
    cache still holds it, spends nothing (S3).
    """

    id: int
    plan_id: int
    name: str
    token_hash: str = ""


class Store:
    """Database access for the service; safe to share between threads.

    Opening a store brings the database's schema up to date (:func:`migrate`).

    Parameters
    ----------
    url : str
        A database URL, or a file path for SQLite (:func:`normalize_url`).
    sqlite_synchronous : {"FULL", "NORMAL", "EXTRA"}, default "FULL"
        SQLite's ``synchronous`` setting (ignored for other databases).
    """

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            if sqlite_synchronous.upper() not in SQLITE_SYNCHRONOUS:
                raise InputError(
                    f"sqlite_synchronous must be FULL, NORMAL or EXTRA; got {sqlite_synchronous!r}"
                )
            if parsed.database and parsed.database != ":memory:":
                _private_sqlite_file(parsed.database)
            kwargs.update(
                connect_args={"timeout": 60.0, "check_same_thread": False},
                pool_size=16,
                max_overflow=48,
            )
        else:
            kwargs.update(pool_size=16, max_overflow=48, pool_pre_ping=True)
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            self._sqlite_setup(self.engine, sqlite_synchronous.upper())
        self.revision = migrate(self.engine)
        self._plans: dict[int, PlanRow] = {}
        self._devs: dict[str, tuple[DeveloperRow, float]] = {}  # token hash -> (row, when)
        self._subs: OrderedDict[int, tuple[int, NDArray[np.float64], float]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _sqlite_setup(engine: Engine, synchronous: str) -> None:
        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take transaction control from the driver so that BEGIN is issued exactly
            # where SQLAlchemy begins (SQLAlchemy's documented pysqlite recipe).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={synchronous}")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN")

    def close(self) -> None:
        """Close the database connections."""
        self.engine.dispose()

    # ------------------------------------------------------------------ admin audit

    @staticmethod
    def _record(conn: Connection, action: str, target: str, **details: Any) -> None:
        conn.execute(
            insert(admin_actions).values(
                created_at=time.time(),
                action=action,
                target=target,
                details=json.dumps(details, sort_keys=True),
            )
        )

    def actions(self) -> list[dict[str, Any]]:
        """Every custodian action, oldest first (details as a dict)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(admin_actions).order_by(admin_actions.c.id)).all()
        return [{**dict(r._mapping), "details": json.loads(r.details)} for r in rows]

    # ------------------------------------------------------------------ custodian side

    def add_test_set(self, name: str, image_ids: Sequence[str], labels: NDArray[np.bool_]) -> int:
        """Store a test set (image ids in order, labels) and return its id (audited)."""
        with self.engine.begin() as conn:
            res = conn.execute(
                insert(test_sets).values(
                    name=name,
                    n_images=len(image_ids),
                    n_pos=int(labels.sum()),
                    image_ids=json.dumps(list(image_ids)),
                    labels=labels.astype(np.uint8).tobytes(),
                    created_at=time.time(),
                )
            )
            tid = _new_id(res)
            self._record(conn, "create-test-set", f"test-set/{tid}", name=name,
                         n_images=len(image_ids), n_pos=int(labels.sum()))  # fmt: skip
            return tid

    def test_sets(self) -> list[dict[str, Any]]:
        """List the test sets (id, name, sizes, creation time), oldest first."""
        cols = [test_sets.c.id.label("test_set_id"), test_sets.c.name, test_sets.c.n_images,
                test_sets.c.n_pos, test_sets.c.created_at]  # fmt: skip
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(*cols).order_by(test_sets.c.id))]

    def test_set(self, test_set_id: int) -> tuple[str, tuple[str, ...], NDArray[np.bool_]]:
        """Return a test set's name, image ids and labels.

        Raises
        ------
        NotFound
            When no test set has this id.
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(test_sets).where(test_sets.c.id == test_set_id)).first()
        if row is None:
            raise NotFound(f"test set {test_set_id} does not exist")
        ids = tuple(json.loads(row.image_ids))
        labels = np.frombuffer(row.labels, dtype=np.uint8).astype(bool)
        return row.name, ids, labels

    def add_plan(self, plan: PlanRow, *, events: Sequence[DPEvent] = ()) -> int:
        """Store a sequestration plan of a test set and return its id (audited).

        ``events`` are differentially private releases of its test set the plan made,
        recorded in its audit action (the noisy prevalence is not one: its event is recorded
        with the count, :meth:`count_prevalence`).
        """
        table = plan.table
        with self.engine.begin() as conn:
            res = conn.execute(insert(plans).values(**plan.columns(), created_at=time.time()))
            pid = _new_id(res)
            self._record(conn, "create-plan", f"plan/{pid}", test_set_id=plan.test_set_id,
                         mechanism=plan.mechanism.name, budget_units=plan.budget_units,
                         n_subsets=table.n_subsets, subset_size=table.subset_size,
                         events=[asdict(e) for e in events])  # fmt: skip
            return pid

    def plans(self, test_set_id: int | None = None) -> list[dict[str, Any]]:
        """List the plans (what developers see, plus the test set and limits), oldest first."""
        q = select(plans.c.id).order_by(plans.c.id)
        if test_set_id is not None:
            q = q.where(plans.c.test_set_id == test_set_id)
        with self.engine.connect() as conn:
            ids = [int(r.id) for r in conn.execute(q)]
        out = []
        for pid in ids:
            p = self.plan(pid)
            out.append({**p.public(), "test_set_id": p.test_set_id, **_limits_dict(p.limits)})
        return out

    def counted_prevalence(self, test_set_id: int) -> tuple[float, float] | None:
        """Return the test set's noisy prevalence and its epsilon, or None if never counted.

        A test set's count of positives is released with noise once: every plan that draws
        at a counted prevalence reuses it, so that plans cannot be averaged (R40).
        """
        q = select(test_sets.c.counted_prevalence, test_sets.c.prevalence_epsilon).where(
            test_sets.c.id == test_set_id
        )
        with self.engine.connect() as conn:
            row = conn.execute(q).first()
        if row is None or row.counted_prevalence is None:
            return None
        return float(row.counted_prevalence), float(row.prevalence_epsilon)

    def count_prevalence(
        self,
        test_set_id: int,
        prevalence: float,
        epsilon: float,
        *,
        events: Sequence[DPEvent] = (),
    ) -> tuple[float, float, bool]:
        """Store the test set's noisy prevalence unless one is stored; return the stored one.

        One conditional UPDATE (``WHERE counted_prevalence IS NULL``), atomic in SQLite and
        PostgreSQL: of two workers that counted at once, one stores its count and the other
        gets it back (R40b). Returns ``(prevalence, epsilon, stored)``, ``stored`` True when
        this call's count is the one kept (its noise was released).

        ``events`` are the count's DP events: recorded with it, in the same transaction, as
        a ``count-prevalence`` audit action, so that the release stays in the audit whatever
        becomes of the plan that counted it (R40c: a plan that failed after the count left
        it on the set with no event).
        """
        with self.engine.begin() as conn:
            res = conn.execute(
                update(test_sets)
                .where(test_sets.c.id == test_set_id, test_sets.c.counted_prevalence.is_(None))
                .values(counted_prevalence=float(prevalence), prevalence_epsilon=float(epsilon))
            )
            if res.rowcount == 1:
                self._record(conn, "count-prevalence", f"test-set/{test_set_id}",
                             test_set_id=test_set_id, prevalence_epsilon=float(epsilon),
                             events=[asdict(e) for e in events])  # fmt: skip
        if res.rowcount == 1:
            return float(prevalence), float(epsilon), True
        kept = self.counted_prevalence(test_set_id)
        if kept is None:
            raise NotFound(f"test set {test_set_id} does not exist")
        return kept[0], kept[1], False

    def plan(self, plan_id: int) -> PlanRow:
        """Load a plan (cached in this process after the first load).

        Raises
        ------
        NotFound
            When no plan has this id.
        """
        cached = self._plans.get(plan_id)
        if cached is not None:
            return cached
        with self.engine.connect() as conn:
            row = conn.execute(select(plans).where(plans.c.id == plan_id)).first()
        if row is None:
            raise NotFound(f"plan {plan_id} does not exist")
        _, ids, labels = self.test_set(row.test_set_id)
        table = SubsetTable(ids, SubsetTable.members_from_bytes(row.members), row.max_copies)
        sigma_a = row.noise_rate if row.answer_noise_rate is None else row.answer_noise_rate
        mech = Mechanism(row.mechanism, threshold=row.threshold, noise_rate=sigma_a,
                         step=row.answer_step)  # fmt: skip
        # Plans of schema 0001 did not store the sensitivity: it follows from the table.
        sens = auc_sensitivity(table, labels) if row.sensitivity is None else row.sensitivity
        limits = Limits(row.max_queries, row.max_submissions, row.min_changed_images)
        plan = PlanRow(
            row.test_set_id, mech, labels, table, row.budget, row.budget_units, row.epsilon,
            row.prevalence, bool(row.replace), row.seed, row.noise_rate, sens, limits, row.id,
            row.prevalence_epsilon,
        )  # fmt: skip
        with self._lock:
            self._plans[plan_id] = plan
        return plan

    def add_developer(
        self, plan_id: int, name: str, *, threshold_noise: float | Callable[[int], float]
    ) -> tuple[int, str, int]:
        """Create a developer; returns ``(id, token, budget units)``. Only the hash is stored.

        A name is unique on its plan (:class:`Conflict` for one taken, a revoked developer's
        included): two developers of one name held two budgets the audit could not tell apart.

        ``threshold_noise`` is Thresholdout's initial noisy threshold, or a function of the
        new developer's id that draws it (a seeded server's draw is named by the id).
        """
        plan = self.plan(plan_id)
        token = new_token()
        with self.engine.begin() as conn:
            # The write first: it holds the plan's row (the write lock on SQLite) until the
            # commit, so two requests with one name cannot both find it free. (A column no
            # key refers to, set to itself.)
            conn.execute(
                update(plans).where(plans.c.id == plan_id).values(created_at=plans.c.created_at)
            )
            taken = conn.execute(
                select(developers.c.id).where(
                    developers.c.plan_id == plan_id, developers.c.name == name
                )
            ).first()
            if taken is not None:
                did = taken.id
                raise Conflict(
                    f"developer name {name!r} is taken on plan {plan_id} (developer {did}); "
                    f"give another name, or top up (POST /v1/developers/{did}/top-up) or "
                    f"rotate (POST /v1/developers/{did}/rotate) the developer who has it"
                )
            res = conn.execute(
                insert(developers).values(
                    plan_id=plan_id,
                    name=name,
                    token_hash=hash_token(token),
                    budget_total=plan.budget_units,
                    budget_remaining=plan.budget_units,
                    n_queries=0,
                    threshold_noise=0.0 if callable(threshold_noise) else threshold_noise,
                    max_queries=plan.limits.max_queries,
                    max_submissions=plan.limits.max_submissions,
                    created_at=time.time(),
                )
            )
            dev_id = _new_id(res)
            if callable(threshold_noise):
                conn.execute(
                    update(developers)
                    .where(developers.c.id == dev_id)
                    .values(threshold_noise=float(threshold_noise(dev_id)))
                )
            self._record(conn, "create-developer", f"developer/{dev_id}", plan_id=plan_id,
                         name=name)  # fmt: skip
            return dev_id, token, plan.budget_units

    def developers(self, plan_id: int | None = None) -> list[dict[str, Any]]:
        """List the developers with their budgets and quotas (never the token hashes)."""
        cols = [
            developers.c.id, developers.c.plan_id, developers.c.name, developers.c.active,
            developers.c.budget_total, developers.c.budget_remaining, developers.c.n_queries,
            developers.c.max_queries, developers.c.n_submissions, developers.c.max_submissions,
            developers.c.created_at, developers.c.token_rotated_at,
        ]  # fmt: skip
        q = select(*cols).order_by(developers.c.id)
        if plan_id is not None:
            q = q.where(developers.c.plan_id == plan_id)
        with self.engine.connect() as conn:
            rows = [{**dict(r._mapping), "active": bool(r.active)} for r in conn.execute(q)]
        for row in rows:  # what all the developer's budget units guarantee (top-ups included)
            row["epsilon_guarantee"] = self.plan(row["plan_id"]).epsilon_guarantee(
                row["budget_total"]
            )
        return rows

    def _forget_developer(self, developer_id: int) -> None:
        with self._lock:
            for h in [h for h, (d, _) in self._devs.items() if d.id == developer_id]:
                del self._devs[h]

    def _developer_exists(self, conn: Connection, developer_id: int) -> Any:
        row = conn.execute(select(developers).where(developers.c.id == developer_id)).first()
        if row is None:
            raise NotFound(f"developer {developer_id} does not exist")
        return row

    def revoke_developer(self, developer_id: int) -> None:
        """Revoke a developer's token: every later request with it gets 401."""
        with self.engine.begin() as conn:
            # The write first (S2): a read first took a snapshot that a developer's query
            # committing meanwhile made stale, and SQLite refused the write (database is
            # locked) instead of waiting.
            done = conn.execute(
                update(developers).where(developers.c.id == developer_id).values(active=False)
            )
            if done.rowcount != 1:
                raise NotFound(f"developer {developer_id} does not exist")
            self._record(conn, "revoke-developer", f"developer/{developer_id}")
        self._forget_developer(developer_id)

    def rotate_token(self, developer_id: int) -> tuple[str, bool]:
        """Issue a new token for a developer, re-activating a revoked one.

        The old token stops working. Returns the token and whether the developer had been
        revoked (and is active again).
        """
        token = new_token()
        d = developers.c
        values = {"token_hash": hash_token(token), "active": True, "token_rotated_at": time.time()}
        with self.engine.begin() as conn:
            # Writes only, as revoke_developer (S2): the first takes a revoked developer
            # (so the answer and the audit can say they are active again), the second any.
            done = conn.execute(
                update(developers).where(d.id == developer_id, ~d.active).values(**values)
            )
            reactivated = done.rowcount == 1
            if not reactivated:
                done = conn.execute(update(developers).where(d.id == developer_id).values(**values))
            if done.rowcount != 1:
                raise NotFound(f"developer {developer_id} does not exist")
            self._record(conn, "rotate-token", f"developer/{developer_id}", reactivated=reactivated)
        self._forget_developer(developer_id)
        return token, reactivated

    def top_up(
        self,
        developer_id: int,
        *,
        budget_units: int = 0,
        queries: int = 0,
        submissions: int = 0,
    ) -> dict[str, Any]:
        """Add budget units and quota to a developer (a NULL quota stays unlimited)."""
        d = developers.c
        limits = [
            ("budget_units", d.budget_total, budget_units),
            ("queries", d.max_queries, queries),
            ("submissions", d.max_submissions, submissions),
        ]
        with self.engine.begin() as conn:
            # The write first, as revoke_developer (S2); the 32-bit limits are conditions of
            # the UPDATE (a NULL quota stays unlimited), checked again below if it fails.
            done = conn.execute(
                update(developers)
                .where(d.id == developer_id)
                .where(*(or_(col.is_(None), col <= MAX_COUNT - add) for _, col, add in limits))
                .values(
                    budget_total=d.budget_total + budget_units,
                    budget_remaining=d.budget_remaining + budget_units,
                    max_queries=d.max_queries + queries,
                    max_submissions=d.max_submissions + submissions,
                )
            )
            if done.rowcount != 1:
                row = self._developer_exists(conn, developer_id)
                for name, col, add in limits:
                    now = row._mapping[col.name]
                    if now is not None and now + add > MAX_COUNT:
                        raise InputError(
                            f"{name}: topping up {add} would pass {MAX_COUNT} (32-bit counters)"
                        )
                raise RuntimeError(f"developer {developer_id} was not topped up")
            self._record(conn, "top-up", f"developer/{developer_id}", budget_units=budget_units,
                         queries=queries, submissions=submissions)  # fmt: skip
        return next(r for r in self.developers() if r["id"] == developer_id)

    # ------------------------------------------------------------------ developer side

    def cached_developer(self, token_hash: str) -> DeveloperRow | None:
        """Return the active developer of a token hash this process saw lately (no I/O).

        Lately: in the last :data:`TOKEN_TTL` seconds; else None, and the caller asks the
        database (:meth:`developer_by_token`).
        """
        entry = self._devs.get(token_hash)
        if entry is None or time.monotonic() - entry[1] > TOKEN_TTL:
            return None
        return entry[0]

    def developer_by_token(self, token: str) -> DeveloperRow | None:
        """Find the active developer holding ``token``, or None (unknown, revoked or rotated)."""
        h = hash_token(token)
        cached = self.cached_developer(h)
        if cached is not None:
            return cached
        with self.engine.connect() as conn:
            row = conn.execute(
                select(developers.c.id, developers.c.plan_id, developers.c.name).where(
                    developers.c.token_hash == h, developers.c.active
                )
            ).first()
        if row is None:
            with self._lock:
                self._devs.pop(h, None)
            return None
        dev = DeveloperRow(row.id, row.plan_id, row.name, h)
        with self._lock:
            self._devs[h] = (dev, time.monotonic())
        return dev

    def _developer_columns(self, developer_id: int, *names: str) -> dict[str, Any]:
        with self.engine.connect() as conn:
            columns = [developers.c[name] for name in names]
            row = conn.execute(select(*columns).where(developers.c.id == developer_id)).one()
        return dict(row._mapping)

    def budget(self, developer_id: int) -> dict[str, Any]:
        """Return a developer's budget units (total, remaining) and queries answered."""
        return self._developer_columns(
            developer_id, "budget_total", "budget_remaining", "n_queries"
        )

    def quota(self, developer_id: int) -> dict[str, Any]:
        """Return a developer's queries and submissions made, and their limits (None: unlimited)."""
        return self._developer_columns(
            developer_id, "n_queries", "max_queries", "n_submissions", "max_submissions"
        )

    def add_submission(
        self,
        developer: DeveloperRow,
        plan: PlanRow,
        name: str,
        scores: NDArray[np.float64],
        whole_auc: float,
    ) -> int:
        """Store a submission after its quota and near-duplicate checks (atomically)."""
        d = developers.c
        with self.engine.begin() as conn:
            got = conn.execute(
                update(developers)
                .where(d.id == developer.id, d.active, d.token_hash == developer.token_hash)
                .where((d.max_submissions.is_(None)) | (d.n_submissions < d.max_submissions))
                .values(n_submissions=d.n_submissions + 1)
            )
            if got.rowcount != 1:
                row = self._developer_exists(conn, developer.id)
                if not row.active or row.token_hash != developer.token_hash:
                    raise Revoked("this token was revoked")
                raise QuotaExceeded(
                    f"submission quota used: {row.n_submissions} of {row.max_submissions} "
                    "submissions made; ask the custodian for more"
                )
            if plan.limits.min_changed_images > 0:
                earlier = [
                    (int(r.id), np.frombuffer(r.scores, dtype="<f8"))
                    for r in conn.execute(
                        select(submissions.c.id, submissions.c.scores)
                        .where(submissions.c.developer_id == developer.id)
                        .order_by(submissions.c.id)
                    )
                ]
                # The quota was checked above under the lock; this checks closeness only.
                Limits(None, None, plan.limits.min_changed_images).check_submission(scores, earlier)
            res = conn.execute(
                insert(submissions).values(
                    developer_id=developer.id,
                    name=name,
                    scores=np.ascontiguousarray(scores, dtype="<f8").tobytes(),
                    whole_auc=whole_auc,
                    created_at=time.time(),
                )
            )
            return _new_id(res)

    def submission(
        self, developer_id: int, submission_id: int
    ) -> tuple[NDArray[np.float64], float]:
        """Scores and whole-set AUC of one of *this developer's* submissions."""
        cached = self._subs.get(submission_id)
        if cached is None:
            with self.engine.connect() as conn:
                row = conn.execute(
                    select(
                        submissions.c.developer_id, submissions.c.scores, submissions.c.whole_auc
                    ).where(submissions.c.id == submission_id)
                ).first()
            if row is not None:
                scores = np.frombuffer(row.scores, dtype="<f8")
                cached = (row.developer_id, scores, row.whole_auc)
                with self._lock:
                    self._subs[submission_id] = cached
                    while len(self._subs) > 256:
                        self._subs.popitem(last=False)
        if cached is None or cached[0] != developer_id:
            # Someone else's submission is reported as absent: no probing of other ids.
            raise NotFound(f"submission {submission_id} does not exist")
        return cached[1], cached[2]

    def list_submissions(self, developer_id: int) -> list[dict[str, Any]]:
        """List a developer's submissions (id, name, creation time), oldest first."""
        q = (
            select(submissions.c.id, submissions.c.name, submissions.c.created_at)
            .where(submissions.c.developer_id == developer_id)
            .order_by(submissions.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def answer_query(
        self,
        developer: DeveloperRow,
        plan: PlanRow,
        submission_id: int,
        subset_id: int,
        *,
        reference: float | None = None,
        rng: np.random.Generator | None = None,
        rng_for: Callable[[int], np.random.Generator | None] | None = None,
    ) -> tuple[int, Answer]:
        """Decide, record and commit one answer; raises past the budget or the quota.

        ``rng`` seeds the answer's noise (tests); ``rng_for(n)`` gives it from the number
        ``n`` of the developer's queries, this one included, read under the developer's
        lock: a seeded server names each draw by it, so that no two answers share noise
        (Q1). Neither: OpenDP's noise from the system's entropy.
        """
        scores, whole_auc = self.submission(developer.id, submission_id)
        members = plan.table.row(subset_id)
        ref = plan.mechanism.comparison(reference, whole_auc)  # ReferenceRequired
        # The AUC is computed outside the transaction: it depends on nothing that changes.
        holdout = subset_auc(members, plan.labels, scores)
        with self.engine.begin() as conn:
            state = conn.execute(
                _SPEND, {"dev": developer.id, "token": developer.token_hash}
            ).first()
            if state is None:
                self._refusal(conn, developer)
            if rng_for is not None:
                rng = rng_for(int(state.n_queries))
            ans = plan.mechanism.answer(
                holdout,
                ref,
                budget=int(state.budget_remaining),
                threshold_noise=float(state.threshold_noise),
                sensitivity=plan.sensitivity,
                rng=rng,
            )
            # Below Thresholdout's threshold nothing changes: the common case writes no row.
            if ans.spent or ans.threshold_noise != state.threshold_noise:
                done = conn.execute(
                    _SETTLE,
                    {"dev": developer.id, "before": state.budget_remaining,
                     "after": ans.budget_after, "gamma": ans.threshold_noise},
                )  # fmt: skip
                if done.rowcount != 1:  # cannot happen while we hold the row's lock
                    raise RuntimeError("developer budget changed under a held lock")
            res = conn.execute(
                insert(queries),
                {
                    "developer_id": developer.id,
                    "submission_id": submission_id,
                    "subset_id": int(subset_id),
                    "answer": ans.value,
                    "spent": ans.spent,
                    "budget_after": ans.budget_after,
                    "holdout": ans.holdout,
                    "reference": ans.reference,
                    "noise": ans.noise,
                    "events": json.dumps([asdict(e) for e in ans.events]),
                    "created_at": time.time(),
                },
            )
            query_id = _new_id(res)
        return query_id, ans

    def _refusal(self, conn: Connection, developer: DeveloperRow) -> NoReturn:
        row = self._developer_exists(conn, developer.id)
        if not row.active or row.token_hash != developer.token_hash:
            raise Revoked("this token was revoked")
        if row.budget_remaining < 1:
            raise BudgetExhausted(
                f"budget spent: developer {developer.name!r} has used every unit of the "
                "budget of this plan; the test set answers no more queries: ask the custodian "
                "for a top-up"
            )
        raise QuotaExceeded(
            f"query quota used: {row.n_queries} of {row.max_queries} queries answered; "
            "ask the custodian for more"
        )

    def history(self, developer_id: int) -> list[dict[str, Any]]:
        """List the answers a developer received, oldest first (no exact values, no noise)."""
        q = (
            select(
                queries.c.id.label("query_id"),
                queries.c.submission_id,
                queries.c.subset_id,
                queries.c.answer.label("auc"),
                queries.c.budget_after.label("budget_remaining"),
                queries.c.created_at,
            )
            .where(queries.c.developer_id == developer_id)
            .order_by(queries.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def audit(self, developer_id: int) -> list[dict[str, Any]]:
        """Custodian view of a developer's queries, with exact values, noise and events."""
        q = select(queries).where(queries.c.developer_id == developer_id).order_by(queries.c.id)
        with self.engine.connect() as conn:
            return [{**dict(r._mapping), "events": json.loads(r.events)} for r in conn.execute(q)]

    AUDIT_COLUMNS = (
        "query_id", "created_at", "plan_id", "developer_id", "developer", "submission_id",
        "subset_id", "answer", "spent", "budget_after", "holdout", "reference", "noise",
        "epsilon", "events",
    )  # fmt: skip

    def audit_rows(
        self, *, plan_id: int | None = None, developer_id: int | None = None
    ) -> Iterator[tuple[Any, ...]]:
        """Every query for the CSV export, oldest first (columns :attr:`AUDIT_COLUMNS`)."""
        q = (
            select(
                queries.c.id,
                queries.c.created_at,
                developers.c.plan_id,
                developers.c.id,
                developers.c.name,
                queries.c.submission_id,
                queries.c.subset_id,
                queries.c.answer,
                queries.c.spent,
                queries.c.budget_after,
                queries.c.holdout,
                queries.c.reference,
                queries.c.noise,
                queries.c.events,
            )
            .join(developers, developers.c.id == queries.c.developer_id)
            .order_by(queries.c.id)
        )
        if plan_id is not None:
            q = q.where(developers.c.plan_id == plan_id)
        if developer_id is not None:
            q = q.where(developers.c.id == developer_id)
        with self.engine.connect() as conn:
            for r in conn.execution_options(yield_per=1000).execute(q):
                events = json.loads(r[-1])
                epsilon = sum(e["epsilon"] for e in events)
                yield (*r[:-1], epsilon, r[-1])

    def counts(self) -> dict[str, int]:
        """Count the rows of every table (for the operator's status)."""
        with self.engine.connect() as conn:
            return {
                t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in (test_sets, plans, developers, submissions, queries, admin_actions)
            }


def _limits_dict(limits: Limits) -> dict[str, Any]:
    return {"max_queries": limits.max_queries, "max_submissions": limits.max_submissions}
