"""State of the sequestration service in a database (SQLAlchemy Core).

SQLite file by default (WAL journal, ``synchronous=FULL``, busy timeout), PostgreSQL by
URL. Tables: test sets (image ids, labels), plans (mechanism, parameters, the custodian's
seed and the subset membership), developers (token *hashes*, budget), submissions
(predictions) and queries (every answer with what the custodian needs to audit it).

Budget spending is atomic. A query runs in one transaction that starts with the
conditional ``UPDATE developers SET n_queries = n_queries + 1 WHERE id = :id AND
budget_remaining >= 1``: on PostgreSQL it takes the developer's row lock and re-checks the
condition after a concurrent commit; on SQLite it takes the database's write lock. Only
then is the state read, the answer decided and the new budget and the answer written, and
the transaction commits before the service responds; so concurrent queries never spend a
unit twice or answer past zero, and a crash loses no answer that was sent.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine, make_url

from fedroc.exceptions import InputError
from fedroc.sequester.engine import (
    Answer,
    BudgetExhausted,
    Mechanism,
    SubsetTable,
    subset_auc,
)

__all__ = ["DeveloperRow", "NotFound", "PlanRow", "Store", "hash_token", "normalize_url"]

metadata = MetaData()

test_sets = Table(
    "test_sets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),
    Column("n_images", Integer, nullable=False),
    Column("n_pos", Integer, nullable=False),
    Column("image_ids", Text, nullable=False),  # JSON list of str
    Column("labels", LargeBinary, nullable=False),  # uint8 per image
    Column("created_at", Float, nullable=False),
)

plans = Table(
    "plans",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("test_set_id", Integer, ForeignKey("test_sets.id"), nullable=False),
    Column("mechanism", String(40), nullable=False),
    Column("n_subsets", Integer, nullable=False),
    Column("subset_size", Integer, nullable=False),
    Column("load_factor", Float, nullable=False),
    Column("noise_rate", Float, nullable=False),
    Column("threshold", Float, nullable=False),
    Column("budget", Float, nullable=False),
    Column("budget_units", Integer, nullable=False),
    Column("epsilon", Float, nullable=False),
    Column("prevalence", Float, nullable=False),
    Column("replace", Boolean, nullable=False),
    Column("seed", Text, nullable=False),  # the custodian's; never shown to developers
    Column("members", LargeBinary, nullable=False),  # np.save of int32 (rho, N)
    Column("created_at", Float, nullable=False),
)

developers = Table(
    "developers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("plan_id", Integer, ForeignKey("plans.id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True, index=True),
    Column("budget_total", Integer, nullable=False),
    Column("budget_remaining", Integer, nullable=False),
    Column("n_queries", Integer, nullable=False, default=0),
    Column("threshold_noise", Float, nullable=False, default=0.0),
    Column("created_at", Float, nullable=False),
)

submissions = Table(
    "submissions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("developer_id", Integer, ForeignKey("developers.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("scores", LargeBinary, nullable=False),  # float64 in test-set order
    Column("whole_auc", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)

queries = Table(
    "queries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("developer_id", Integer, ForeignKey("developers.id"), nullable=False, index=True),
    Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=False),
    Column("subset_id", Integer, nullable=False),
    Column("answer", Float, nullable=False),
    Column("spent", Integer, nullable=False),
    Column("budget_after", Integer, nullable=False),
    # Custodian-only audit columns: exact subset AUC, reference and the noise drawn.
    Column("holdout", Float, nullable=False),
    Column("reference", Float, nullable=False),
    Column("noise", Float, nullable=False),
    Column("created_at", Float, nullable=False),
)


class NotFound(InputError):
    """A referenced object does not exist (or belongs to someone else)."""


def _new_id(result: Any) -> int:
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def hash_token(token: str) -> str:
    """SHA-256 of a token: tokens are 256-bit random strings, so no salt or slow hash."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def normalize_url(db: str) -> str:
    """A database URL, or a file path that becomes ``sqlite:///PATH``."""
    if "://" in db:
        url = make_url(db)
        if url.drivername in ("postgresql", "postgres"):
            # psycopg 3 is the driver fedroc installs (extra "postgres").
            url = url.set(drivername="postgresql+psycopg")
        return url.render_as_string(hide_password=False)
    return f"sqlite:///{db}"


@dataclass(frozen=True)
class PlanRow:
    """A plan with what answering needs (cached: plans never change)."""

    id: int
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

    def public(self) -> dict[str, Any]:
        """What a developer may know about the plan."""
        return {
            "plan_id": self.id,
            "mechanism": self.mechanism.name,
            "n_images": self.table.n_images,
            "n_subsets": self.table.n_subsets,
            "subset_size": self.table.subset_size,
            "load_factor": self.table.load_factor,
            "noise_rate": self.mechanism.noise_rate,
            "threshold": self.mechanism.threshold,
            "budget": self.budget,
            "budget_units": self.budget_units,
            "epsilon": self.epsilon,
            "prevalence": self.prevalence,
            "replace": self.replace,
        }


@dataclass(frozen=True)
class DeveloperRow:
    id: int
    plan_id: int
    name: str


class Store:
    """Database access for the service; safe to share between threads."""

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = normalize_url(url)
        self.is_sqlite = self.url.startswith("sqlite")
        kwargs: dict[str, Any] = {"future": True}
        if self.is_sqlite:
            kwargs.update(
                connect_args={"timeout": 60.0, "check_same_thread": False},
                pool_size=16,
                max_overflow=48,
            )
        else:
            kwargs.update(pool_size=16, max_overflow=48, pool_pre_ping=True)
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.is_sqlite:
            self._sqlite_setup(self.engine, sqlite_synchronous)
        metadata.create_all(self.engine)
        self._plans: dict[int, PlanRow] = {}
        self._devs: dict[str, DeveloperRow] = {}
        self._subs: OrderedDict[int, tuple[int, NDArray[np.float64], float]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _sqlite_setup(engine: Engine, synchronous: str) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise InputError(f"sqlite synchronous must be FULL, NORMAL or EXTRA; got {synchronous}")

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take transaction control from the driver so that BEGIN is issued exactly
            # where SQLAlchemy begins (SQLAlchemy's documented pysqlite recipe).
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={synchronous.upper()}")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN")

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ custodian side

    def add_test_set(self, name: str, image_ids: Sequence[str], labels: NDArray[np.bool_]) -> int:
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
            return _new_id(res)

    def test_set(self, test_set_id: int) -> tuple[str, tuple[str, ...], NDArray[np.bool_]]:
        with self.engine.connect() as conn:
            row = conn.execute(select(test_sets).where(test_sets.c.id == test_set_id)).first()
        if row is None:
            raise NotFound(f"test set {test_set_id} does not exist")
        ids = tuple(json.loads(row.image_ids))
        labels = np.frombuffer(row.labels, dtype=np.uint8).astype(bool)
        return row.name, ids, labels

    def add_plan(
        self,
        test_set_id: int,
        *,
        mechanism: Mechanism,
        table: SubsetTable,
        budget: float,
        budget_units: int,
        epsilon: float,
        prevalence: float,
        replace: bool,
        seed: str,
    ) -> int:
        with self.engine.begin() as conn:
            res = conn.execute(
                insert(plans).values(
                    test_set_id=test_set_id,
                    mechanism=mechanism.name,
                    n_subsets=table.n_subsets,
                    subset_size=table.subset_size,
                    load_factor=table.load_factor,
                    noise_rate=mechanism.noise_rate,
                    threshold=mechanism.threshold,
                    budget=budget,
                    budget_units=budget_units,
                    epsilon=epsilon,
                    prevalence=prevalence,
                    replace=replace,
                    seed=seed,
                    members=table.members_bytes(),
                    created_at=time.time(),
                )
            )
            return _new_id(res)

    def plan(self, plan_id: int) -> PlanRow:
        cached = self._plans.get(plan_id)
        if cached is not None:
            return cached
        with self.engine.connect() as conn:
            row = conn.execute(select(plans).where(plans.c.id == plan_id)).first()
        if row is None:
            raise NotFound(f"plan {plan_id} does not exist")
        _, ids, labels = self.test_set(row.test_set_id)
        table = SubsetTable(ids, SubsetTable.members_from_bytes(row.members))
        mech = Mechanism(row.mechanism, threshold=row.threshold, noise_rate=row.noise_rate)
        plan = PlanRow(
            row.id, row.test_set_id, mech, labels, table, row.budget, row.budget_units,
            row.epsilon, row.prevalence, bool(row.replace), row.seed,
        )  # fmt: skip
        with self._lock:
            self._plans[plan_id] = plan
        return plan

    def add_developer(self, plan_id: int, name: str) -> tuple[int, str, int]:
        """Create a developer; returns ``(id, token, budget units)``. Only the hash is stored."""
        plan = self.plan(plan_id)
        token = "fsq_" + secrets.token_urlsafe(32)
        with self.engine.begin() as conn:
            res = conn.execute(
                insert(developers).values(
                    plan_id=plan_id,
                    name=name,
                    token_hash=hash_token(token),
                    budget_total=plan.budget_units,
                    budget_remaining=plan.budget_units,
                    n_queries=0,
                    threshold_noise=plan.mechanism.initial_threshold_noise(),
                    created_at=time.time(),
                )
            )
            return _new_id(res), token, plan.budget_units

    def developers(self, plan_id: int | None = None) -> list[dict[str, Any]]:
        cols = [
            developers.c.id, developers.c.plan_id, developers.c.name, developers.c.budget_total,
            developers.c.budget_remaining, developers.c.n_queries, developers.c.created_at,
        ]  # fmt: skip
        q = select(*cols).order_by(developers.c.id)
        if plan_id is not None:
            q = q.where(developers.c.plan_id == plan_id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    # ------------------------------------------------------------------ developer side

    def developer_by_token(self, token: str) -> DeveloperRow | None:
        h = hash_token(token)
        cached = self._devs.get(h)
        if cached is not None:
            return cached
        with self.engine.connect() as conn:
            row = conn.execute(
                select(developers.c.id, developers.c.plan_id, developers.c.name).where(
                    developers.c.token_hash == h
                )
            ).first()
        if row is None:
            return None
        dev = DeveloperRow(row.id, row.plan_id, row.name)
        with self._lock:
            self._devs[h] = dev
        return dev

    def budget(self, developer_id: int) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(
                    developers.c.budget_total,
                    developers.c.budget_remaining,
                    developers.c.n_queries,
                ).where(developers.c.id == developer_id)
            ).one()
        return dict(row._mapping)

    def add_submission(
        self, developer_id: int, name: str, scores: NDArray[np.float64], whole_auc: float
    ) -> int:
        with self.engine.begin() as conn:
            res = conn.execute(
                insert(submissions).values(
                    developer_id=developer_id,
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
    ) -> tuple[int, Answer]:
        """Decide, record and commit one answer; raises BudgetExhausted past the budget."""
        scores, whole_auc = self.submission(developer.id, submission_id)
        row_idx = plan.table._check_subset(subset_id)
        if plan.mechanism.needs_reference:
            if reference is None:
                raise InputError(
                    "reference_auc is required by the thresholdout mechanism: send the AUC "
                    "of this model on your own (training or validation) data"
                )
            ref = float(reference)
        else:
            ref = whole_auc
        # The AUC is computed outside the transaction: it depends on nothing that changes.
        holdout = subset_auc(plan.table.members[row_idx], plan.labels, scores)
        with self.engine.begin() as conn:
            got = conn.execute(
                update(developers)
                .where(developers.c.id == developer.id, developers.c.budget_remaining >= 1)
                .values(n_queries=developers.c.n_queries + 1)
            )
            if got.rowcount != 1:
                raise BudgetExhausted(
                    f"budget spent: developer {developer.name!r} has used every unit of the "
                    "Thresholdout budget of this plan; the test set answers no more queries"
                )
            state = conn.execute(
                select(developers.c.budget_remaining, developers.c.threshold_noise).where(
                    developers.c.id == developer.id
                )
            ).one()
            ans = plan.mechanism.answer(
                holdout,
                ref,
                budget=int(state.budget_remaining),
                threshold_noise=float(state.threshold_noise),
                rng=rng,
            )
            done = conn.execute(
                update(developers)
                .where(
                    developers.c.id == developer.id,
                    developers.c.budget_remaining == state.budget_remaining,
                )
                .values(budget_remaining=ans.budget_after, threshold_noise=ans.threshold_noise)
            )
            if done.rowcount != 1:  # cannot happen while we hold the row's lock
                raise RuntimeError("developer budget changed under a held lock")
            res = conn.execute(
                insert(queries).values(
                    developer_id=developer.id,
                    submission_id=submission_id,
                    subset_id=int(subset_id),
                    answer=ans.value,
                    spent=ans.spent,
                    budget_after=ans.budget_after,
                    holdout=ans.holdout,
                    reference=ans.reference,
                    noise=ans.noise,
                    created_at=time.time(),
                )
            )
            query_id = _new_id(res)
        return query_id, ans

    def history(self, developer_id: int) -> list[dict[str, Any]]:
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
        """Custodian view of a developer's queries, with exact values and noise."""
        q = select(queries).where(queries.c.developer_id == developer_id).order_by(queries.c.id)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {
                t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in (test_sets, plans, developers, submissions, queries)
            }
