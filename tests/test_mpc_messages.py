"""The MPC wire: typed messages on fedroc's record codec, validated fields, bounded frames."""

from __future__ import annotations

import socket
import struct
import threading

import numpy as np
import pytest

from fedroc.exceptions import ProtocolError
from fedroc.federation.records import encode
from fedroc.mpc import JobTerms, make_bundle, new_owner_key
from fedroc.mpc.auc import AucSpec
from fedroc.mpc.messages import (
    FRAME_PREFIX,
    ErrorMessage,
    Forward,
    ForwardedBundle,
    Hello,
    HelperJob,
    JobRequest,
    Kind,
    Ok,
    Result,
    ResultShare,
    Seed,
    Shutdown,
    StatsRecord,
    StepFrame,
    Verdict,
    decode_message,
    encode_message,
)
from fedroc.mpc.net import BadFrame, FrameSocket, Oversized

KEYS = (bytes(range(32)), bytes(range(1, 33)))


def round_trip(message, job="job-0001"):
    frame = encode_message(message, job)
    (length,) = struct.unpack("<Q", frame[:FRAME_PREFIX])
    assert length == len(frame) - FRAME_PREFIX
    got_job, back = decode_message(frame[FRAME_PREFIX:])
    assert got_job == job
    return back


def test_every_message_kind_round_trips():
    terms = JobTerms.create(["a", "b"], KEYS)
    bundle = make_bundle("a", [0, 1, 1], [0.2, 0.4, 0.1], terms, new_owner_key())
    stats = StatsRecord(3, 10, 20, 2, 0.5)
    forwarded = ForwardedBundle("a", 3, bundle.owner_key, bundle.signature, bytes(32), b"x" * 9)
    messages = [
        Hello("party", 1),
        Hello("client"),
        Shutdown(),
        Ok(),
        ErrorMessage("why [party.0]", "job-0001"),
        JobRequest((bundle,), KEYS[0]),
        Forward(terms, (forwarded,), KEYS[1], bytes(32)),
        HelperJob(AucSpec((3, 4)), bytes(32)),
        Seed(bytes(range(32))),
        Verdict(False, "no"),
        ResultShare(b"box", stats),
        Result(b"a", b"b", (stats, stats, stats)),
    ]
    for message in messages:
        assert round_trip(message) == message, message
    kinds = {m.KIND for m in messages} | {StepFrame.KIND}
    assert kinds == {v for k, v in vars(Kind).items() if not k.startswith("_")}


def test_step_frames_carry_nested_arrays():
    payload = [[0, "t", [np.arange(4, dtype=np.uint64), np.zeros((2, 3), np.uint8)]], None]
    back = round_trip(StepFrame("par", payload))
    assert back.tag == "par" and back.payload[1] is None
    assert np.array_equal(back.payload[0][2][0], payload[0][2][0])
    assert back.payload[0][2][1].shape == (2, 3)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"kind": "bogus"}, "unknown message kind"),
        ({"kind": "seed", "job": "j", "seed": b"short"}, "'seed' must hold 32 bytes"),
        ({"kind": "hello", "job": "", "role": "admin", "pid": 0}, "unknown role"),
        ({"kind": "hello", "job": "", "role": "party", "pid": 7}, r"'pid' must be an integer"),
        ({"kind": "verdict", "job": "", "accept": 1, "reason": ""}, "true or false"),
        ({"kind": "job", "job": "", "bundles": 0, "client_key": bytes(32)}, "'bundles'"),
        ({"kind": "helper-job", "job": "", "seed": bytes(32)}, "spec"),
    ],
)
def test_malformed_messages_name_the_field(record, message):
    with pytest.raises(ProtocolError, match=message):
        decode_message(encode(record))


def test_garbage_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="malformed frame"):
        decode_message(b"not a record at all")


def test_frame_lengths_are_checked_before_anything_is_read():
    left, right = socket.socketpair()
    try:
        reader = FrameSocket(left, "proxy 1")  # type: ignore[arg-type]
        # Announce 1 TiB: refused at once, from the 8-byte prefix alone.
        right.sendall(struct.pack("<Q", 1 << 40))
        with pytest.raises(ProtocolError, match="proxy 1 announced a frame of 1099511627776"):
            reader.recv(1 << 20)
    finally:
        left.close()
        right.close()


def test_an_oversized_frame_is_skipped_and_the_link_stays_in_step():
    left, right = socket.socketpair()
    try:
        reader = FrameSocket(left, "proxy 0")  # type: ignore[arg-type]
        big = encode_message(StepFrame("x", np.zeros(300_000, np.uint64)), "job-0001")
        small = encode_message(Seed(bytes(32)), "job-0001")
        sender = threading.Thread(target=right.sendall, args=(big + small,))
        sender.start()
        with pytest.raises(Oversized, match="above the limit of 1048576"):
            reader.recv(1 << 20, discard_oversized=True)
        job, message, _ = reader.recv(1 << 20)
        sender.join()
        assert job == "job-0001" and message == Seed(bytes(32))
    finally:
        left.close()
        right.close()


def test_a_malformed_frame_is_dropped_and_the_link_stays_in_step():
    left, right = socket.socketpair()
    try:
        reader = FrameSocket(left, "helper")  # type: ignore[arg-type]
        bad = encode({"kind": "seed", "job": "job-0001", "seed": b"short"})
        good = encode_message(Seed(bytes(32)), "job-0001")
        right.sendall(struct.pack("<Q", len(bad)) + bad + good)
        with pytest.raises(BadFrame, match="helper sent malformed 'seed' message"):
            reader.recv(1 << 20)
        assert reader.recv(1 << 20)[1] == Seed(bytes(32))
    finally:
        left.close()
        right.close()
