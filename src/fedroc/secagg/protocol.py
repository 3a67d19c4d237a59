r"""Secure aggregation of integer vectors in Z_2^k (Bonawitz et al. 2017) over a Federation.

The analyst is the server; the sites are the clients. Every message between two sites
(their Shamir shares) goes through the server encrypted for the recipient, as in the
paper, so the protocol runs on any :class:`~fedroc.federation.Transport`: each client
stage is a site function, each server stage one method of :class:`SecAggServer`.

Protocol (Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine
Learning", CCS 2017, figure 4 with its signatures; see below for its consistency round):

0. ``advertise_keys``: the server names the session's parameters: its id, its members (in
   order), the threshold t, the ring (bits, frac_bits), the input function and its
   arguments. Each site checks them against what *it* allows: every member must be on the
   roster its own operator configured (:mod:`fedroc.federation.roster`), t at least a
   majority of the members (:func:`minimum_threshold`), the ring at least 2^31 of integer
   headroom. It computes its private input vector x_u (a site function registered with
   ``release="secure"`` or ``"both"``, run through
   :func:`~fedroc.federation.site.aggregate_input` with its argument schema checked; its
   rows never leave), draws two X25519 key pairs (c for share encryption, s for masks) and
   sends both public keys, **signed with its long-term Ed25519 key** together with every
   parameter of the session and whether its policy may sum a quantity over a second set of
   sites (``secagg_rebind``; :func:`advertisement`). Survivors: U1.
1. ``share_keys``: the server broadcasts U1's public keys and signatures. Each site
   verifies every member's signature under its roster's key over the parameters it was
   itself given, so a key the server substituted, a member the roster does not know, or a
   member that was asked for another sum (other arguments, threshold, members, ring) is
   refused before any share leaves; so is a member that rebinds, by a site that does not
   (H16-2: such partners sum over the set without it, and the two sums subtract to its
   input). Then it draws a self-mask seed b_u and splits b_u and
   its mask key s_u^SK into Shamir shares of threshold t, one per site of U1, each
   encrypted (AES-GCM) under the key it agrees with the recipient. Survivors: U2.
2. ``masked_input``: the server forwards each site its shares. Each site sends
   ``y_u = x_u + PRG(b_u) + sum_{v in U2, v > u} PRG(s_uv) - sum_{v in U2, v < u} PRG(s_uv)``
   mod 2^k, where s_uv is the X25519 agreement of u and v and PRG the ChaCha20 stream.
   Survivors: U3, the sites whose inputs the sum contains.
3. ``unmask``: the server sends U3. Each site returns its share of b_v for every v in U3
   and of s_v^SK for every v that dropped (U2 \ U3), never both for the same v. The
   server reconstructs them, removes the self-masks of U3 and the pairwise masks that
   dropped sites left in the survivors' vectors, and obtains ``sum_{u in U3} x_u``. An
   input may make a statement about itself in the clear (its reply's ``statement``, signed
   by the input function: the clustered method's rows), which goes along with this reply,
   once the site has bound U3 (:attr:`SecureSum.statements`).

Every stage needs at least t survivors; below that the server aborts, tells the sites to
erase their secrets, and raises :class:`~fedroc.exceptions.ProtocolError` before anything
is unmasked. Each site also refuses to reveal shares for fewer than t survivors, and
answers each stage once, in order (a repeated identical request gets the same reply
again, which is how the server learns who dropped on an all-or-nothing transport).

Each site's policy decides which sums it takes part in (the analyst is untrusted): a session
of at least ``secagg_min_sites`` sites, and for each quantity (input function) only one set
of sites over its lifetime, checked against the session's sites when it joins and against
the survivors U3 before it reveals any share (kept in its ledger; sums over two sets of
sites would subtract to the inputs of the sites in only one). An input that carries DP
noise splits it into as many shares as the session's threshold t (the site's own
:attr:`~fedroc.federation.SiteContext.noise_shares`, never a number the analyst sends):
every sum the analyst can unmask holds at least t inputs, hence at least one full draw.

Threat model: the server (the analyst) may be actively malicious: it chooses the requests,
relays every message and may lie about who dropped; the sites follow the protocol and
none colludes with the server. The server learns the sum over U3 and the sets U1..U3 and
nothing else about an individual input: it cannot add members of its own (roster), swap
keys (signatures), ask members for different sums (signed parameters), or lower the
threshold below a majority. Lying about dropouts gets it nothing either: to open one
site's input it needs t shares of that site's self-mask seed (from sites told the site
survived) and t of its mask key (from sites told it dropped); each site answers the
unmasking stage once, so that takes 2t <= n sites, which a majority threshold excludes.
This is what Bonawitz et al.'s consistency round guards against when t may be lower, so
fedroc does without it. Not covered: sites that collude with the server (c colluders can
supply both kinds of shares: t > (n + c) / 2 keeps inputs safe; the site's minimum covers
c = 0), and sites that collude to reveal their own DP noise shares.

Overflow: the sum is exact modulo 2^k. A site refuses a ring with less than 2^31 of
integer headroom (``bits - frac_bits >= 32``), so where an input overflows is not the
analyst's to place, and its refusal names no magnitude.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedroc._docs import fill, fill_doc, parameters_of
from fedroc._results import ResultMixin, format_table, jsonable
from fedroc.exceptions import DisclosureError, InputError, ProtocolError, SiteError
from fedroc.federation.basic import check_exact_counts
from fedroc.federation.federation import Federation, Released
from fedroc.federation.records import Record, encode
from fedroc.federation.roster import SIGNATURE_BYTES
from fedroc.federation.schema import Bool, Bytes, Int, Names, Text
from fedroc.federation.site import (
    Reply,
    SiteContext,
    aggregate_input,
    get_site_function,
    site_function,
)
from fedroc.federation.transport import raise_site_failures
from fedroc.privacy import keys
from fedroc.privacy.ledger import ANY_QUANTITY, DPEvent
from fedroc.secagg import _crypto, shamir

__all__ = [
    "FUNCTIONS",
    "MIN_HEADROOM_BITS",
    "STAGES",
    "ClientState",
    "SecAggServer",
    "SecureSum",
    "ServerState",
    "advertisement",
    "check_secure_sum",
    "minimum_threshold",
    "secure_sum",
]

# -- stages, site functions and record keys -----------------------------------------------
STAGE_INIT = "init"
STAGE_ADVERTISE_KEYS = "advertise_keys"
STAGE_SHARE_KEYS = "share_keys"
STAGE_MASKED_INPUT = "masked_input"
STAGE_UNMASK = "unmask"
STAGE_DONE = "done"
STAGE_ABORTED = "aborted"
STAGES: tuple[str, ...] = (
    STAGE_ADVERTISE_KEYS,
    STAGE_SHARE_KEYS,
    STAGE_MASKED_INPUT,
    STAGE_UNMASK,
)
# The stage a party must have completed before each stage (both sides).
PREVIOUS: dict[str, str] = {
    STAGE_ADVERTISE_KEYS: STAGE_INIT,
    STAGE_SHARE_KEYS: STAGE_ADVERTISE_KEYS,
    STAGE_MASKED_INPUT: STAGE_SHARE_KEYS,
    STAGE_UNMASK: STAGE_MASKED_INPUT,
}
FUNCTIONS: dict[str, str] = {stage: f"fedroc.secagg.{stage}" for stage in STAGES}
FN_ABORT = "fedroc.secagg.abort"
FN_CHECK = "fedroc.secagg.check"
KEY_MEMBERS = "members"
KEY_EXACT_COUNTS = "exact_counts"
KEY_BUDGET = "budget"

KEY_SESSION = "session"
KEY_SITES = "sites"
KEY_THRESHOLD = "threshold"
KEY_BITS = "bits"
KEY_FRAC_BITS = "frac_bits"
KEY_INPUT = "input"
KEY_INPUT_ARGS = "input_args"
#: The most characters the input's arguments take as JSON (what a site accepts): 1 MiB,
#: room for the clustered method's second input (its edges and four pooled histograms) at
#: some 10,000 bins.
MAX_INPUT_ARGS = 1 << 20
KEY_C_PK = "c_pk"
KEY_S_PK = "s_pk"
KEY_SIGNATURE = "signature"  # a site's Ed25519 signature of its advertisement
KEY_SIGNATURES = "signatures"  # U1's signatures, in U1's order
#: Whether a site's policy lets it sum a quantity over a second set of sites
#: (``secagg_rebind``), in its signed advertisement; ``KEY_REBINDS``: U1's, one byte each.
KEY_REBIND = "rebind"
KEY_REBINDS = "rebinds"
KEY_LAYOUT = "layout"
KEY_ACTIVE = "active"  # the survivors of the previous stage, in site order
KEY_C_PKS = "c_pks"
KEY_S_PKS = "s_pks"
KEY_RECIPIENTS = "recipients"
KEY_SENDERS = "senders"
KEY_CIPHERTEXTS = "ciphertexts"
KEY_MASKED = "masked"
KEY_B_OWNERS = "b_owners"
KEY_B_SHARES = "b_shares"
KEY_SK_OWNERS = "sk_owners"
KEY_SK_SHARES = "sk_shares"
#: A site's statement about its input in the clear (:attr:`Reply.statement`), in its
#: unmasking reply; absent when the input makes none.
KEY_STATEMENT = "statement"

_PLAIN_BYTES = 2 + 2 + 2 * shamir.SHARE_BYTES
_CIPHER_BYTES = _crypto.NONCE_BYTES + _PLAIN_BYTES + _crypto.TAG_BYTES
_STATE_PREFIX = "fedroc.secagg/"
_REPLY_DP = "__dp_events"  # where a stored reply keeps its DP events (never sent as a value)
# The domain of the sites' signatures; v3 signs each member's secagg_rebind (H16-2).
_ADVERTISEMENT = b"fedroc-secagg/v3 advertisement\x00"
# Integer headroom a site keeps in the ring: an input overflows only beyond 2^31 (counts,
# sums of bounded scores never reach it), a bound the analyst cannot move with bits or
# frac_bits, so an overflow refusal is not an oracle it can steer.
MIN_HEADROOM_BITS = 32


# -- what a site accepts at each stage -------------------------------------------------------
_MAX_SITES = 1024
_SESSION = Text(64, alphabet="0123456789abcdef")
_KEYS = Bytes(_crypto.KEY_BYTES * _MAX_SITES)
SCHEMAS: dict[str, dict[str, Any]] = {
    STAGE_ADVERTISE_KEYS: {
        KEY_SESSION: _SESSION,
        KEY_SITES: Names(_MAX_SITES),
        KEY_THRESHOLD: Int(2, _MAX_SITES),
        KEY_BITS: Int(8, 64),
        KEY_FRAC_BITS: Int(0, 62),
        KEY_INPUT: Text(128),
        KEY_INPUT_ARGS: Text(MAX_INPUT_ARGS, default="{}"),
    },
    STAGE_SHARE_KEYS: {
        KEY_SESSION: _SESSION,
        KEY_ACTIVE: Names(_MAX_SITES),
        KEY_C_PKS: _KEYS,
        KEY_S_PKS: _KEYS,
        KEY_SIGNATURES: Bytes(SIGNATURE_BYTES * _MAX_SITES, default=b""),
        KEY_REBINDS: Bytes(_MAX_SITES, default=b""),
    },
    STAGE_MASKED_INPUT: {
        KEY_SESSION: _SESSION,
        KEY_ACTIVE: Names(_MAX_SITES),
        KEY_SENDERS: Names(_MAX_SITES),
        KEY_CIPHERTEXTS: Bytes(_CIPHER_BYTES * _MAX_SITES),
    },
    STAGE_UNMASK: {KEY_SESSION: _SESSION, KEY_ACTIVE: Names(_MAX_SITES)},
}


# -- fixed-point encoding of an input record -------------------------------------------------
def _encode_input(
    values: Mapping[str, Any], *, bits: int, frac_bits: int, site: str
) -> tuple[NDArray[np.uint64], str]:
    """Flatten a record into one vector of Z_2^bits and describe its layout (public)."""
    parts: list[NDArray[np.int64]] = []
    layout: list[list[Any]] = []
    limit = 2.0 ** (bits - 1)
    for key in sorted(values):
        arr = np.asarray(values[key])
        if arr.dtype.kind in "biu":
            kind, scaled = "int", arr.astype(np.float64)
        elif arr.dtype.kind == "f":
            kind, scaled = "float", arr.astype(np.float64) * 2.0**frac_bits
            if not np.isfinite(scaled).all():
                raise InputError(f"site {site!r}: secure input {key!r} is not finite")
        else:
            raise InputError(
                f"site {site!r}: secure input {key!r} has dtype {arr.dtype}; only numbers "
                "can be aggregated"
            )
        if scaled.size and float(np.abs(scaled).max()) >= limit:
            # No magnitude in the message: it would be a number computed from the rows.
            raise InputError(
                f"site {site!r}: secure input {key!r} does not fit the {bits}-bit ring at "
                f"{frac_bits} fraction bits; nothing was sent"
            )
        ints = arr.astype(np.int64) if kind == "int" else np.rint(scaled).astype(np.int64)
        parts.append(ints.reshape(-1))
        layout.append([key, kind, list(arr.shape)])
    vector = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    encoded = vector.view(np.uint64).copy()
    if bits < 64:
        encoded &= np.uint64((1 << bits) - 1)
    return encoded, json.dumps(layout, separators=(",", ":"))


def _decode_sum(total: NDArray[np.uint64], layout: str, *, bits: int, frac_bits: int) -> dict:
    if bits < 64:
        wrapped = total.astype(np.int64)
        signed = np.where(wrapped >= 2 ** (bits - 1), wrapped - 2**bits, wrapped)
    else:
        signed = total.view(np.int64)
    out: dict[str, Any] = {}
    offset = 0
    for key, kind, shape in json.loads(layout):
        size = int(np.prod(shape, dtype=np.int64))
        part = signed[offset : offset + size].reshape(shape)
        offset += size
        value: Any = part.astype(np.float64) / 2.0**frac_bits if kind == "float" else part.copy()
        out[key] = value.item() if value.ndim == 0 else value
    return out


# -- state ---------------------------------------------------------------------------------
@fill_doc
@dataclass
class ClientState:
    """One site's state in one session, kept in the site's state between stages.

    ``status`` is the last stage the site completed. Secrets (private keys, the input,
    the self-mask seed, the shares received) are erased as soon as they are no longer
    needed and at the end or abort of the session.

    Attributes
    ----------
    {secagg_session}
    site : str
        This site's name.
    status : str
        The last stage the site completed.
    layout : str
        The public layout of the input vector (keys, kinds and shapes, as JSON).
    vector : ndarray of uint64
        The site's encoded input x_u (erased once masked).
    c_sk, s_sk : bytes
        The site's X25519 private keys for share encryption and for masks.
    b_seed : bytes
        The self-mask seed b_u.
    u1, u2 : list of str
        Survivors of the key advertisement (U1) and of the key sharing (U2).
    c_pks, s_pks : bytes
        U1's public keys, in U1's order.
    share_owners : list of str
        Whose secrets this site holds shares of, in order.
    b_shares, sk_shares : bytes
        This site's share of each owner's self-mask seed and of its mask key.
    last_digest : str
        Digest of the last request answered (a repeated request gets the same reply).
    quantity : str
        The input function: what the site's partner-set rule is about.
    input_digest : str
        SHA-256 of the input's arguments, as the site received them.
    statement : bytes
        The input's statement in the clear (:attr:`~fedroc.federation.site.Reply.statement`),
        sent with the unmasking reply; not a secret.
    """

    session: str
    site: str
    status: str
    sites: list[str]
    threshold: int
    bits: int
    frac_bits: int
    layout: str = ""
    vector: NDArray[np.uint64] = field(default_factory=lambda: np.zeros(0, np.uint64))
    c_sk: bytes = b""
    s_sk: bytes = b""
    b_seed: bytes = b""
    u1: list[str] = field(default_factory=list)
    c_pks: bytes = b""
    s_pks: bytes = b""
    u2: list[str] = field(default_factory=list)
    share_owners: list[str] = field(default_factory=list)
    b_shares: bytes = b""  # this site's share of each owner's b, in share_owners order
    sk_shares: bytes = b""  # ... and of each owner's mask key
    last_digest: str = ""
    quantity: str = ""  # the input function: what the site's partner-set rule is about
    input_digest: str = ""  # SHA-256 of the input's arguments, as the site received them
    statement: bytes = b""  # the input's statement in the clear, sent when unmasking

    @property
    def index(self) -> int:
        """The site's position in ``sites``, from 1: its Shamir x-coordinate and mask order."""
        return self.sites.index(self.site) + 1  # Shamir x-coordinate and mask order

    def to_record(self) -> Record:
        """Return the state as a record, to keep in the site's state between stages."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ClientState:
        """Rebuild the state :meth:`to_record` wrote."""
        # A state stored before a field was added lacks it: the field's default.
        kwargs = {f.name: record[f.name] for f in fields(cls) if f.name in record}
        for name in ("sites", "u1", "u2", "share_owners"):
            kwargs[name] = list(kwargs[name])
        kwargs["vector"] = np.asarray(kwargs["vector"], dtype=np.uint64)
        return cls(**kwargs)

    def wipe(self, *, keep_shares: bool = False) -> None:
        """Erase the input, the private keys and the self-mask seed (and the shares held).

        Parameters
        ----------
        keep_shares : bool, default False
            Keep the shares of the other sites' secrets, which the unmasking stage still needs.
        """
        self.vector = np.zeros(0, np.uint64)
        self.c_sk = self.s_sk = self.b_seed = b""
        if not keep_shares:
            self.b_shares = self.sk_shares = b""


@fill_doc
@dataclass
class ServerState:
    """The server's state in one session: the stage reached and what it has received.

    Attributes
    ----------
    {secagg_session}
    input_function : str
        The site function each site evaluates as its input.
    input_args : str
        Its arguments, as canonical JSON.
    stage : str
        The last stage the server completed.
    layout : str
        The public layout of the input vectors (JSON).
    c_pks, s_pks : dict of str to bytes
        Each site's public keys for share encryption and for masks.
    signatures : dict of str to bytes
        Each site's Ed25519 signature of its advertisement.
    rebinds : dict of str to bool
        Whether each site's policy sums a quantity over a second set (signed with its keys).
    u1, u2, u3, u5 : list of str
        Survivors of the key advertisement, the key sharing, the masked input and the
        unmasking.
    inbox : dict of str to dict of str to bytes
        Encrypted shares to forward: ``inbox[recipient][sender]``.
    masked : dict of str to ndarray of uint64
        Each surviving site's masked input y_u.
    dropped : dict of str to str
        Sites that dropped out, with the stage and reason.
    """

    session: str
    sites: list[str]
    threshold: int
    bits: int
    frac_bits: int
    input_function: str
    input_args: str
    stage: str = STAGE_INIT
    layout: str = ""
    c_pks: dict[str, bytes] = field(default_factory=dict)
    s_pks: dict[str, bytes] = field(default_factory=dict)
    signatures: dict[str, bytes] = field(default_factory=dict)
    rebinds: dict[str, bool] = field(default_factory=dict)
    u1: list[str] = field(default_factory=list)
    u2: list[str] = field(default_factory=list)
    u3: list[str] = field(default_factory=list)
    u5: list[str] = field(default_factory=list)
    inbox: dict[str, dict[str, bytes]] = field(default_factory=dict)
    masked: dict[str, NDArray[np.uint64]] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)


# -- client side: one site function per stage ----------------------------------------------
def _state_key(session: str) -> str:
    return _STATE_PREFIX + session


def _digest(args: Mapping[str, Any]) -> str:
    return hashlib.sha256(encode({k: args[k] for k in sorted(args)})).hexdigest()


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{what} must be a list of site names")
    if len(set(value)) != len(value):
        raise ProtocolError(f"{what} names a site twice")
    return list(value)


def _chunks(blob: Any, size: int, count: int, what: str) -> list[bytes]:
    if not isinstance(blob, bytes) or len(blob) != size * count:
        raise ProtocolError(f"{what} must hold {count} item(s) of {size} bytes")
    return [blob[i * size : (i + 1) * size] for i in range(count)]


def _by_owner(owners: list[str], blob: Any, size: int, what: str) -> dict[str, bytes]:
    """Split ``blob`` into one ``size``-byte chunk per owner, keyed by owner (in order)."""
    return dict(zip(owners, _chunks(blob, size, len(owners), what), strict=True))


def _client_stage(stage: str) -> Callable[[Callable[..., Reply]], Callable[..., Reply]]:
    """Wrap a client stage: load the state, check the transition, store state and reply."""

    def wrap(handler: Callable[..., Reply]) -> Callable[..., Reply]:
        def run(ctx: SiteContext, args: Record) -> Reply:
            session = args.get(KEY_SESSION)
            if not isinstance(session, str) or not session:
                raise ProtocolError(f"{FUNCTIONS[stage]} needs a session id")
            stored = ctx.state.get(_state_key(session))
            state = None if stored is None else ClientState.from_record(stored)
            digest = _digest(args)
            if state is not None and state.status == stage and state.last_digest == digest:
                # The same request again (the server is finding out who dropped): the same
                # answer, nothing new revealed. Its DP events go along again, because the
                # analyst's record of the first answer was lost with the failed call; the
                # site's ledger then counts them twice, which errs on the safe side.
                stored_reply = ctx.state[_state_key(session) + "/reply"]
                values = {k: v for k, v in stored_reply.items() if k != _REPLY_DP}
                events = tuple(DPEvent.from_json(e) for e in stored_reply.get(_REPLY_DP, []))
                return Reply(values, kind="shares", dp=events, source=state.quantity)
            status = STAGE_INIT if state is None else state.status
            if status != PREVIOUS[stage]:
                raise ProtocolError(
                    f"site {ctx.site!r} refuses stage {stage!r} of session {session}: it is "
                    f"at stage {status!r} and expects {_next_stage(status)!r}"
                )
            reply = handler(ctx, state, args)
            assert isinstance(reply, Reply)
            new_state = ctx.state[_state_key(session)]
            new_state["status"] = stage
            new_state["last_digest"] = digest
            ctx.state[_state_key(session) + "/reply"] = {
                **reply.values,
                _REPLY_DP: [e.to_json() for e in reply.dp],
            }
            return reply

        run.__qualname__ = f"secagg_{stage}"
        site_function(FUNCTIONS[stage], schema=SCHEMAS[stage], rows=False)(run)
        return run

    return wrap


def _next_stage(status: str) -> str:
    for stage, previous in PREVIOUS.items():
        if previous == status:
            return stage
    return "nothing (the session is over)"


def _save(ctx: SiteContext, state: ClientState) -> None:
    ctx.state[_state_key(state.session)] = state.to_record()


def minimum_threshold(n_sites: int) -> int:
    """Return the smallest threshold a site accepts for ``n_sites`` members: a majority.

    With t > n / 2 a server that tells some sites that a site dropped and others that it
    survived cannot collect t shares of both its self-mask seed and its mask key (each
    site answers the unmasking stage once), so it cannot open any single input.

    Parameters
    ----------
    n_sites : int
        Members of the session.

    Returns
    -------
    int
        ``max(2, n_sites // 2 + 1)``.
    """
    return max(2, n_sites // 2 + 1)


def input_args_text(input_args: Mapping[str, Any] | None) -> str:
    """Return the input's arguments as the JSON text the sites receive (``input_args``)."""
    return json.dumps(jsonable(dict(input_args or {})), separators=(",", ":"))


def _input_digest(input_args: Mapping[str, Any]) -> str:
    """SHA-256 of an input's arguments in canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(input_args, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def advertisement(
    state: ClientState, site: str, c_pk: bytes, s_pk: bytes, rebind: bool = False
) -> bytes:
    """Return what ``site`` signs in a session: its two public keys and every parameter.

    ``state`` holds the parameters as the verifying site received them, so a signature
    verifies only if the signer was given the same session, members (in the same order),
    threshold, ring, input function and input arguments. The signer also states whether its
    policy lets it sum a quantity over a second set of sites (``secagg_rebind``): a site
    bound to one set refuses a session with such a member (H16-2).

    Parameters
    ----------
    state : ClientState
        The verifying (or signing) site's state, holding the session's parameters.
    site : str
        The site whose advertisement this is.
    c_pk, s_pk : bytes
        Its X25519 public keys for share encryption and for masks.
    rebind : bool, default False
        Its policy's ``secagg_rebind``, unless its ledger holds that it signed False before.

    Returns
    -------
    bytes
        The canonical JSON of the advertisement, the bytes the Ed25519 signature covers.
    """
    body = {
        "session": state.session,
        "sites": list(state.sites),
        "threshold": int(state.threshold),
        "bits": int(state.bits),
        "frac_bits": int(state.frac_bits),
        "input": state.quantity,
        "input_args_sha256": state.input_digest,
        "site": site,
        "c_pk": c_pk.hex(),
        "s_pk": s_pk.hex(),
        "rebind": bool(rebind),
    }
    return _ADVERTISEMENT + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _check_session(
    ctx: SiteContext,
    sites: list[str],
    threshold: int,
    quantity: str,
    *,
    function: str = FUNCTIONS[STAGE_ADVERTISE_KEYS],
    survivors: bool = False,
) -> None:
    """Refuse a session of ``quantity`` the site would not join, before it computes an input.

    Members off its roster, a threshold below its minimum, and what its policy says of the
    members (:meth:`DisclosurePolicy.check_aggregation`, ``function`` naming the refused
    one). The session's first stage and :data:`FN_CHECK` both ask here, so that the check
    answers as the session would.
    """
    roster_function = FUNCTIONS[STAGE_ADVERTISE_KEYS]
    identity = ctx.identity
    if identity is None:
        raise DisclosureError(
            f"site {ctx.site!r} refuses {roster_function!r}: it has no roster of sites to "
            "aggregate with (its operator configures its signing key and roster, see "
            "fedroc.federation.roster)",
            site=ctx.site,
            function=roster_function,
        )
    strangers = [v for v in sites if v not in identity.roster]
    if strangers:
        raise DisclosureError(
            f"site {ctx.site!r} refuses {roster_function!r}: site(s) {strangers} are not on the "
            "roster its operator configured",
            site=ctx.site,
            function=roster_function,
        )
    least = minimum_threshold(len(sites))
    if threshold < least:
        raise DisclosureError(
            f"site {ctx.site!r} refuses {roster_function!r}: a threshold of {threshold} for "
            f"{len(sites)} sites; it needs at least {least} (a majority), or a server that "
            "lies about dropouts could open an input",
            site=ctx.site,
            function=roster_function,
        )
    ctx.policy.check_aggregation(
        site=ctx.site,
        function=function,
        quantity=quantity,
        sites=sites,
        ledger=ctx.ledger,
        survivors=survivors,
    )


@_client_stage(STAGE_ADVERTISE_KEYS)
def _advertise_keys(ctx: SiteContext, state: ClientState | None, args: Record) -> Reply:
    sites = list(args[KEY_SITES])
    if ctx.site not in sites:
        raise ProtocolError(f"site {ctx.site!r} is not among the session's sites {sites}")
    threshold, bits, frac_bits = (int(args[k]) for k in (KEY_THRESHOLD, KEY_BITS, KEY_FRAC_BITS))
    _check_parameters(len(sites), threshold, bits, frac_bits)
    quantity = str(args[KEY_INPUT])
    _check_session(ctx, sites, threshold, quantity)
    try:
        input_args = json.loads(str(args[KEY_INPUT_ARGS]))
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
        raise InputError(f"site {ctx.site!r}: the input arguments are not JSON") from None
    if not isinstance(input_args, dict):
        raise InputError(f"site {ctx.site!r}: the input arguments must be a JSON object")
    try:
        digest = _input_digest(input_args)
    except ValueError:
        raise InputError(
            f"site {ctx.site!r}: the input arguments hold a non-finite number"
        ) from None
    # The input runs with the session in view: DP noise is split into t shares, since the
    # protocol unmasks no sum of fewer than t inputs.
    session_ctx = replace(
        ctx, sites=tuple(sites), noise_shares=threshold, session=str(args[KEY_SESSION])
    )
    result = aggregate_input(session_ctx, quantity, input_args)
    vector, layout = _encode_input(result.values, bits=bits, frac_bits=frac_bits, site=ctx.site)
    state = ClientState(
        session=str(args[KEY_SESSION]),
        site=ctx.site,
        status=STAGE_INIT,
        sites=sites,
        threshold=threshold,
        bits=bits,
        frac_bits=frac_bits,
        layout=layout,
        vector=vector,
        c_sk=_crypto.new_private_key(),
        s_sk=_crypto.new_private_key(),
        quantity=quantity,
        input_digest=digest,
        statement=bytes(result.statement),
    )
    _save(ctx, state)
    c_pk, s_pk = _crypto.public_key(state.c_sk), _crypto.public_key(state.s_sk)
    assert ctx.identity is not None  # checked by _check_session
    rebind = ctx.policy.rebinds(ctx.ledger)
    signature = ctx.identity.sign(advertisement(state, ctx.site, c_pk, s_pk, rebind))
    # The input's counts and DP events are declared here, so the site's policy checks
    # them (and charges the budget) before any key material is exchanged.
    return Reply(
        {
            KEY_C_PK: c_pk,
            KEY_S_PK: s_pk,
            KEY_SIGNATURE: signature,
            KEY_REBIND: int(rebind),
            KEY_LAYOUT: layout,
        },
        kind="shares",
        counts=result.counts,
        dp=result.dp,
        source=quantity,
    )


def _rebinds(blob: Any, n: int) -> list[bool]:
    """Read U1's ``secagg_rebind`` statements, one byte (0 or 1) a member, in U1's order.

    None relayed reads as every member bound to one set: each statement is checked by its
    member's signature, which a member that rebinds did not give over 0.
    """
    data = bytes(blob or b"")
    if not data:
        return [False] * n
    if len(data) != n or any(b > 1 for b in data):
        raise ProtocolError(f"{KEY_REBINDS!r} must hold one byte, 0 or 1, for each of {n} sites")
    return [b == 1 for b in data]


def _check_members_bound(ctx: SiteContext, state: ClientState, rebinding: list[str]) -> None:
    """Refuse a session with a member that may sum this quantity over a second set of sites.

    A site binds each quantity to one set of sites for its lifetime, which stops sums over
    two sets only if its partners are bound too: partners of ``secagg_rebind`` summed it over
    {A, B, C} and again over {A, B}, and the difference was C's exact input although C kept
    every default (H16-2, review 16: its calibration counts and positives per bin, bins
    under q rows included, 20 of 20). Each member signs whether its policy rebinds
    (:func:`advertisement`), so a site bound to one set refuses, before any share or
    masked input leaves it, a session with such a member. A site that rebinds itself has
    accepted that risk for its own input and does not check. What a member signed holds on
    its ledger: one that signed it does not rebind stays bound whatever its policy says
    later (:meth:`~fedroc.privacy.DisclosurePolicy.rebinds`, H18-1).
    """
    others = [v for v in rebinding if v != ctx.site]
    if others and not ctx.policy.rebinds(ctx.ledger):
        function = FUNCTIONS[STAGE_SHARE_KEYS]
        raise DisclosureError(
            f"site {ctx.site!r} refuses {function!r}: member(s) {others} of the secure sum of "
            f"{state.quantity!r} may sum it over another set of sites (secagg_rebind in their "
            "policies), and two sums over sets that differ by this site subtract to its input; "
            "sum without those members, or without this site",
            site=ctx.site,
            function=function,
        )


def _associated(session: str, sender: str, recipient: str) -> bytes:
    return json.dumps([session, sender, recipient]).encode()


@_client_stage(STAGE_SHARE_KEYS)
def _share_keys(ctx: SiteContext, state: ClientState, args: Record) -> Reply:
    u1 = _survivors(state, args, state.sites, "share keys")
    c_pks = _chunks(args.get(KEY_C_PKS), _crypto.KEY_BYTES, len(u1), KEY_C_PKS)
    s_pks = _chunks(args.get(KEY_S_PKS), _crypto.KEY_BYTES, len(u1), KEY_S_PKS)
    me = u1.index(ctx.site)
    if c_pks[me] != _crypto.public_key(state.c_sk) or s_pks[me] != _crypto.public_key(state.s_sk):
        raise ProtocolError(f"site {ctx.site!r}: the server relayed a wrong key for this site")
    # Every member's keys must carry its signature, under the key the site's roster holds
    # for it, over the parameters this site was given: no substituted key, no stranger, no
    # member that was asked for another sum.
    signatures = _chunks(args.get(KEY_SIGNATURES), SIGNATURE_BYTES, len(u1), KEY_SIGNATURES)
    rebinds = _rebinds(args.get(KEY_REBINDS), len(u1))
    roster = None if ctx.identity is None else ctx.identity.roster
    forged = [
        v
        for v, c_pk, s_pk, sig, rebind in zip(u1, c_pks, s_pks, signatures, rebinds, strict=True)
        if roster is None or not roster.verify(v, advertisement(state, v, c_pk, s_pk, rebind), sig)
    ]
    if forged:
        raise ProtocolError(
            f"site {ctx.site!r}: the keys of {forged} do not carry their signature over this "
            "session's parameters (keys substituted, a site off the roster, the sites were "
            "given different parameters, or a site runs a fedroc version of another "
            f"protocol than {_ADVERTISEMENT[:-1].decode()!r}); it shares nothing"
        )
    _check_members_bound(ctx, state, [v for v, r in zip(u1, rebinds, strict=True) if r])
    if not ctx.policy.rebinds(ctx.ledger):
        # What it signed holds for the ledger's lifetime, bound before any share leaves: the
        # other members join on it, and a secagg_rebind its operator set afterwards summed the
        # quantity again without one of them (H18-1: their input by difference, 20 of 20).
        ctx.ledger.bind(keys.SECAGG_ONE_SET, True)
    state.b_seed = _crypto.random_bytes(_crypto.KEY_BYTES)
    n = len(state.sites)
    sk_shares = shamir.split(int.from_bytes(state.s_sk, "big"), n=n, threshold=state.threshold)
    b_shares = shamir.split(int.from_bytes(state.b_seed, "big"), n=n, threshold=state.threshold)
    recipients, blobs = [], []
    for v, c_pk in zip(u1, c_pks, strict=True):
        x = state.sites.index(v)
        if v == ctx.site:
            continue
        plain = (
            state.index.to_bytes(2, "big")
            + (x + 1).to_bytes(2, "big")
            + shamir.share_to_bytes(sk_shares[x])
            + shamir.share_to_bytes(b_shares[x])
        )
        key = _crypto.agree(
            state.c_sk, c_pk, purpose=_crypto.PURPOSE_SHARES, session=state.session.encode()
        )
        recipients.append(v)
        blobs.append(_crypto.seal(key, plain, _associated(state.session, ctx.site, v)))
    own = state.index - 1
    state.share_owners = [ctx.site]
    state.sk_shares = shamir.share_to_bytes(sk_shares[own])
    state.b_shares = shamir.share_to_bytes(b_shares[own])
    state.u1, state.c_pks, state.s_pks = u1, b"".join(c_pks), b"".join(s_pks)
    _save(ctx, state)
    return Reply({KEY_RECIPIENTS: recipients, KEY_CIPHERTEXTS: b"".join(blobs)}, kind="shares")


# Ledger keys (+ session id): the set a site sent its masked input over in a session, and
# that it revealed its unmasking shares in it (R12-2, :func:`_one_set_in_flight`).
MASKED_KEY = keys.SECAGG_MASKED
UNMASKED_KEY = keys.SECAGG_UNMASKED


def _one_set_in_flight(ctx: SiteContext, state: ClientState, u2: Sequence[str]) -> None:
    """Refuse to send a masked input over another set than the site's sums are over.

    The site binds its partners when it first reveals unmasking shares, but its masked
    input can be unmasked without it: the other survivors reveal their shares of its
    self-mask, and a majority of them rebuilds it. Two sessions joined side by side before
    any binding, over {a, b, c} and {a, b, d}, each unmasked by two of its members (b and
    c, a and d: each site reveals once, for one set) both came back, and their difference
    was c's exact tree minus d's (review 12, R12-2: 10 of 10 federations). So before its
    masked input leaves, the site checks the set it may be summed over (U2, the sum's
    survivors are among them) against its bound partners and against the sets of the
    sessions it sent a masked input in and has not unmasked yet (its ledger: other
    processes, restarts), and records it (until it is bound: then its bound set is the only
    one). Two sums over different sets then need a majority of members that reveal for
    each, each site revealing for one set: no majority threshold allows it. Call it holding
    the ledger's transaction.
    """
    members = sorted(set(u2))
    function = FUNCTIONS[STAGE_MASKED_INPUT]
    _check_survivor_set(ctx, state, function, members)
    if _partners_bound(ctx):
        return
    _refuse_another_set_in_flight(ctx, members, function, session=state.session)
    ctx.ledger.bind(MASKED_KEY + state.session, members)


def _partners_bound(ctx: SiteContext) -> bool:
    """Whether the site's sums are bound to one set (or may change it: ``secagg_rebind``).

    Bound, every later sum of the site is over its bound set (checked before this), and at
    least a threshold of that set is bound to it too: the sets in flight no longer matter.
    """
    return ctx.policy.rebinds(ctx.ledger) or ctx.ledger.partners(ANY_QUANTITY) is not None


def _refuse_another_set_in_flight(
    ctx: SiteContext, members: list[str], function: str, *, session: str | None = None
) -> None:
    """Refuse a sum over ``members`` while a session over another set is in flight.

    In flight: the site sent its masked input in it (its ledger's :data:`MASKED_KEY`) and has
    not unmasked it; ``session``, the one asking, counts as in flight (its own earlier set).
    The masked-input stage asks (:func:`_one_set_in_flight`), and the check before a sum
    (:data:`FN_CHECK`), so that it refuses before the input is computed and charged.
    """
    bindings = ctx.ledger.bindings
    for key, value in bindings.items():
        if not key.startswith(MASKED_KEY) or list(value) == members:
            continue
        other = key[len(MASKED_KEY) :]
        if other == session or UNMASKED_KEY + other not in bindings:
            raise DisclosureError(
                f"site {ctx.site!r} refuses {function!r}: it sent its masked input over the "
                f"sites {list(value)} in a session it has not unmasked, and will not over a "
                f"different set {members} at the same time (two sums over two sets subtract "
                "to the inputs of the sites in one of them, and the other members can unmask "
                "a site's input without it); finish or repeat that session over its sites",
                site=ctx.site,
                function=function,
            )


@_client_stage(STAGE_MASKED_INPUT)
def _masked_input(ctx: SiteContext, state: ClientState, args: Record) -> Reply:
    u2 = _survivors(state, args, state.u1, "mask its input")
    with ctx.ledger.transaction():
        _one_set_in_flight(ctx, state, u2)
    senders = list(args[KEY_SENDERS])
    if sorted(senders) != sorted(set(u2) - {ctx.site}):
        raise ProtocolError(
            f"site {ctx.site!r}: shares arrived from {sorted(senders)}, expected one from each "
            f"of {sorted(set(u2) - {ctx.site})}"
        )
    blobs = _chunks(args.get(KEY_CIPHERTEXTS), _CIPHER_BYTES, len(senders), KEY_CIPHERTEXTS)
    c_pks = _by_owner(state.u1, state.c_pks, 32, "c_pks")
    s_pks = _by_owner(state.u1, state.s_pks, 32, "s_pks")
    session = state.session.encode()
    sk_parts, b_parts = [state.sk_shares], [state.b_shares]
    for u, blob in zip(senders, blobs, strict=True):
        key = _crypto.agree(state.c_sk, c_pks[u], purpose=_crypto.PURPOSE_SHARES, session=session)
        plain = _crypto.open_sealed(key, blob, _associated(state.session, u, ctx.site))
        sender_x, my_x = int.from_bytes(plain[:2], "big"), int.from_bytes(plain[2:4], "big")
        if sender_x != state.sites.index(u) + 1 or my_x != state.index:
            raise ProtocolError(f"site {ctx.site!r}: a share from {u!r} names the wrong parties")
        sk_parts.append(plain[4 : 4 + shamir.SHARE_BYTES])
        b_parts.append(plain[4 + shamir.SHARE_BYTES :])
    state.share_owners = [ctx.site, *senders]
    state.sk_shares, state.b_shares = b"".join(sk_parts), b"".join(b_parts)
    size, bits = state.vector.size, state.bits
    y = state.vector + _crypto.expand_mask(
        _crypto.derive(state.b_seed, purpose=_crypto.PURPOSE_SELF_MASK, session=session),
        size,
        bits,
    )
    for v in u2:
        if v == ctx.site:
            continue
        mask = _crypto.expand_mask(
            _crypto.agree(state.s_sk, s_pks[v], purpose=_crypto.PURPOSE_MASK, session=session),
            size,
            bits,
        )
        # Modular arithmetic: uint64 wraps around, which is exactly Z_2^64.
        if state.index < state.sites.index(v) + 1:
            y += mask
        else:
            y -= mask
    if bits < 64:
        y &= np.uint64((1 << bits) - 1)
    state.u2 = u2
    state.wipe(keep_shares=True)  # the input, the seed and the private keys are done
    _save(ctx, state)
    return Reply({KEY_MASKED: y}, kind="shares")


def _check_survivor_set(
    ctx: SiteContext, state: ClientState, function: str, members: list[str]
) -> None:
    """Check the set a sum is over against the policy and the site's bound partners."""
    ctx.policy.check_aggregation(
        site=ctx.site,
        function=function,
        quantity=state.quantity,
        sites=members,
        ledger=ctx.ledger,
        survivors=True,
    )


@_client_stage(STAGE_UNMASK)
def _unmask(ctx: SiteContext, state: ClientState, args: Record) -> Reply:
    u3 = _survivors(state, args, state.u2, "reveal shares")
    # The survivors are the set the sum is over: check it against, or bind it as, the
    # set this quantity is aggregated over (persistently, before any share leaves).
    function = FUNCTIONS[STAGE_UNMASK]
    with ctx.ledger.transaction():
        _check_survivor_set(ctx, state, function, u3)
        ctx.ledger.bind_partners(state.quantity, u3)
        # And for every input: two functions can count the same thing (calibration bins and
        # a histogram tree), and their sums over two sets would subtract as well.
        ctx.ledger.bind_partners(ANY_QUANTITY, u3)
        if MASKED_KEY + state.session in ctx.ledger.bindings:  # resolved: no longer in flight
            ctx.ledger.bind(UNMASKED_KEY + state.session, True)
    size = shamir.SHARE_BYTES
    b_shares = _by_owner(state.share_owners, state.b_shares, size, "b")
    sk_shares = _by_owner(state.share_owners, state.sk_shares, size, "sk")
    dropped = [v for v in state.u2 if v not in u3]
    # For each site either the share of its self-mask seed (it survived) or of its mask
    # key (it dropped), never both: both would unmask its input.
    reply = {
        KEY_B_OWNERS: list(u3),
        KEY_B_SHARES: b"".join(b_shares[v] for v in u3),
        KEY_SK_OWNERS: dropped,
        KEY_SK_SHARES: b"".join(sk_shares[v] for v in dropped),
    }
    if state.statement:
        # The input's statement in the clear, once the set of sites the sum is over is bound.
        reply[KEY_STATEMENT] = state.statement
    state.wipe()
    _save(ctx, state)
    return Reply(reply, kind="shares")


def _survivors(state: ClientState, args: Record, allowed: list[str], what: str) -> list[str]:
    """Return the stage's survivors (named by the server), checked against the stage before."""
    active = list(args[KEY_ACTIVE])
    if state.site not in active:
        raise ProtocolError(f"site {state.site!r} is not among the survivors {active}")
    outside = [v for v in active if v not in allowed]
    if outside:
        raise ProtocolError(f"site {state.site!r}: survivors {outside} were not in {allowed}")
    if len(active) < state.threshold:
        raise ProtocolError(
            f"site {state.site!r} refuses to {what}: {len(active)} survivor(s), below the "
            f"threshold of {state.threshold}"
        )
    return active


@site_function(FN_ABORT, schema={KEY_SESSION: _SESSION}, rows=False)
def _abort(ctx: SiteContext, args: Record) -> Reply:
    session = str(args.get(KEY_SESSION, ""))
    stored = ctx.state.get(_state_key(session))
    if stored is not None:
        state = ClientState.from_record(stored)
        state.wipe()
        state.status = STAGE_ABORTED
        _save(ctx, state)
        ctx.state.pop(_state_key(session) + "/reply", None)
    return Reply({"aborted": stored is not None})


@site_function(
    FN_CHECK,
    schema={
        KEY_INPUT: Text(128),
        KEY_MEMBERS: Names(_MAX_SITES),
        KEY_THRESHOLD: Int(2, _MAX_SITES),
        KEY_EXACT_COUNTS: Bool(default=False),
        KEY_BUDGET: Bool(default=False),
    },
    rows=False,
)
def _check(ctx: SiteContext, args: Record) -> Reply:
    """Answer whether the site would join a secure sum of ``input`` over ``members``.

    The checks the session runs before the site computes its input (its roster, the
    threshold, the functions its policy allows, ``secagg_min_sites`` and the one set of
    partners bound in its ledger), and one it runs after: until its partners are bound, the
    set of a session it sent its masked input in and has not unmasked, which the masked-input
    stage refuses another set for, once the input was charged. On the rows of nobody: it
    reads no data, binds nothing and releases nothing but what its operator configured and
    earlier sessions bound (what the session's own refusal would say). So that an analyst
    learns before a release it cannot take back (the ROC-GLM's noisy scores, spent before
    their secure table) that the sum would be refused; the refusal is the one the session
    gives, naming the input function. With ``exact_counts`` (the input releases exact
    binned counts) also whether the site released such counts in the clear before
    (:func:`fedroc.federation.basic.check_exact_counts`).
    With ``budget``, the reply adds ``epsilon_left``, the epsilon its policy's limit leaves
    after what its ledger has charged, so that a run of several DP releases (the histogram's
    class counts, then its tree) can be refused before the first when the whole would not
    fit. It tells what a budget refusal already tells (the limit and the spend), about no row.
    """
    members = list(args[KEY_MEMBERS])
    if ctx.site not in members:
        raise InputError(f"site {ctx.site!r} is not among the members {members}")
    quantity = str(args[KEY_INPUT])
    get_site_function(quantity)  # an unknown input is an InputError naming it
    _check_session(
        ctx, members, int(args[KEY_THRESHOLD]), quantity, function=quantity, survivors=True
    )
    ctx.policy.check_function(ctx.site, quantity)  # the session's input checks it next
    if not _partners_bound(ctx):
        # The session would refuse at its masked input, after its input was charged.
        _refuse_another_set_in_flight(ctx, sorted(set(members)), quantity)
    if args[KEY_EXACT_COUNTS]:
        check_exact_counts(ctx, quantity, "secure")
    if args[KEY_BUDGET]:
        return Reply({"joins": True, "epsilon_left": ctx.policy.epsilon_left(ctx.ledger)})
    return Reply({"joins": True})


def check_secure_sum(
    federation: Federation,
    input_function: str,
    *,
    sites: Iterable[str] | None = None,
    threshold: int | None = None,
    exact_counts: bool = False,
    budget: bool = False,
    allow_dropouts: bool = False,
) -> dict[str, float]:
    """Ask every member whether it would join a secure sum of ``input_function``.

    Call it before anything a refused sum would waste: each site runs the checks of the
    session's first stage (``fedroc.secagg.check``) without computing, binding or releasing
    anything. A site whose policy lists its ``allowed_functions`` lists the check with the
    stages of the protocol (``fedroc.secagg.*``).

    Parameters
    ----------
    federation : Federation
        The sites.
    input_function : str
        The aggregate site function the sum will run.
    sites : iterable of str, optional
        The members (default: every site).
    threshold : int, optional
        The sum's threshold (default: the majority, as :func:`secure_sum`).
    exact_counts : bool, default False
        The input releases exact binned counts (calibration bins, the ROC-GLM's table, an
        exact tree): ask too whether a site released such counts in the clear before, which
        binds it to the clear way (:func:`fedroc.federation.basic.bind_exact_counts`).
    budget : bool, default False
        Ask too how much of its epsilon limit each member has left.
    allow_dropouts : bool, default False
        As the sum's: a member that fails the check (gone, not refusing) is left out, as
        the sum would drop it, while ``threshold`` members answer. A site that is down
        answers no call, and the sum goes on without it: the check must not stop it first.

    Returns
    -------
    dict of str to float
        With ``budget``, each answering member's epsilon left (``inf`` without a limit);
        else empty.

    Raises
    ------
    DisclosureError
        A member's refusal, as the session would give it: too few members for its
        ``secagg_min_sites``, a set of partners other than the one it is bound to (or, not
        bound yet, than a session's it sent its masked input in and has not unmasked), a member
        off its roster, an input function (or the check) its policy does not allow, exact
        binned counts released in the clear before.
    InputError
        Fewer than two members, a threshold out of range or an unknown site.
    SiteError
        A member does not know ``input_function``.
    """
    names = list(sites) if sites is not None else list(federation.site_names)
    t = minimum_threshold(len(names)) if threshold is None else int(threshold)
    _check_parameters(len(names), t, 64, 0, str(input_function))
    args: dict[str, Any] = {
        "input": str(input_function),
        "members": names,
        "threshold": t,
        "exact_counts": bool(exact_counts),
        **({KEY_BUDGET: True} if budget else {}),
    }
    try:
        replies = federation.call(FN_CHECK, sites=names, **args)
    except SiteError:
        if not allow_dropouts:
            raise
        # One error names the failed sites together, refusals among them: ask each alone
        # to tell a site that is gone (left out) from one that refuses (a refusal still).
        replies, refused, gone = {}, {}, {}
        for name in names:
            try:
                replies.update(federation.call(FN_CHECK, sites=[name], **args))
            except DisclosureError as exc:
                refused[name] = exc
            except SiteError as exc:
                gone[name] = exc
        raise_site_failures(FN_CHECK, refused)
        if len(replies) < t:
            raise_site_failures(FN_CHECK, gone)
    if not budget:
        return {}
    return {name: float(r["epsilon_left"]) for name, r in replies.items()}


def _check_parameters(
    n: int, threshold: int, bits: int, frac_bits: int, quantity: str | None = None
) -> None:
    if n < 2:
        # The analyst's own check names what is summed: a method's user saw only "secure
        # aggregation needs at least 2 sites; got 1" (evaluate --method histogram, one --site).
        what = "" if quantity is None else f" of {quantity!r}"
        raise InputError(
            f"secure aggregation{what} needs at least 2 sites (and as many as the sites' "
            f"policies ask, secagg_min_sites, default 3); got {n} site(s)"
        )
    if not 2 <= threshold <= n:
        raise InputError(f"threshold must lie in [2, {n}] for {n} sites; got {threshold}")
    if not MIN_HEADROOM_BITS <= bits <= 64:
        raise InputError(f"bits must lie in [{MIN_HEADROOM_BITS}, 64]; got {bits}")
    if not 0 <= frac_bits <= bits - MIN_HEADROOM_BITS:
        raise InputError(
            f"frac_bits must lie in [0, {bits - MIN_HEADROOM_BITS}] for a {bits}-bit ring (the "
            f"sites keep 2^{MIN_HEADROOM_BITS - 1} of integer headroom); got {frac_bits}"
        )


# -- server side ---------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class SecureSum(ResultMixin):
    """The outcome of one secure-aggregation session.

    Attributes
    ----------
    values : dict
        The sum over ``sites`` of each input value (int64 arrays for integer inputs,
        float64 for fixed-point ones; Python numbers for scalars).
    sites : list of str
        Sites whose inputs the sum contains (U3).
    dropped : dict
        Sites that dropped out, with the stage and reason.
    threshold, bits : int
    session : str
    released : Released
        What left the sites during the session.
    statements : dict of str to bytes
        The statement each site made about its input in the clear (its input function's
        :attr:`~fedroc.federation.site.Reply.statement`), for the sites that made one.
    """

    values: dict[str, Any]
    sites: list[str]
    dropped: dict[str, str]
    threshold: int
    bits: int
    session: str
    released: Released
    statements: dict[str, bytes] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        """Return the sum of input value ``key`` (``result["counts"]``)."""
        return self.values[key]

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-ready types (the statements as hex)."""
        out = super().to_dict()
        out["statements"] = {name: blob.hex() for name, blob in self.statements.items()}
        return out

    def summary(self) -> str:
        """Format who is in the sum, who dropped out, the threshold, ring and traffic."""
        rows: list[tuple[str, Any]] = [
            ("sites in the sum", ", ".join(self.sites)),
            ("dropped", ", ".join(self.dropped) or "none"),
            ("threshold", self.threshold),
            ("ring", f"Z_2^{self.bits}"),
            ("rounds", self.released.rounds),
            ("bytes from sites", sum(self.released.bytes_received.values())),
        ]
        return format_table(rows, title="Secure aggregation")


@fill_doc
class SecAggServer:
    """The analyst's side of secure aggregation: one method per stage.

    Parameters
    ----------
    {federation}
    input_function : str
        Name of a site function registered with ``release="secure"`` or ``"both"``, which
        the sites evaluate on their rows.
    input_args : mapping, optional
        Its arguments (JSON-serialisable numbers, strings and lists).
    sites : iterable of str, optional
        The sites taking part (default: all).
    threshold : int, optional
        Survivors needed at every stage and shares needed to rebuild a secret; default
        ``n // 2 + 1`` (at least 2), the smallest the sites accept (:func:`minimum_threshold`).
    bits : int, default 64
        The ring Z_2^bits (at least 32).
    frac_bits : int, default 32
        Fixed-point scale of float inputs (their values are rounded to 2^-frac_bits); at
        most ``bits - 32``: the sites keep 2^31 of integer headroom.
    allow_dropouts : bool, default False
        If False, the first site that fails aborts the session with its error; if True,
        sites that fail are dropped and the sum covers the survivors, down to
        ``threshold`` sites.
    """

    def __init__(
        self,
        federation: Federation,
        input_function: str,
        input_args: Mapping[str, Any] | None = None,
        *,
        sites: Iterable[str] | None = None,
        threshold: int | None = None,
        bits: int = 64,
        frac_bits: int = 32,
        allow_dropouts: bool = False,
    ) -> None:
        names = list(sites) if sites is not None else list(federation.site_names)
        unknown = [n for n in names if n not in federation.site_names]
        if unknown:
            raise InputError(f"unknown site(s) {unknown}; sites are {federation.site_names}")
        n = len(names)
        t = minimum_threshold(n) if threshold is None else int(threshold)
        _check_parameters(n, t, int(bits), int(frac_bits), input_function)
        text = input_args_text(input_args)
        if len(text) > MAX_INPUT_ARGS:
            raise InputError(
                f"the arguments of {input_function!r} take {len(text)} characters as JSON; "
                f"a secure aggregation carries at most {MAX_INPUT_ARGS}"
            )
        self.federation = federation
        self.allow_dropouts = bool(allow_dropouts)
        self._mark = federation.mark()
        self.state = ServerState(
            session=_crypto.random_bytes(16).hex(),
            sites=names,
            threshold=t,
            bits=int(bits),
            frac_bits=int(frac_bits),
            input_function=str(input_function),
            input_args=text,
        )

    # -- helpers ----------------------------------------------------------------------
    def _expect(self, stage: str) -> None:
        current = self.state.stage
        if current != PREVIOUS[stage]:
            raise ProtocolError(
                f"secure aggregation session {self.state.session}: stage {stage!r} needs "
                f"stage {PREVIOUS[stage]!r} first; the session is at {current!r}"
            )

    def _call(self, stage: str, args_by_site: Mapping[str, Record]) -> dict[str, Record]:
        """Send each site its arguments for ``stage`` (with the session's id); the replies."""
        function = FUNCTIONS[stage]
        session = {KEY_SESSION: self.state.session}
        args_by_site = {name: {**session, **args} for name, args in args_by_site.items()}
        try:
            return self.federation.call_each(function, args_by_site)
        except (SiteError, DisclosureError):
            if not self.allow_dropouts:
                self.abort()
                raise
        # Someone failed. The transport gives all or nothing, so ask each site again:
        # those that answered repeat their answer, those that failed are dropped.
        replies: dict[str, Record] = {}
        for name, args in args_by_site.items():
            try:
                replies.update(self.federation.call_each(function, {name: args}))
            except (SiteError, DisclosureError) as exc:
                self.state.dropped[name] = f"{stage}: {exc}"
        return replies

    def _require(self, survivors: Sequence[str], stage: str) -> None:
        if len(survivors) >= self.state.threshold:
            return
        dropped = ", ".join(f"{k!r} ({v})" for k, v in self.state.dropped.items())
        self.abort()
        raise ProtocolError(
            f"secure aggregation aborted at stage {stage!r}: {len(survivors)} of "
            f"{len(self.state.sites)} sites remain, below the threshold of "
            f"{self.state.threshold}; nothing was unmasked. Dropped: {dropped}"
        )

    def _complete(self, stage: str, survivors: list[str]) -> list[str]:
        """Record that ``stage`` ran; return its survivors, or abort below the threshold."""
        self.state.stage = stage
        self._require(survivors, stage)
        return survivors

    def abort(self) -> None:
        """Stop the session and ask every site to erase its secrets (best effort)."""
        if self.state.stage in (STAGE_DONE, STAGE_ABORTED):
            return
        self.state.stage = STAGE_ABORTED
        self.state.masked.clear()
        for name in self.state.sites:
            try:
                self.federation.call_each(FN_ABORT, {name: {KEY_SESSION: self.state.session}})
            except Exception:  # a site that is gone has nothing left to erase
                pass

    # -- stages -----------------------------------------------------------------------
    def advertise_keys(self) -> list[str]:
        """Stage 0: sites compute their inputs and send their two public keys."""
        self._expect(STAGE_ADVERTISE_KEYS)
        s = self.state
        args = {
            KEY_SITES: s.sites,
            KEY_THRESHOLD: s.threshold,
            KEY_BITS: s.bits,
            KEY_FRAC_BITS: s.frac_bits,
            KEY_INPUT: s.input_function,
            KEY_INPUT_ARGS: s.input_args,
        }
        replies = self._call(STAGE_ADVERTISE_KEYS, {name: args for name in s.sites})
        layouts = {name: str(r[KEY_LAYOUT]) for name, r in replies.items()}
        if len(set(layouts.values())) > 1:
            self.abort()
            raise ProtocolError(
                f"the sites' inputs have different layouts: {layouts}; every site must "
                "compute the same fields and shapes"
            )
        s.u1 = [name for name in s.sites if name in replies]
        s.c_pks = {name: bytes(replies[name][KEY_C_PK]) for name in s.u1}
        s.s_pks = {name: bytes(replies[name][KEY_S_PK]) for name in s.u1}
        s.signatures = {name: bytes(replies[name][KEY_SIGNATURE]) for name in s.u1}
        s.rebinds = {name: bool(replies[name].get(KEY_REBIND, 0)) for name in s.u1}
        s.layout = next(iter(layouts.values()), "")
        return self._complete(STAGE_ADVERTISE_KEYS, s.u1)

    def share_keys(self) -> list[str]:
        """Stage 1: broadcast the keys; sites return encrypted shares for each other."""
        self._expect(STAGE_SHARE_KEYS)
        s = self.state
        args = {
            KEY_ACTIVE: s.u1,
            KEY_C_PKS: b"".join(s.c_pks[v] for v in s.u1),
            KEY_S_PKS: b"".join(s.s_pks[v] for v in s.u1),
            KEY_SIGNATURES: b"".join(s.signatures[v] for v in s.u1),
        }
        if any(s.rebinds.get(v, False) for v in s.u1):
            # Only then: absent reads as every member bound (each signature checks it), and
            # a site of the last protocol, which signs no flag and takes no such argument,
            # refused every sum of an analyst that always sent it.
            args[KEY_REBINDS] = bytes(int(s.rebinds.get(v, False)) for v in s.u1)
        replies = self._call(STAGE_SHARE_KEYS, {name: args for name in s.u1})
        s.u2 = [name for name in s.u1 if name in replies]
        s.inbox = {v: {} for v in s.u2}
        for u in s.u2:
            recipients = _names(replies[u][KEY_RECIPIENTS], KEY_RECIPIENTS)
            blobs = _chunks(
                replies[u][KEY_CIPHERTEXTS], _CIPHER_BYTES, len(recipients), KEY_CIPHERTEXTS
            )
            for v, blob in zip(recipients, blobs, strict=True):
                if v in s.inbox:
                    s.inbox[v][u] = blob
        return self._complete(STAGE_SHARE_KEYS, s.u2)

    def collect_masked_inputs(self) -> list[str]:
        """Stage 2: forward each site its shares; sites return their masked inputs."""
        self._expect(STAGE_MASKED_INPUT)
        s = self.state
        args_by_site: dict[str, Record] = {}
        for v in s.u2:
            senders = [u for u in s.u2 if u != v]
            args_by_site[v] = {
                KEY_ACTIVE: s.u2,
                KEY_SENDERS: senders,
                KEY_CIPHERTEXTS: b"".join(s.inbox[v][u] for u in senders),
            }
        replies = self._call(STAGE_MASKED_INPUT, args_by_site)
        s.inbox.clear()
        s.u3 = [name for name in s.u2 if name in replies]
        s.masked = {u: np.asarray(replies[u][KEY_MASKED], dtype=np.uint64) for u in s.u3}
        sizes = {u: m.size for u, m in s.masked.items()}
        if len(set(sizes.values())) > 1:
            self.abort()
            raise ProtocolError(f"masked inputs differ in length: {sizes}")
        return self._complete(STAGE_MASKED_INPUT, s.u3)

    def unmask(self) -> SecureSum:
        """Stage 3: collect shares, remove the masks, return the sum over U3."""
        self._expect(STAGE_UNMASK)
        s = self.state
        args = {KEY_ACTIVE: s.u3}
        replies = self._call(STAGE_UNMASK, {name: args for name in s.u3})
        s.u5 = [name for name in s.u3 if name in replies]
        self._require(s.u5, STAGE_UNMASK)
        b_shares: dict[str, dict[int, int]] = {v: {} for v in s.u3}
        sk_shares: dict[str, dict[int, int]] = {}
        size = shamir.SHARE_BYTES
        for w in s.u5:
            x = s.sites.index(w) + 1
            r = replies[w]
            for kind, owners_key, shares_key, target in (
                ("b", KEY_B_OWNERS, KEY_B_SHARES, b_shares),
                ("sk", KEY_SK_OWNERS, KEY_SK_SHARES, sk_shares),
            ):
                owners = _names(r[owners_key], owners_key)
                blobs = _chunks(r[shares_key], size, len(owners), f"{kind} shares")
                for v, blob in zip(owners, blobs, strict=True):
                    target.setdefault(v, {})[x] = shamir.share_from_bytes(blob)
        dropped_u2 = [v for v in s.u2 if v not in s.u3]
        if sorted(sk_shares) != sorted(dropped_u2) or set(b_shares) != set(s.u3):
            self.abort()
            raise ProtocolError("the sites' unmasking shares do not match the survivors")
        session = s.session.encode()
        size_vec = next(iter(s.masked.values())).size
        total = np.zeros(size_vec, np.uint64)
        for u in s.u3:
            total += s.masked[u]
            seed = shamir.reconstruct(b_shares[u], threshold=s.threshold).to_bytes(32, "big")
            total -= _crypto.expand_mask(
                _crypto.derive(seed, purpose=_crypto.PURPOSE_SELF_MASK, session=session),
                size_vec,
                s.bits,
            )
        for v in dropped_u2:
            sk = shamir.reconstruct(sk_shares[v], threshold=s.threshold).to_bytes(32, "big")
            if _crypto.public_key(sk) != s.s_pks[v]:
                self.abort()
                raise ProtocolError(f"the mask key rebuilt for dropped site {v!r} is wrong")
            x_v = s.sites.index(v)
            for u in s.u3:
                mask = _crypto.expand_mask(
                    _crypto.agree(sk, s.s_pks[u], purpose=_crypto.PURPOSE_MASK, session=session),
                    size_vec,
                    s.bits,
                )
                # u added +mask if it comes before v, -mask otherwise: undo it.
                if s.sites.index(u) < x_v:
                    total -= mask
                else:
                    total += mask
        if s.bits < 64:
            total &= np.uint64((1 << s.bits) - 1)
        s.stage = STAGE_DONE
        s.masked.clear()
        values = _decode_sum(total, s.layout, bits=s.bits, frac_bits=s.frac_bits)
        return SecureSum(
            values=values,
            sites=list(s.u3),
            dropped=dict(s.dropped),
            threshold=s.threshold,
            bits=s.bits,
            session=s.session,
            released=self.federation.released(self._mark),
            statements={
                w: bytes(replies[w][KEY_STATEMENT]) for w in s.u5 if KEY_STATEMENT in replies[w]
            },
        )

    def run(self) -> SecureSum:
        """All four stages in order; any failure aborts the session at every site."""
        try:
            self.advertise_keys()
            self.share_keys()
            self.collect_masked_inputs()
            return self.unmask()
        except BaseException:
            self.abort()
            raise


def secure_sum(
    federation: Federation,
    input_function: str,
    *,
    sites: Iterable[str] | None = None,
    threshold: int | None = None,
    bits: int = 64,
    frac_bits: int = 32,
    allow_dropouts: bool = False,
    **input_args: Any,
) -> SecureSum:
    """Sum an aggregate site function over the sites; the analyst sees only the sum.

    Parameters are those of :class:`SecAggServer`; ``input_args`` go to the input
    function at every site.

    Parameters
    ----------
    {options}
    **input_args
        Arguments of the input function at every site (JSON-serialisable numbers, strings
        and lists).

    Returns
    -------
    SecureSum
        The sum over the surviving sites of each input value, the survivors and dropouts,
        and what left the sites; ``result[key]`` reads a value.

    Raises
    ------
    {secagg_failure}

    Examples
    --------
    >>> from fedroc.federation import Federation
    >>> from fedroc.datasets import make_multisite
    >>> fed = Federation.from_frames(make_multisite(sizes=(50, 60, 70)))
    >>> result = secure_sum(fed, "fedroc.class_counts")
    >>> int(result["n_pos"] + result["n_neg"])
    180
    """
    server = SecAggServer(
        federation,
        input_function,
        input_args,
        sites=sites,
        threshold=threshold,
        bits=bits,
        frac_bits=frac_bits,
        allow_dropouts=allow_dropouts,
    )
    return server.run()


secure_sum.__doc__ = fill(
    secure_sum.__doc__ or "",
    options=parameters_of(
        SecAggServer,
        [
            "federation",
            "input_function",
            "sites",
            "threshold",
            "bits",
            "frac_bits",
            "allow_dropouts",
        ],
    ),
)
