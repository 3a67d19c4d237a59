"""REST service for a sequestered test set (FastAPI; state in :mod:`fedroc.sequester.db`).

Roles
-----
- Custodian (the admin token, given to the server by the operator): registers test sets
  (image ids and labels), creates plans on them (subsets, mechanism, budget, limits),
  issues, revokes and rotates developer tokens, tops up budgets and quotas, lists test
  sets, plans and developers, and exports the audit (CSV). Every custodian action is
  recorded in the audit.
- Developer (a token issued by the custodian, stored only as a SHA-256 hash): reads the
  public part of their plan and the image ids, uploads predictions, queries the AUC of a
  submission on one test subset, reads their own budget, quotas and history. Another
  developer's submissions, answers and budget are invisible (404 for their ids).

Threat model: as :mod:`fedroc.methods.sequester` (trusted custodian and server, untrusted
adaptive developers; the default ``thresholdout`` mechanism is differentially private, the
paper's ``h-thresholdout`` is not). The service adds authentication, one budget and quotas
per developer, atomic and durable spending (:class:`fedroc.sequester.db.Store`), and
refuses before reading (:mod:`fedroc.sequester._guard`): token, rate and body size are
checked before the body is read. Noise comes from the server's own entropy through
:mod:`fedroc.privacy`; only the operator can seed it (``noise_seed``, for tests).
Tokens travel in the ``Authorization: Bearer`` header: serve over TLS (``--tls-cert``,
``--tls-key``) outside loopback.

Request bodies are JSON in UTF-8 (RFC 8259; a leading byte order mark is ignored): a body
in UTF-16 or UTF-32, which Python's JSON reader would decode, is refused with 422.

Errors: bad input 422 naming the field, unknown or revoked token 401, a token of the wrong
role 403, someone else's or a missing object 404, a developer name taken on the plan 409,
spent budget 403 with ``"budget spent"`` in the message, a used quota 403 with ``"quota"``,
too fast 429, too large a body 413.
Nothing is recorded or spent on an error.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import Depends, FastAPI, Path, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from fedroc.exceptions import FedrocError, InputError
from fedroc.methods.sequester import (
    DEFAULT_MECHANISM,
    BudgetExhausted,
    ClassesTooSmall,
    Limits,
    Mechanism,
    NeedsReplacement,
    QuotaExceeded,
    ReferenceRequired,
    answer_step,
    auc_sensitivity,
    draw_subsets,
    noisy_prevalence,
    planner,
    prevalence_epsilon,
)
from fedroc.methods.sequester.engine import resolve_max_copies
from fedroc.metrics import roc_auc
from fedroc.sequester._guard import Guard, Principal, RateLimiter
from fedroc.sequester.db import (
    Conflict,
    DeveloperRow,
    NotFound,
    PlanRow,
    Revoked,
    Store,
    hash_token,
)

__all__ = ["DEFAULTS", "SequesterClient", "create_app"]

API = "/v1"
MAX_ID = 2**31 - 1  # ids are 32-bit integers in PostgreSQL
MIN_ADMIN_TOKEN = 16  # characters of the custodian token
MAX_TABLE_ENTRIES = planner.MAX_TABLE_ENTRIES  # n_subsets * subset_size (the planner warns)
DEFAULTS = {"max_body_bytes": 16 * 2**20, "rate_limit": 50.0, "rate_burst": 100}

# --------------------------------------------------------------------------- schemas


class _In(BaseModel):
    # An unknown field is an error, not silently dropped: nothing a developer adds (a
    # "seed", a "noise") can look as if it was taken into account.
    model_config = ConfigDict(extra="forbid")


Id = Annotated[int, Path(ge=1, le=MAX_ID)]
# Stored text has no NUL: PostgreSQL refuses it in any text column, and the driver's error
# was a 500 naming no field (S1). Image ids are stored as JSON, which escapes it.
NO_NUL = r"^[^\x00]*$"
Name = Annotated[str, Field(max_length=200, pattern=NO_NUL)]


# Rules the handlers check (so that their messages name the image) are stated in the
# schema by json_schema_extra, which changes no validation: at least two images, unique
# ids, labels 0/1 (create_test_set), finite scores (_scores_in_order).
class TestSetIn(_In):
    name: Annotated[Name, Field(description="A name for the custodian's lists.")] = "test set"
    image_ids: list[Annotated[str, Field(max_length=200)]] = Field(
        ..., description="Image ids, unique.",
        json_schema_extra={"minItems": 2, "uniqueItems": True},
    )  # fmt: skip
    labels: list[int] = Field(
        ..., description="Labels 0/1, one per image id; both classes.",
        json_schema_extra={"minItems": 2, "items": {"type": "integer", "enum": [0, 1]}},
    )  # fmt: skip


class PlanIn(_In):
    n_subsets: int = Field(100, ge=1, le=1_000_000, description="rho: number of test subsets.")
    noise_rate: float = Field(
        ..., ge=planner.MIN_NOISE_RATE, le=planner.MAX_NOISE_RATE, allow_inf_nan=False,
        description="sigma of eq. 3: the noise rate the budget is computed for.",
    )  # fmt: skip
    answer_noise_rate: float | None = Field(
        None, ge=planner.MIN_NOISE_RATE, le=planner.MAX_NOISE_RATE, allow_inf_nan=False,
        description="Laplace scale of the answers (default: noise_rate).",
    )  # fmt: skip
    load_factor: float | None = Field(
        None, gt=0, le=1e9, allow_inf_nan=False, description="xi = N rho / phi."
    )
    subset_size: int | None = Field(
        None, ge=2, le=planner.MAX_SUBSET_SIZE, description="N (instead of load_factor)."
    )
    threshold: float = Field(0.02, ge=0, le=1, allow_inf_nan=False, description="T.")
    mechanism: Literal["thresholdout", "laplace", "h-thresholdout"] = Field(
        DEFAULT_MECHANISM,
        description="'thresholdout' (Dwork et al.; needs the developer's reference AUC), "
        "'laplace' (noise on every answer) or 'h-thresholdout' (the paper's variant: exact "
        "answers within T, unsafe against adaptive developers).",
    )
    prevalence: float | None = Field(
        None, gt=0, lt=1, allow_inf_nan=False,
        description="Positives per subset (public). Default: the set's, counted with "
        "differential privacy (see prevalence_epsilon).",
    )  # fmt: skip
    prevalence_epsilon: float | None = Field(
        None, gt=0, le=100, allow_inf_nan=False,
        description="Without prevalence: epsilon of the noisy count of positives the subsets "
        "are drawn at, added to epsilon_guarantee (default: a prevalence within about "
        "0.01, sqrt(2) / (0.01 n_images), at most 1).",
    )  # fmt: skip
    replace: bool = Field(True, description="Draw images with replacement inside a subset.")
    max_copies: int | None = Field(
        None, ge=0, le=1_000_000,
        description="With replacement: the most copies of one image in a subset (public; the "
        "AUC's sensitivity follows from it); 0: no cap (sensitivity 1). Default: "
        "ceil(4 subset_size / n_images), keeping 3/4 of an uncapped draw's variance.",
    )  # fmt: skip
    budget_units: int | None = Field(
        None, ge=1, le=10**9, description="Override floor(eq. 3) (relaxes the guarantee)."
    )
    round_answers: bool = Field(True, description="Round answers to the subset's precision.")
    max_queries: int | None = Field(1000, ge=1, le=10**9, description="Per developer; null: none.")
    max_submissions: int | None = Field(
        100, ge=1, le=10**9, description="Per developer; null: none."
    )
    min_changed_images: float = Field(
        5.0, ge=0, le=1e9, allow_inf_nan=False,
        description="Refuse submissions ordering the images within this many moved images "
        "of an earlier one (0: never).",
    )  # fmt: skip
    seed: str | None = Field(
        None, max_length=200, pattern=NO_NUL,
        description="Custodian's seed of the subsets; default random.",
    )  # fmt: skip


class DeveloperIn(_In):
    name: str = Field(
        ..., min_length=1, max_length=200, pattern=NO_NUL,
        description="The developer's name, unique on the plan (no leading or trailing space).",
    )  # fmt: skip

    @field_validator("name")
    @classmethod
    def _no_outer_space(cls, name: str) -> str:
        # 'alice' and 'alice ' were two developers, each with the plan's whole budget, whom
        # the list and the audit showed alike.
        if name != name.strip():
            raise ValueError("a developer name may not begin or end with a space")
        return name


class TopUpIn(_In):
    budget_units: int = Field(
        0, ge=0, le=10**9, description="Budget units (noisy answers) to add; at least one "
        "of the three fields above 0.",
    )  # fmt: skip
    queries: int = Field(0, ge=0, le=10**9, description="Queries to add to max_queries.")
    submissions: int = Field(
        0, ge=0, le=10**9, description="Submissions to add to max_submissions."
    )


class SubmissionIn(_In):
    name: Annotated[Name, Field(description="A name for your own list.")] = "model"
    image_ids: list[Annotated[str, Field(max_length=200)]] = Field(
        ..., description="Every id of GET /v1/me/image-ids once, in any order.",
        json_schema_extra={"uniqueItems": True},
    )  # fmt: skip
    # Checked by the handler (finite, one per image) so that its message names the image:
    # a null is read here and refused there, so the schema says numbers only.
    scores: list[float | None] = Field(
        ..., description="The model's score of each image of image_ids (finite; higher: "
        "more likely positive).",
        json_schema_extra={"items": {"type": "number"}},
    )  # fmt: skip


class QueryIn(_In):
    submission_id: int = Field(
        ..., ge=1, le=MAX_ID,
        description="The submission_id that POST /v1/submissions answered (yours only).",
    )  # fmt: skip
    subset_id: int = Field(
        ..., ge=1, le=MAX_ID,
        description="A test subset, numbered 1..n_subsets of your plan (GET /v1/me).",
    )  # fmt: skip
    reference_auc: float | None = Field(
        None, ge=0, le=1, allow_inf_nan=False,
        description="Your own AUC of this model (required by 'thresholdout').",
    )  # fmt: skip


class ErrorOut(BaseModel):
    detail: str = Field(description="What was wrong, in one line naming the field or object.")


# Every refusal answers {"detail": "<one line>"} (the validation errors too: see _invalid),
# not the list of errors of FastAPI's default, which the schema described before.
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what}
    for code, what in (
        (401, "Missing, unknown or revoked token."),
        (403, "A token of the other role, a spent budget or a used quota."),
        (404, "No such object, or someone else's."),
        (413, "Request body too large."),
        (422, "Bad input, naming the field and the value."),
        (429, "Too many requests; retry after the Retry-After header's seconds."),
    )
}


# The CSV exports' refusals are JSON too; with "model", FastAPI files them under the
# route's own media type (text/csv).
_JSON_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {
        "description": spec["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
    }
    for code, spec in _ERRORS.items()
}


class QueryOut(BaseModel):
    query_id: int = Field(description="Number of this answer (GET /v1/queries lists them).")
    submission_id: int = Field(description="The submission asked about.")
    subset_id: int = Field(description="The test subset asked about.")
    auc: float = Field(
        description="The answer. 'thresholdout': your reference_auc back when the subset "
        "agrees within the noisy threshold (free), else the subset's AUC with noise (one "
        "budget unit); 'laplace': always the noisy AUC; 'h-thresholdout': the subset's AUC "
        "within the threshold. AUCs are clipped to [0, 1] and rounded to the plan's "
        "answer_step."
    )
    budget_remaining: int = Field(description="Budget units left after this answer.")


# --------------------------------------------------------------------------- auth

_bearer = HTTPBearer(auto_error=False)  # documents the scheme; the guard checks it


def _principal(request: Request) -> Principal:
    principal = getattr(request.state, "principal", None)
    if principal is None:  # only if the guard is bypassed
        raise Revoked("missing bearer token")
    return principal


def _admin(
    request: Request, _creds: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]
) -> None:
    if _principal(request).role != "admin":
        raise _Forbidden("this endpoint is for the custodian only")


def _developer(
    request: Request, _creds: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]
) -> DeveloperRow:
    p = _principal(request)
    if p.role != "developer":
        raise _Forbidden("this endpoint is for developers; use a developer token")
    return p.developer


class _Forbidden(FedrocError):
    pass


Admin = Annotated[None, Depends(_admin)]
Dev = Annotated[DeveloperRow, Depends(_developer)]

_PUBLIC_PREFIXES = ("/docs", "/redoc", "/openapi.json", "/static-offline-docs", f"{API}/health")


def _public(path: str) -> bool:
    return path.startswith(_PUBLIC_PREFIXES)


def _shown(error: dict[str, Any]) -> str:
    """``; got VALUE`` for an error on a number, string, boolean or null, else nothing.

    The value is written as JSON text (NaN as ``NaN``, which the answer's JSON could not
    carry as a number); a string is cut to 40 characters; an object or list is not shown.
    """
    value = error.get("input")
    if error.get("type") == "missing" or not (
        value is None or isinstance(value, (bool, int, float, str))
    ):
        return ""
    text = json.dumps(value)
    return "; got " + (text if len(text) <= 40 else text[:37] + "...")


def _validation_message(exc: RequestValidationError) -> str:
    """One line per error naming the field and its value (``_shown``)."""
    # Entries of one list failing alike (600 integer image ids) are one error, not ten
    # copies of it and "and 590 more".
    groups: dict[tuple[str, str], list[Any]] = {}
    for e in exc.errors():
        if e.get("type") == "json_invalid":
            # loc is ("body", position): "20: JSON decode error" named no field.
            pos = (e.get("loc") or ("body", "?"))[-1]
            reason = (e.get("ctx") or {}).get("error", "JSON decode error")
            return f"body: not valid JSON at offset {pos}: {reason}"
        loc = [x for x in e.get("loc", ()) if x not in ("body", "query", "path")]
        msg = str(e.get("msg", "invalid"))
        field = ".".join(map(str, loc)) or "body"
        parent = ".".join(map(str, loc[:-1])) if loc and isinstance(loc[-1], int) else field
        groups.setdefault((parent, msg), [field, 0, _shown(e)])[1] += 1
    parts = []
    for (parent, msg), (field, count, got) in list(groups.items())[:10]:
        alike = f" (and {count - 1} more entries of {parent} alike)" if count > 1 else ""
        parts.append(f"{field}: {msg}{got}{alike}")
    more = len(groups) - 10
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


class _Utf8Request(Request):
    """A request whose JSON body must be UTF-8 text.

    Starlette's ``Request.json`` hands the bytes to ``json.loads``, which reads UTF-16 and
    UTF-32 as well (it guesses from the zero bytes or a byte order mark): a body the API
    does not accept was answered as if it were UTF-8. Refused here with 422 naming the body
    and the encoding; a UTF-8 byte order mark stays allowed (RFC 8259 lets a reader ignore
    it), and bytes that are not UTF-8 go on to the reader's error (``_http_error``).
    """

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            encoding = json.detect_encoding(body)
            if not encoding.startswith("utf-8"):
                raise StarletteHTTPException(
                    422,
                    f"body: JSON must be UTF-8 text; these bytes read as {encoding.upper()} "
                    "(send the body encoded as UTF-8)",
                )
            self._json = json.loads(body)
        return self._json


class _Utf8Route(APIRoute):
    """Every route reads its body through :class:`_Utf8Request`."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_Utf8Request(request.scope, request.receive))

        return route


NoiseSource = Callable[..., np.random.Generator | None]


def _noise_source(seed: int | None) -> NoiseSource:
    """Choose the server's noise: OS entropy (None) unless the operator seeded it (tests).

    A seeded server derives each draw's generator from the seed and the words naming the
    draw (``noise_rng("query", plan_seed, developer_id, n_queries)``): what the database
    numbers (a developer's queries, its id) is the same after a restart and on every worker,
    so no two releases share their noise. One stream started at the seed gave the k-th
    answer after every restart the same noise, and two answers their exact difference (Q1).
    """
    if seed is None:
        return lambda *words: None

    def child(*words: object) -> np.random.Generator:
        digest = hashlib.sha256("\x00".join(str(w) for w in words).encode()).digest()
        key = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4)]
        return np.random.default_rng(np.random.SeedSequence([int(seed), *key]))

    return child


# The routes are closures over the app's database and settings; mccabe adds their branches
# to this factory's, though each route is short.
def create_app(  # noqa: C901
    db: str,
    admin_token: str,
    *,
    sqlite_synchronous: str = "FULL",
    noise_seed: int | None = None,
    max_body_bytes: int = DEFAULTS["max_body_bytes"],  # type: ignore[assignment]
    rate_limit: float = DEFAULTS["rate_limit"],
    rate_burst: int = DEFAULTS["rate_burst"],  # type: ignore[assignment]
) -> FastAPI:
    """Build the service on database ``db`` (URL or SQLite path), custodian token ``admin_token``.

    Parameters
    ----------
    noise_seed : int or None
        Operator's seed of the answers' noise, for tests only; by default every draw uses
        the operating system's entropy.
    max_body_bytes : int
        Largest request body (413 above it, refused before reading).
    rate_limit, rate_burst : float, int
        Requests per second per developer and the burst allowed (0: no limit).
    """
    from fastapi_offline import FastAPIOffline

    if len(admin_token) < MIN_ADMIN_TOKEN:
        raise InputError(f"the admin token must have at least {MIN_ADMIN_TOKEN} characters")
    if max_body_bytes < 1024:
        raise InputError(f"max_body_bytes must be at least 1024; got {max_body_bytes!r}")
    if not (rate_limit >= 0 and math.isfinite(rate_limit)):
        raise InputError(f"rate_limit must be a number >= 0; got {rate_limit!r}")
    if isinstance(rate_burst, bool) or int(rate_burst) != rate_burst or rate_burst < 1:
        raise InputError(f"rate_burst must be a whole number >= 1; got {rate_burst!r}")
    store = Store(db, sqlite_synchronous=sqlite_synchronous)
    admin_hash = hash_token(admin_token)
    noise_rng = _noise_source(noise_seed)
    plan_lock = threading.Lock()
    app = FastAPIOffline(
        title="fedroc sequestered test set",
        version="2",
        description=(
            "AUC queries on subsets of a sequestered test set, answered through Thresholdout "
            "(Dwork et al. 2015, the default), Laplace noise on every answer, or the MIDRC "
            "paper's h-Thresholdout_AUC (Tang et al.). Authenticate with a bearer token. "
            "Times in the answers and the CSV exports (created_at, token_rotated_at) are "
            "Unix time: seconds since 1970-01-01 UTC, a number with a fraction. Request "
            "bodies are JSON in UTF-8 (422 otherwise)."
        ),
        responses=_ERRORS,
    )
    app.router.route_class = _Utf8Route  # before any route: each one reads UTF-8 JSON only
    app.state.store = store
    app.state.admin_hash = admin_hash

    async def authenticate(token: str) -> Principal | None:
        h = hash_token(token)
        if secrets.compare_digest(h, admin_hash):
            return Principal("admin", "admin")
        dev = store.cached_developer(h)
        if dev is None:  # a database lookup: off the event loop
            dev = await run_in_threadpool(store.developer_by_token, token)
        return None if dev is None else Principal("developer", f"dev:{dev.id}", dev)

    app.add_middleware(
        Guard,
        authenticate=authenticate,
        public=_public,
        max_body_bytes=max_body_bytes,
        limiter=RateLimiter(rate_limit, rate_burst),
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(req: Request, exc: RequestValidationError) -> JSONResponse:
        kind = req.headers.get("content-type", "")
        body_only = [tuple(e.get("loc", ())) for e in exc.errors()] == [("body",)]
        if body_only and req.method == "POST" and "json" not in kind.lower():
            # curl -d without -H 'Content-Type: application/json' sends a form, which
            # FastAPI does not read as JSON: say so, not "a valid dictionary".
            detail = "body: send JSON with 'Content-Type: application/json'; got Content-Type " + (
                repr(kind[:100]) if kind else "none"
            )
            return JSONResponse({"detail": detail}, status_code=422)
        return JSONResponse({"detail": _validation_message(exc)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(req: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI answers a body that is not UTF-8 text with 400 "There was an error parsing
        # the body"; bad JSON is 422 and names the body here (found by schemathesis).
        cause = exc.__cause__
        if exc.status_code == 400 and isinstance(cause, UnicodeDecodeError):
            detail = (
                f"body: not valid JSON: byte {cause.start} is not UTF-8 text "
                f"({cause.object[cause.start : cause.start + 1]!r})"
            )
            return JSONResponse({"detail": detail}, status_code=422)
        where = f"{req.method} {req.url.path[:200]}"
        if exc.status_code == 404 and exc.detail == "Not Found":
            # Starlette's answer to a path no route has named neither the path nor the list.
            detail = f"no endpoint {where}; the endpoints are listed at /docs"
            return JSONResponse({"detail": detail}, status_code=404)
        if exc.status_code == 405:
            # Starlette's Allow names the methods of the first route on the path only (POST
            # for /v1/queries, which GET also reads): every route on it is listed.
            path = req.scope["path"]
            allow = ", ".join(sorted({
                m for r in req.app.routes if getattr(r, "methods", None)
                and r.path_regex.match(path) for m in r.methods
            }))  # fmt: skip
            detail = f"no endpoint {where}; {req.url.path[:200]} takes {allow}"
            return JSONResponse({"detail": detail}, status_code=405, headers={"Allow": allow})
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))  # fmt: skip

    @app.exception_handler(FedrocError)
    async def _fedroc_error(_req: Request, exc: FedrocError) -> JSONResponse:
        status = next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"detail": _detail(exc)}, status_code=status, headers=headers)

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        """Answer {"status": "ok"} while the service runs (no token needed)."""
        return {"status": "ok"}

    # ---------------------------------------------------------------- custodian

    @app.post(f"{API}/test-sets", status_code=201)
    def create_test_set(body: TestSetIn, _: Admin) -> dict[str, Any]:
        """Upload a test set: image_ids (unique strings) and labels (0/1), one per image."""
        ids = body.image_ids
        if len(ids) < 2:
            raise InputError(f"image_ids must hold at least 2 images; got {len(ids)}")
        if len(body.labels) != len(ids):
            raise InputError(f"labels has {len(body.labels)} entries but image_ids has {len(ids)}")
        uniq, counts = np.unique(np.asarray(ids, dtype=object), return_counts=True)
        if uniq.size != len(ids):
            dup = uniq[counts > 1][0]
            raise InputError(f"image_ids must be unique; {dup!r} appears more than once")
        bad = next((k for k, v in enumerate(body.labels) if v not in (0, 1)), None)
        if bad is not None:
            raise InputError(f"labels must be 0 or 1; got {body.labels[bad]!r} for {ids[bad]!r}")
        labels = np.asarray(body.labels, dtype=np.int8).astype(bool)
        if labels.all() or not labels.any():
            # No plan could draw subsets from it (and each would count its prevalence).
            word = "positive" if labels.all() else "negative"
            raise InputError(
                "labels must hold both classes (an AUC needs them); all "
                f"{labels.size} images are {word}"
            )
        tid = store.add_test_set(body.name, ids, labels)
        return {"test_set_id": tid, "n_images": len(ids), "n_pos": int(labels.sum()),
                "n_neg": int((~labels).sum())}  # fmt: skip

    @app.get(f"{API}/test-sets")
    def list_test_sets(_: Admin) -> list[dict[str, Any]]:
        """List the test sets with their sizes and number of positives.

        ``created_at``: when the set was uploaded, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        return store.test_sets()

    @app.post(f"{API}/test-sets/{{test_set_id}}/plans", status_code=201)
    def create_plan(test_set_id: Id, body: PlanIn, _: Admin) -> dict[str, Any]:
        """Draw a plan's test subsets from a test set (load_factor or subset_size).

        The answer's warnings say where the plan's guarantee weakens.
        """
        # One plan at a time in this process (the database keeps the count once across
        # processes: Store.count_prevalence).
        with plan_lock:
            return _create_plan(test_set_id, body)

    def _create_plan(test_set_id: int, body: PlanIn) -> dict[str, Any]:
        _name, ids, labels = store.test_set(test_set_id)
        phi = len(ids)
        ids_digest = hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()
        if (body.load_factor is None) == (body.subset_size is None):
            got = "none" if body.load_factor is None else "both"
            raise InputError(f"give exactly one of load_factor and subset_size; got {got}")
        if body.prevalence is not None and body.prevalence_epsilon is not None:
            raise InputError(
                "give prevalence or prevalence_epsilon, not both (prevalence_epsilon is spent "
                "on a noisy prevalence when the custodian gives none)"
            )
        p = planner.plan(
            phi, body.n_subsets, noise_rate=body.noise_rate,
            answer_noise_rate=body.answer_noise_rate, load_factor=body.load_factor,
            subset_size=body.subset_size, budget_units=body.budget_units,
            mechanism=body.mechanism, warn=False,  # answered in "warnings", not logged
        )  # fmt: skip
        if p.subset_size * p.n_subsets > MAX_TABLE_ENTRIES:
            raise InputError(
                f"n_subsets {p.n_subsets} of {p.subset_size} images (load_factor "
                f"{p.load_factor:.4g}) make {p.subset_size * p.n_subsets} entries, more than "
                f"{MAX_TABLE_ENTRIES}; ask for fewer subsets or a smaller load_factor"
            )
        # Refused before the prevalence is counted (nothing spent on a plan refused);
        # NeedsReplacement is told in the JSON field's spelling (_detail).
        resolve_max_copies(body.max_copies, body.replace, p.subset_size, phi)
        # The subsets' prevalence is public (it sets their class sizes, the answers' step and
        # the AUC's sensitivity): the custodian's, or the set's own counted with DP noise,
        # once per test set (R40: fresh noise for each plan averaged away over plans).
        eps_prevalence = None
        if body.prevalence is None:
            counted = store.counted_prevalence(test_set_id)
            if counted is None:
                eps_asked = (
                    prevalence_epsilon(phi)
                    if body.prevalence_epsilon is None
                    else body.prevalence_epsilon
                )
                drawn, event = noisy_prevalence(
                    labels, epsilon=eps_asked, rng=noise_rng("prevalence", test_set_id, ids_digest)
                )
                # Stored only if no other worker stored one meanwhile (R40b); if one did,
                # this draw is dropped unreleased and its count is used. The count's DP
                # event is audited with it, whatever becomes of this plan (R40c).
                prevalence, eps_prevalence, _ = store.count_prevalence(
                    test_set_id, drawn, eps_asked, events=(event,)
                )
            else:
                prevalence, eps_prevalence = counted
            # A count this plan did not make (its own has the epsilon it asked) must be reused.
            if body.prevalence_epsilon not in (None, eps_prevalence):
                raise InputError(
                    f"test set {test_set_id}'s prevalence was counted with noise at "
                    f"prevalence_epsilon {eps_prevalence:.6g} by its first plan, and every "
                    "plan without a prevalence reuses that count (fresh counts could be "
                    f"averaged); got prevalence_epsilon {body.prevalence_epsilon:.6g}: "
                    "leave it out, or give prevalence"
                )
        else:
            prevalence = body.prevalence
        seed = body.seed if body.seed is not None else str(secrets.randbits(128))
        # The seed string is hashed to 256 bits so that any text the custodian keeps works.
        seed_int = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
        try:
            table = draw_subsets(
                labels, n_subsets=body.n_subsets, subset_size=p.subset_size,
                prevalence=prevalence, replace=body.replace, max_copies=body.max_copies,
                seed=np.random.default_rng(seed_int), image_ids=ids,
            )  # fmt: skip
        except ClassesTooSmall as exc:
            # A class too small at the prevalence drawn at: say where that prevalence came
            # from when it is the set's noisy count (not other refusals of the draw).
            if eps_prevalence is None:
                raise
            raise InputError(
                f"{_detail(exc)} (the prevalence {prevalence:.4g} is the set's counted with "
                f"noise at prevalence_epsilon {eps_prevalence:.3g}; give prevalence to draw "
                "at a set one)"
            ) from None
        n_pos = int(labels[table.members[0]].sum())
        step = answer_step(n_pos, table.subset_size - n_pos) if body.round_answers else 0.0
        mech = Mechanism(body.mechanism, threshold=body.threshold,
                         noise_rate=p.answer_noise_rate or p.noise_rate, step=step)  # fmt: skip
        limits = Limits(body.max_queries, body.max_submissions, body.min_changed_images)
        new_plan = PlanRow(
            test_set_id, mechanism=mech, labels=labels, table=table, budget=p.budget,
            budget_units=p.budget_units, epsilon=p.epsilon, prevalence=prevalence,
            replace=body.replace, seed=seed, noise_rate=p.noise_rate,
            sensitivity=auc_sensitivity(table, labels), limits=limits,
            prevalence_epsilon=eps_prevalence,
        )  # fmt: skip
        warnings = list(p.warnings)
        if body.mechanism == "h-thresholdout":
            warnings.append(
                "mechanism 'h-thresholdout' answers exact AUCs within the threshold: adaptive "
                "developers can read labels from them, and no differential-privacy guarantee "
                "holds (epsilon_guarantee is null); use 'thresholdout' (the default)"
            )
        answers_eps = new_plan.answers_epsilon()
        if eps_prevalence is not None and answers_eps is not None and eps_prevalence > answers_eps:
            warnings.append(
                f"the noisy prevalence costs epsilon {eps_prevalence:.3g}, more than the answers' "
                f"{answers_eps:.3g}: give prevalence (public, spends none) or a smaller "
                "prevalence_epsilon"
            )
        pid = store.add_plan(new_plan)
        plan = store.plan(pid)
        return {**plan.public(), "test_set_id": test_set_id, "budget_eq3": p.budget,
                "max_queries": limits.max_queries, "max_submissions": limits.max_submissions,
                "warnings": warnings}  # fmt: skip

    @app.get(f"{API}/plans")
    def list_plans(_: Admin, test_set_id: int | None = Query(None, ge=1, le=MAX_ID)) -> Any:
        """List the plans (without their seeds), optionally of one test set."""
        return store.plans(test_set_id)

    @app.get(f"{API}/plans/{{plan_id}}")
    def get_plan(plan_id: Id, _: Admin) -> dict[str, Any]:
        """One plan with its seed (the custodian's to keep: it rebuilds the subsets)."""
        plan = store.plan(plan_id)
        return {**plan.public(), "test_set_id": plan.test_set_id, "seed": plan.seed,
                "sensitivity": plan.sensitivity, "max_queries": plan.limits.max_queries,
                "max_submissions": plan.limits.max_submissions}  # fmt: skip

    @app.get(f"{API}/plans/{{plan_id}}/subsets/{{subset_id}}")
    def subset_images(plan_id: Id, subset_id: Id, _: Admin) -> dict[str, Any]:
        """Hash table, subset -> images (custodian only)."""
        return {"subset_id": subset_id, "image_ids": store.plan(plan_id).table.images_of(subset_id)}

    @app.get(f"{API}/plans/{{plan_id}}/images/{{image_id}}")
    def image_subsets(
        plan_id: Id, image_id: Annotated[str, Path(max_length=200)], _: Admin
    ) -> dict[str, Any]:
        """Hash table, image -> subsets (custodian only; one entry per occurrence)."""
        subs = store.plan(plan_id).table.subsets_of(image_id)
        return {"image_id": image_id, "subset_ids": subs.tolist()}

    @app.post(
        f"{API}/plans/{{plan_id}}/developers",
        status_code=201,
        responses={409: {"model": ErrorOut, "description": "The name is taken on the plan."}},
    )
    def create_developer(plan_id: Id, body: DeveloperIn, _: Admin) -> dict[str, Any]:
        """Register a developer for a plan; the answer holds their token, shown only this once.

        Names are unique on a plan (409 for one taken, a revoked developer's included).
        """
        plan = store.plan(plan_id)

        def gamma(dev_id: int) -> float:
            rng = noise_rng("threshold", plan.seed, dev_id)
            return plan.mechanism.initial_threshold_noise(rng, sensitivity=plan.sensitivity)

        dev_id, token, units = store.add_developer(plan_id, body.name, threshold_noise=gamma)
        return {"developer_id": dev_id, "name": body.name, "token": token,
                "budget_total": units}  # fmt: skip

    @app.get(f"{API}/developers")
    def list_developers(
        _: Admin, plan_id: int | None = Query(None, ge=1, le=MAX_ID)
    ) -> list[dict[str, Any]]:
        """List the developers with their budgets, quotas and whether they are active.

        ``created_at`` (registered) and ``token_rotated_at`` (null until a rotation):
        Unix time, seconds since 1970-01-01 UTC, a number with a fraction.
        """
        return store.developers(plan_id)

    @app.post(f"{API}/developers/{{developer_id}}/revoke")
    def revoke(developer_id: Id, _: Admin) -> dict[str, Any]:
        """Revoke a developer's token: every later request with it gets 401."""
        store.revoke_developer(developer_id)
        return {"developer_id": developer_id, "active": False}

    @app.post(f"{API}/developers/{{developer_id}}/rotate")
    def rotate(developer_id: Id, _: Admin) -> dict[str, Any]:
        """Issue a new token for the developer; the old one stops working at once.

        A revoked developer is made active again with the new token (`reactivated` true in
        the answer and the audit); to keep them out, do not rotate after revoking.
        """
        token, reactivated = store.rotate_token(developer_id)
        return {"developer_id": developer_id, "token": token, "active": True,
                "reactivated": reactivated}  # fmt: skip

    @app.post(f"{API}/developers/{{developer_id}}/top-up")
    def top_up(developer_id: Id, body: TopUpIn, _: Admin) -> dict[str, Any]:
        """Add budget units, queries or submissions to a developer (at least one above 0)."""
        if not (body.budget_units or body.queries or body.submissions):
            raise InputError(
                "a top-up needs budget_units, queries or submissions above 0; got all 0"
            )
        return store.top_up(developer_id, budget_units=body.budget_units,
                            queries=body.queries, submissions=body.submissions)  # fmt: skip

    @app.get(f"{API}/developers/{{developer_id}}/audit")
    def audit(developer_id: Id, _: Admin) -> list[dict[str, Any]]:
        """Every answer given to one developer, with its exact value and noise.

        ``created_at``: when the answer was given, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        _known_developer(developer_id)
        return store.audit(developer_id)

    def _known_developer(developer_id: int) -> None:
        # An unknown id is 404, not the empty audit of a developer who asked nothing.
        if not any(d["id"] == developer_id for d in store.developers()):
            raise NotFound(f"developer {developer_id} does not exist")

    @app.get(f"{API}/audit/actions")
    def actions(_: Admin) -> list[dict[str, Any]]:
        """Every custodian action (uploads, plans, developers, top-ups, revocations, rotations).

        ``created_at``: when the action was taken, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        return store.actions()

    @app.get(f"{API}/audit/queries.csv", response_class=_CSVResponse, responses=_JSON_ERRORS)
    def audit_csv(
        _: Admin,
        plan_id: int | None = Query(None, ge=1, le=MAX_ID),
        developer_id: int | None = Query(None, ge=1, le=MAX_ID),
    ) -> StreamingResponse:
        """Every answer with its exact value, noise and DP events, as CSV.

        Column ``created_at``: when the answer was given, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        if plan_id is not None:
            store.plan(plan_id)  # NotFound: 404, not an empty CSV
        if developer_id is not None:
            _known_developer(developer_id)
        rows = store.audit_rows(plan_id=plan_id, developer_id=developer_id)
        return _csv(Store.AUDIT_COLUMNS, rows, "sequester-queries.csv")

    @app.get(f"{API}/audit/actions.csv", response_class=_CSVResponse, responses=_JSON_ERRORS)
    def actions_csv(_: Admin) -> StreamingResponse:
        """Export the custodian's actions as CSV.

        Column ``created_at``: when the action was taken, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        cols = ("id", "created_at", "action", "target", "details")
        rows = ((a["id"], a["created_at"], a["action"], a["target"], _json(a["details"]))
                for a in store.actions())  # fmt: skip
        return _csv(cols, rows, "sequester-actions.csv")

    # ---------------------------------------------------------------- developer

    @app.get(f"{API}/me")
    def me(dev: Dev) -> dict[str, Any]:
        """Show your plan's public parameters, your budget and your quotas.

        The plan's n_subsets, mechanism, threshold and noise, and the epsilon that your
        budget guarantees.
        """
        budget = _allowance(dev.id)
        plan = store.plan(dev.plan_id)
        # The plan's epsilon_guarantee is for its budget_units; this developer's is for all
        # the units they were given, top-ups included.
        return {"developer_id": dev.id, "name": dev.name, **budget,
                "epsilon_guarantee": plan.epsilon_guarantee(budget["budget_total"]),
                "plan": plan.public()}  # fmt: skip

    def _allowance(developer_id: int) -> dict[str, Any]:
        """Return a developer's budget and quotas (/v1/me and /v1/budget answer them alike)."""
        return {**store.budget(developer_id), "quota": store.quota(developer_id)}

    @app.get(f"{API}/me/image-ids")
    def my_image_ids(dev: Dev) -> dict[str, Any]:
        """List the test set's image ids, sorted: POST /v1/submissions scores each once."""
        # Sorted: the custodian's upload order is not the developer's to read (Q2: a set
        # uploaded as its positives, then its negatives, listed every label).
        return {"image_ids": sorted(store.plan(dev.plan_id).table.image_ids)}

    @app.post(f"{API}/submissions", status_code=201)
    def submit(body: SubmissionIn, dev: Dev) -> dict[str, Any]:
        """Submit a model: one finite score for each id of GET /v1/me/image-ids.

        Answers the submission_id to query. Scores that order the images almost as an
        earlier submission does are refused (the plan's min_changed_images).
        """
        plan = store.plan(dev.plan_id)
        scores = _scores_in_order(body, plan.table)
        whole = roc_auc(plan.labels, scores)
        sid = store.add_submission(dev, plan, body.name, scores, whole)
        return {"submission_id": sid, "name": body.name, "n": int(scores.size)}

    @app.get(f"{API}/submissions")
    def my_submissions(dev: Dev) -> list[dict[str, Any]]:
        """Your submissions (id, name, time).

        ``created_at``: when the model was submitted, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        return store.list_submissions(dev.id)

    @app.post(f"{API}/queries", response_model=QueryOut)
    def query(body: QueryIn, dev: Dev) -> QueryOut:
        """Ask the AUC of one of your submissions on test subset subset_id (1..n_subsets).

        Under 'thresholdout' send reference_auc, the model's AUC on your own data: when the
        subset agrees within a noisy threshold you get it back at no cost, else a noisy
        subset AUC that costs one budget unit. Under 'laplace' every answer is noisy and
        costs one budget unit. A spent budget answers 403 until the custodian tops it up.
        """
        plan = store.plan(dev.plan_id)
        qid, ans = store.answer_query(
            dev, plan, body.submission_id, body.subset_id, reference=body.reference_auc,
            rng_for=lambda n: noise_rng("query", plan.seed, dev.id, n),
        )  # fmt: skip
        return QueryOut(query_id=qid, submission_id=body.submission_id, subset_id=body.subset_id,
                        auc=ans.value, budget_remaining=ans.budget_after)  # fmt: skip

    @app.get(f"{API}/queries")
    def my_queries(dev: Dev) -> list[dict[str, Any]]:
        """Your answers so far, oldest first, with the budget left after each.

        ``created_at``: when the answer was given, as Unix time:
        seconds since 1970-01-01 UTC, a number with a fraction.
        """
        return store.history(dev.id)

    @app.get(f"{API}/budget")
    def my_budget(dev: Dev) -> dict[str, Any]:
        """Your budget and quotas: units given (budget_total), units left, queries answered.

        ``quota``: queries and submissions made and their limits (null: none), which the
        custodian's top-ups raise.
        """
        return _allowance(dev.id)

    return app


# The HTTP status of each error the service raises or lets through from the engine; the
# first class that matches wins (NotFound is an InputError).
_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (NotFound, 404),
    (InputError, 422),
    (Conflict, 409),
    (Revoked, 401),
    (BudgetExhausted, 403),
    (QuotaExceeded, 403),
    (_Forbidden, 403),
)


def _detail(exc: FedrocError) -> str:
    """Return an error's message for the API, phrased from a typed error's fields.

    The engine speaks Python (``reference``, ``replace=True``); the API's users sent JSON
    fields. The message is built from the error's attributes, never from its text, so a
    rewording in the engine cannot change (or break) what the API says.
    """
    if isinstance(exc, ReferenceRequired):
        return (
            f"reference_auc is required by the {exc.mechanism} mechanism: send the AUC of this "
            "model on your own (training or validation) data"
        )
    if isinstance(exc, NeedsReplacement):
        return (
            f'max_copies {exc.value!r} needs "replace": true (got false): without replacement '
            "a subset holds each image once"
        )
    return str(exc)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _CSVResponse(StreamingResponse):
    # The OpenAPI schema said application/json for the CSV exports (schemathesis).
    media_type = "text/csv"


def _csv(header: tuple[str, ...], rows: Iterator[tuple[Any, ...]], name: str) -> StreamingResponse:
    def lines() -> Iterator[str]:
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(header)
        for k, row in enumerate(rows, start=1):
            writer.writerow(row)
            if k % 500 == 0:
                yield buf.getvalue()
                buf.seek(0)
                buf.truncate()
        yield buf.getvalue()

    return _CSVResponse(
        lines(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _scores_in_order(body: SubmissionIn, table: Any) -> np.ndarray:
    """Put the submitted scores in test-set order, or refuse naming the images at fault."""
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
            f"image_ids has {(pos < 0).sum()} id(s) that are not in the test set, such as {unknown}"
        )
    if np.unique(pos).size != pos.size:
        # The developer knows every id (GET /v1/me/image-ids): naming theirs tells nothing.
        again = np.ones(pos.size, dtype=bool)
        again[np.unique(pos, return_index=True)[1]] = False
        dup = body.image_ids[int(np.flatnonzero(again)[0])]
        raise InputError(f"image_ids must be unique; {dup!r} appears more than once")
    if pos.size != table.n_images:
        have = np.zeros(table.n_images, dtype=bool)
        have[pos] = True
        # The first missing in sorted order, not in the custodian's upload order (Q2).
        missing = sorted(table.image_ids[k] for k in np.flatnonzero(~have))[:5]
        raise InputError(
            f"predictions are missing for {table.n_images - pos.size} of the "
            f"{table.n_images} test images, such as {missing}"
        )
    raw = np.array([np.nan if v is None else v for v in body.scores], dtype=np.float64)
    if not np.isfinite(raw).all():
        bad = np.flatnonzero(~np.isfinite(raw))
        k = int(bad[0])
        # As the developer wrote it: a null is not a NaN, and numpy's repr is no JSON.
        shown = "null" if body.scores[k] is None else str(raw[k])
        count = f"{bad.size} is not" if bad.size == 1 else f"{bad.size} are not, the first"
        raise InputError(
            f"scores must be finite numbers; {count}: {shown} for image {body.image_ids[k]!r}"
        )
    scores = np.empty(table.n_images, dtype=np.float64)
    scores[pos] = raw
    return scores


class SequesterClient:
    """A small synchronous client (httpx) for scripts, benchmarks and tests.

    Parameters
    ----------
    base_url : str
        The service's address (``http://host:port``); requests go to its API root.
    token : str
        The custodian's or a developer's bearer token.
    timeout : float, default 30
        Seconds per request.
    verify : bool, str or ssl.SSLContext, default True
        TLS verification, as httpx takes it.
    """

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 30.0, verify: Any = True
    ) -> None:
        import httpx

        self.http = httpx.Client(
            base_url=base_url.rstrip("/") + API,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            verify=verify,
        )

    def close(self) -> None:
        """Close the HTTP connection."""
        self.http.close()

    def __enter__(self) -> SequesterClient:
        """Return the client, so that ``with`` closes it at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the client (see :meth:`close`)."""
        self.close()

    def _ok(self, resp: Any) -> Any:
        if resp.status_code >= 400:
            raise FedrocError(f"HTTP {resp.status_code}: {resp.json().get('detail')}")
        return resp.json()

    def get(self, path: str, **params: Any) -> Any:
        """GET ``path`` under the API root and return the JSON reply.

        Raises
        ------
        FedrocError
            ``HTTP <status>: <detail>`` for an error status.
        """
        return self._ok(self.http.get(path, params=params or None))

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON to ``path`` under the API root and return the JSON reply.

        Raises
        ------
        FedrocError
            ``HTTP <status>: <detail>`` for an error status.
        """
        return self._ok(self.http.post(path, json=body))

    # custodian
    def add_test_set(self, image_ids: list[str], labels: list[int], name: str = "test set") -> int:
        """Upload a test set (custodian token) and return its id."""
        body = {"name": name, "image_ids": image_ids, "labels": labels}
        return int(self.post("/test-sets", body)["test_set_id"])

    def add_plan(self, test_set_id: int, **plan: Any) -> dict[str, Any]:
        """Create a plan for a test set (custodian token); ``plan`` are the plan's fields."""
        return dict(self.post(f"/test-sets/{test_set_id}/plans", plan))

    def add_developer(self, plan_id: int, name: str) -> str:
        """Register a developer for a plan (custodian token) and return the developer's token."""
        return str(self.post(f"/plans/{plan_id}/developers", {"name": name})["token"])

    # developer
    def submit(self, image_ids: list[str], scores: list[float], name: str = "model") -> int:
        """Submit a model's scores (developer token) and return the submission id."""
        body = {"name": name, "image_ids": image_ids, "scores": scores}
        return int(self.post("/submissions", body)["submission_id"])

    def query(
        self, submission_id: int, subset_id: int, reference_auc: float | None = None
    ) -> dict[str, Any]:
        """Ask the AUC of a submission on one test subset (developer token).

        ``reference_auc`` is the model's AUC on the developer's own data, which the thresholdout
        mechanism needs.
        """
        body: dict[str, Any] = {"submission_id": submission_id, "subset_id": subset_id}
        if reference_auc is not None:
            body["reference_auc"] = reference_auc
        return dict(self.post("/queries", body))
