"""Refuse before reading: authentication, rate limits and body size ahead of the API.

A pure ASGI middleware in front of the FastAPI app. For every request outside the public
paths (health, the OpenAPI schema and the offline docs) it checks, in this order and
before a byte of the body is read:

1. the ``Authorization: Bearer`` token (401 if missing, unknown or revoked);
2. the caller's rate (a token bucket per developer; 429 with ``Retry-After``);
3. the body size: a declared ``Content-Length`` above the limit is refused at once (413);
   a body without one (chunked) is read only up to the limit, then refused.

FastAPI itself reads and parses the body before it runs dependencies, which is why this
cannot be a dependency. The caller found is left in ``scope["state"]["principal"]``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Guard", "Principal", "RateLimiter"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``role`` is ``"admin"`` or ``"developer"``; ``key`` for rate limits."""

    role: str
    key: str
    developer: Any = None


class RateLimiter:
    """Token buckets: ``rate`` requests per second per key, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = float(rate)
        self.burst = max(1, int(burst))
        self._buckets: dict[str, tuple[float, float]] = {}

    def wait_time(self, key: str) -> float:
        """0 if a request may go now (and take a token), else seconds until it may."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate


async def _respond(
    send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The middleware; see the module docstring.

    Parameters
    ----------
    app : ASGI app
    authenticate : async callable
        ``token -> Principal or None``.
    public : callable
        ``path -> bool``: paths served without a token.
    max_body_bytes : int
        Largest request body accepted.
    limiter : RateLimiter
        Applied to developers (the custodian is not limited).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticate: Callable[[str], Awaitable[Principal | None]],
        public: Callable[[str], bool],
        max_body_bytes: int,
        limiter: RateLimiter,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.public = public
        self.max_body_bytes = int(max_body_bytes)
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        if not self.public(scope["path"]) and not await self._admit(scope, headers, send):
            return
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await _respond(send, 400, "Content-Length is not a number")
                return
            if length > self.max_body_bytes:
                await _respond(send, 413, self._too_large(f"{length} bytes declared"))
                return
            await self.app(scope, receive, send)
            return
        # No declared length (chunked, or none at all): read at most the limit, then replay.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _respond(send, 413, self._too_large("more than that sent"))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _admit(self, scope: Scope, headers: dict[bytes, bytes], send: Send) -> bool:
        """Authenticate the bearer token and apply the rate limit; False once refused."""
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = auth.partition(" ")
        challenge = [(b"www-authenticate", b"Bearer")]
        if scheme.lower() != "bearer" or not token.strip():
            # A header of another form (the token alone, say) is told the form; its value
            # is never echoed (it may be the token).
            detail = (
                "missing bearer token: send 'Authorization: Bearer <token>'"
                if not auth.strip()
                else "the Authorization header must read 'Bearer <token>'"
            )
            await _respond(send, 401, detail, challenge)
            return False
        principal = await self.authenticate(token.strip())
        if principal is None:
            await _respond(send, 401, "unknown or revoked token", challenge)
            return False
        scope.setdefault("state", {})["principal"] = principal
        if principal.role != "admin":
            wait = self.limiter.wait_time(principal.key)
            if wait > 0:
                retry = str(max(1, math.ceil(wait))).encode()
                await _respond(
                    send,
                    429,
                    f"rate limit: at most {self.limiter.rate:g} requests per second "
                    f"(bursts of {self.limiter.burst}); retry in {wait:.2f} s",
                    [(b"retry-after", retry)],
                )
                return False
        return True

    def _too_large(self, what: str) -> str:
        return (
            f"request body too large: at most {self.max_body_bytes} bytes are accepted "
            f"({what}); the operator sets the limit with --max-body-mb"
        )
