"""REST service for a sequestered test set (FastAPI; state in :mod:`fedroc.sequester.db`).

Roles
-----
- Custodian (admin token, given at start-up): registers a test set (image ids and
  labels), creates plans on it (subsets, mechanism, budget) and issues developer tokens.
- Developer (a token issued by the custodian, stored only as a SHA-256 hash): reads the
  public part of their plan and the image ids, uploads predictions, queries the AUC of a
  submission on one test subset, reads their own budget and history. Another developer's
  submissions, answers and budget are invisible (404 for their ids).

Threat model: as :mod:`fedroc.sequester.engine` (trusted custodian and server, untrusted
adaptive developers). The service adds authentication, one budget per developer and
atomic, durable spending (:class:`fedroc.sequester.db.Store`). Tokens travel in the
``Authorization: Bearer`` header: put the service behind TLS outside loopback.

Errors: bad input 422, unknown token 401, a token of the wrong role 403, someone else's
or a missing object 404, spent budget 403 with ``"budget spent"`` in the message. Nothing
is recorded or spent on an error.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from fedroc.exceptions import InputError
from fedroc.sequester import planner
from fedroc.sequester.db import DeveloperRow, NotFound, Store
from fedroc.sequester.engine import (
    BudgetExhausted,
    Mechanism,
    draw_subsets,
    subset_auc,
)

__all__ = ["SequesterClient", "create_app"]

API = "/v1"

# --------------------------------------------------------------------------- schemas


class TestSetIn(BaseModel):
    name: str = Field("test set", max_length=200)
    image_ids: list[str] = Field(..., description="Image ids, unique.")
    labels: list[int] = Field(..., description="Labels 0/1, one per image id.")


class PlanIn(BaseModel):
    n_subsets: int = Field(..., ge=1, description="rho: number of test subsets.")
    noise_rate: float = Field(..., gt=0, description="sigma: scale of the Laplace noise.")
    load_factor: float | None = Field(None, gt=0, description="xi = N rho / phi.")
    subset_size: int | None = Field(None, ge=2, description="N (instead of load_factor).")
    threshold: float = Field(0.02, ge=0, description="T of Thresholdout.")
    mechanism: Literal["h-thresholdout", "thresholdout"] = "h-thresholdout"
    prevalence: float | None = Field(None, gt=0, lt=1, description="Default: the set's.")
    replace: bool = Field(True, description="Draw images with replacement inside a subset.")
    budget_units: int | None = Field(
        None, ge=0, description="Override floor(eq. 3) (relaxes the paper's guarantee)."
    )
    seed: str | None = Field(None, description="Custodian's seed; default from secrets.")


class DeveloperIn(BaseModel):
    name: str = Field(..., min_length=1, max_length=200)


class SubmissionIn(BaseModel):
    name: str = Field("model", max_length=200)
    image_ids: list[str]
    scores: list[float | None]


class QueryIn(BaseModel):
    submission_id: int
    subset_id: int
    reference_auc: float | None = Field(
        None, description="Your own AUC of this model (required by 'thresholdout')."
    )


class QueryOut(BaseModel):
    query_id: int
    submission_id: int
    subset_id: int
    auc: float
    budget_remaining: int


# --------------------------------------------------------------------------- the app


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- auth

_bearer = HTTPBearer(auto_error=False)
Creds = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _admin(request: Request, creds: Creds) -> None:
    store: Store = request.app.state.store
    if creds is None:
        raise HTTPException(401, "missing bearer token")
    if not secrets.compare_digest(_hash(creds.credentials), request.app.state.admin_hash):
        if store.developer_by_token(creds.credentials) is not None:
            raise HTTPException(403, "this endpoint is for the custodian only")
        raise HTTPException(401, "unknown token")


def _developer(request: Request, creds: Creds) -> DeveloperRow:
    store: Store = request.app.state.store
    if creds is None:
        raise HTTPException(401, "missing bearer token")
    dev = store.developer_by_token(creds.credentials)
    if dev is None:
        if secrets.compare_digest(_hash(creds.credentials), request.app.state.admin_hash):
            raise HTTPException(403, "this endpoint is for developers; use a developer token")
        raise HTTPException(401, "unknown token")
    return dev


Admin = Annotated[None, Depends(_admin)]
Dev = Annotated[DeveloperRow, Depends(_developer)]


def create_app(
    db: str,
    admin_token: str,
    *,
    sqlite_synchronous: str = "FULL",
    noise_rng: Callable[[], np.random.Generator | None] | None = None,
) -> FastAPI:
    """The service on database ``db`` (URL or SQLite path), custodian token ``admin_token``.

    ``noise_rng`` is for tests only: a factory of seeded generators. By default every
    noise draw uses a generator seeded from ``secrets``.
    """
    if len(admin_token) < 16:
        raise InputError("the admin token must have at least 16 characters")
    store = Store(db, sqlite_synchronous=sqlite_synchronous)
    admin_hash = _hash(admin_token)
    app = FastAPI(
        title="fedroc sequestered test set",
        version="1",
        description=(
            "AUC queries on subsets of a sequestered test set, answered through "
            "h-Thresholdout_AUC or Thresholdout (Tang et al., MIDRC; Dwork et al. 2015)."
        ),
    )
    app.state.store = store
    app.state.admin_hash = admin_hash

    @app.exception_handler(InputError)
    async def _input_error(_req: Request, exc: InputError) -> JSONResponse:
        status = 404 if isinstance(exc, NotFound) else 422
        return JSONResponse({"detail": str(exc)}, status_code=status)

    @app.exception_handler(BudgetExhausted)
    async def _budget(_req: Request, exc: BudgetExhausted) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    # ---------------------------------------------------------------- custodian

    @app.post(f"{API}/test-sets", status_code=201)
    def create_test_set(body: TestSetIn, _: Admin) -> dict[str, Any]:
        ids = body.image_ids
        if len(ids) < 2:
            raise InputError(f"image_ids must hold at least 2 images; got {len(ids)}")
        if len(body.labels) != len(ids):
            raise InputError(f"labels has {len(body.labels)} entries but image_ids has {len(ids)}")
        uniq, counts = np.unique(np.asarray(ids, dtype=object), return_counts=True)
        if uniq.size != len(ids):
            dup = uniq[counts > 1][0]
            raise InputError(f"image_ids must be unique; {dup!r} appears more than once")
        lab = np.asarray(body.labels)
        bad = ~np.isin(lab, [0, 1])
        if bad.any():
            raise InputError(
                f"labels must be 0 or 1; got {lab[bad][0]!r} for {ids[bad.argmax()]!r}"
            )
        labels = lab.astype(bool)
        tid = store.add_test_set(body.name, ids, labels)
        return {"test_set_id": tid, "n_images": len(ids), "n_pos": int(labels.sum()),
                "n_neg": int((~labels).sum())}  # fmt: skip

    @app.post(f"{API}/test-sets/{{test_set_id}}/plans", status_code=201)
    def create_plan(test_set_id: int, body: PlanIn, _: Admin) -> dict[str, Any]:
        _name, ids, labels = store.test_set(test_set_id)
        phi = len(ids)
        if (body.load_factor is None) == (body.subset_size is None):
            raise InputError("give exactly one of load_factor and subset_size")
        p = planner.plan(
            phi, body.n_subsets, noise_rate=body.noise_rate,
            load_factor=body.load_factor, subset_size=body.subset_size,
        )  # fmt: skip
        seed = body.seed if body.seed is not None else str(secrets.randbits(128))
        # The seed string is hashed to 256 bits so that any text the custodian keeps works.
        seed_int = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
        table = draw_subsets(
            labels, n_subsets=body.n_subsets, subset_size=p.subset_size,
            prevalence=body.prevalence, replace=body.replace,
            seed=np.random.default_rng(seed_int), image_ids=ids,
        )  # fmt: skip
        units = p.budget_units if body.budget_units is None else body.budget_units
        budget = p.budget if body.budget_units is None else float(units)
        mech = Mechanism(body.mechanism, threshold=body.threshold, noise_rate=body.noise_rate)
        prevalence = float(labels.mean()) if body.prevalence is None else body.prevalence
        pid = store.add_plan(
            test_set_id, mechanism=mech, table=table, budget=budget, budget_units=units,
            epsilon=planner.epsilon_of(budget, body.noise_rate, phi), prevalence=prevalence,
            replace=body.replace, seed=seed,
        )  # fmt: skip
        out = store.plan(pid).public()
        out["budget_eq3"] = p.budget
        return out

    @app.get(f"{API}/plans/{{plan_id}}")
    def get_plan(plan_id: int, _: Admin) -> dict[str, Any]:
        plan = store.plan(plan_id)
        return {**plan.public(), "test_set_id": plan.test_set_id, "seed": plan.seed}

    @app.get(f"{API}/plans/{{plan_id}}/subsets/{{subset_id}}")
    def subset_images(plan_id: int, subset_id: int, _: Admin) -> dict[str, Any]:
        """Hash table, subset -> images (custodian only)."""
        return {"subset_id": subset_id, "image_ids": store.plan(plan_id).table.images_of(subset_id)}

    @app.get(f"{API}/plans/{{plan_id}}/images/{{image_id}}")
    def image_subsets(plan_id: int, image_id: str, _: Admin) -> dict[str, Any]:
        """Hash table, image -> subsets (custodian only; one entry per occurrence)."""
        subs = store.plan(plan_id).table.subsets_of(image_id)
        return {"image_id": image_id, "subset_ids": subs.tolist()}

    @app.post(f"{API}/plans/{{plan_id}}/developers", status_code=201)
    def create_developer(plan_id: int, body: DeveloperIn, _: Admin) -> dict[str, Any]:
        dev_id, token, units = store.add_developer(plan_id, body.name)
        return {"developer_id": dev_id, "name": body.name, "token": token,
                "budget_total": units}  # fmt: skip

    @app.get(f"{API}/developers")
    def list_developers(_: Admin, plan_id: int | None = None) -> list[dict[str, Any]]:
        return store.developers(plan_id)

    @app.get(f"{API}/developers/{{developer_id}}/audit")
    def audit(developer_id: int, _: Admin) -> list[dict[str, Any]]:
        return store.audit(developer_id)

    # ---------------------------------------------------------------- developer

    @app.get(f"{API}/me")
    def me(dev: Dev) -> dict[str, Any]:
        return {"developer_id": dev.id, "name": dev.name, **store.budget(dev.id),
                "plan": store.plan(dev.plan_id).public()}  # fmt: skip

    @app.get(f"{API}/me/image-ids")
    def my_image_ids(dev: Dev) -> dict[str, Any]:
        return {"image_ids": list(store.plan(dev.plan_id).table.image_ids)}

    @app.post(f"{API}/submissions", status_code=201)
    def submit(body: SubmissionIn, dev: Dev) -> dict[str, Any]:
        plan = store.plan(dev.plan_id)
        table = plan.table
        if len(body.scores) != len(body.image_ids):
            raise InputError(
                f"scores has {len(body.scores)} entries but image_ids has {len(body.image_ids)}"
            )
        index = table.index
        pos = np.fromiter((index.get(i, -1) for i in body.image_ids), dtype=np.int64,
                          count=len(body.image_ids))  # fmt: skip
        if (pos < 0).any():
            unknown = [body.image_ids[k] for k in np.flatnonzero(pos < 0)[:5]]
            raise InputError(
                f"image_ids has {(pos < 0).sum()} id(s) that are not in the test set, "
                f"such as {unknown}"
            )
        if np.unique(pos).size != pos.size:
            raise InputError("image_ids lists some image more than once")
        if pos.size != table.n_images:
            have = np.zeros(table.n_images, dtype=bool)
            have[pos] = True
            missing = [table.image_ids[k] for k in np.flatnonzero(~have)[:5]]
            raise InputError(
                f"predictions are missing for {table.n_images - pos.size} of the "
                f"{table.n_images} test images, such as {missing}"
            )
        raw = np.array([np.nan if v is None else v for v in body.scores], dtype=np.float64)
        if not np.isfinite(raw).all():
            k = int(np.flatnonzero(~np.isfinite(raw))[0])
            raise InputError(
                f"scores must be finite numbers; {int((~np.isfinite(raw)).sum())} are not, "
                f"such as {raw[k]!r} for image {body.image_ids[k]!r}"
            )
        scores = np.empty(table.n_images, dtype=np.float64)
        scores[pos] = raw
        whole = subset_auc(np.arange(table.n_images, dtype=np.int32), plan.labels, scores)
        sid = store.add_submission(dev.id, body.name, scores, whole)
        return {"submission_id": sid, "name": body.name, "n": int(pos.size)}

    @app.get(f"{API}/submissions")
    def my_submissions(dev: Dev) -> list[dict[str, Any]]:
        return store.list_submissions(dev.id)

    @app.post(f"{API}/queries", response_model=QueryOut)
    def query(body: QueryIn, dev: Dev) -> QueryOut:
        if body.reference_auc is not None and not math.isfinite(body.reference_auc):
            raise InputError(f"reference_auc must be finite; got {body.reference_auc!r}")
        plan = store.plan(dev.plan_id)
        rng = noise_rng() if noise_rng is not None else None
        qid, ans = store.answer_query(
            dev, plan, body.submission_id, body.subset_id, reference=body.reference_auc, rng=rng
        )
        return QueryOut(query_id=qid, submission_id=body.submission_id, subset_id=body.subset_id,
                        auc=ans.value, budget_remaining=ans.budget_after)  # fmt: skip

    @app.get(f"{API}/queries")
    def my_queries(dev: Dev) -> list[dict[str, Any]]:
        return store.history(dev.id)

    @app.get(f"{API}/budget")
    def my_budget(dev: Dev) -> dict[str, Any]:
        return store.budget(dev.id)

    return app


class SequesterClient:
    """A small synchronous client (httpx) for scripts, benchmarks and tests."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0) -> None:
        import httpx

        self.http = httpx.Client(
            base_url=base_url.rstrip("/") + API,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> SequesterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ok(self, resp: Any) -> Any:
        if resp.status_code >= 400:
            from fedroc.exceptions import FedrocError

            raise FedrocError(f"HTTP {resp.status_code}: {resp.json().get('detail')}")
        return resp.json()

    def get(self, path: str) -> Any:
        return self._ok(self.http.get(path))

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._ok(self.http.post(path, json=body))

    # custodian
    def add_test_set(self, image_ids: list[str], labels: list[int], name: str = "test set") -> int:
        body = {"name": name, "image_ids": image_ids, "labels": labels}
        return int(self.post("/test-sets", body)["test_set_id"])

    def add_plan(self, test_set_id: int, **plan: Any) -> dict[str, Any]:
        return dict(self.post(f"/test-sets/{test_set_id}/plans", plan))

    def add_developer(self, plan_id: int, name: str) -> str:
        return str(self.post(f"/plans/{plan_id}/developers", {"name": name})["token"])

    # developer
    def submit(self, image_ids: list[str], scores: list[float], name: str = "model") -> int:
        body = {"name": name, "image_ids": image_ids, "scores": scores}
        return int(self.post("/submissions", body)["submission_id"])

    def query(
        self, submission_id: int, subset_id: int, reference_auc: float | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"submission_id": submission_id, "subset_id": subset_id}
        if reference_auc is not None:
            body["reference_auc"] = reference_auc
        return dict(self.post("/queries", body))
