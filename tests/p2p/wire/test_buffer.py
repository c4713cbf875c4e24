"""The executor's buffer of peer models: keyed by round, deadline, late models, freeing, bounds."""

import threading
import time

from lightyear.p2p.wire import buffer as pb
from lightyear.p2p.wire.buffer import PeerModelBuffer


def test_rounds_do_not_mix():
    buf = PeerModelBuffer()
    buf.put(1, "site-2", "r1")
    buf.put(0, "site-2", "r0")
    assert buf.wait_for(0, ["site-2"], timeout=0.1) == {"site-2": "r0"}
    assert buf.wait_for(1, ["site-2"], timeout=0.1) == {"site-2": "r1"}


def test_deadline_returns_what_arrived():
    buf = PeerModelBuffer()
    buf.put(0, "site-2", "a")
    start = time.monotonic()
    got = buf.wait_for(0, ["site-2", "site-3"], timeout=0.3)
    assert got == {"site-2": "a"}
    assert 0.25 <= time.monotonic() - start < 2.0


def test_wakes_up_when_the_last_peer_delivers():
    buf = PeerModelBuffer()
    threading.Timer(0.1, lambda: buf.put(0, "site-3", "b")).start()
    buf.put(0, "site-2", "a")
    start = time.monotonic()
    got = buf.wait_for(0, ["site-2", "site-3"], timeout=10)
    assert set(got) == {"site-2", "site-3"}
    assert time.monotonic() - start < 5


def test_release_frees_and_refuses_late_models():
    buf = PeerModelBuffer()
    buf.put(0, "site-2", "a")
    buf.put(1, "site-2", "b")
    buf.release(0)
    assert buf.models_held() == 1  # round 0's model is gone, round 1's kept
    assert buf.put(0, "site-3", "late") == pb.LATE
    assert buf.models_held() == 1
    assert buf.wait_for(1, ["site-2"], timeout=0) == {"site-2": "b"}


def test_abort_stops_waiting():
    buf = PeerModelBuffer()
    start = time.monotonic()
    buf.wait_for(0, ["site-2"], timeout=30, abort=lambda: True)
    assert time.monotonic() - start < 2


def test_only_named_senders_are_returned():
    buf = PeerModelBuffer()
    buf.put(0, "intruder", "x")
    assert buf.wait_for(0, ["site-2"], timeout=0.05) == {}


def test_only_the_current_and_next_round_below_the_last_are_accepted():
    buf = PeerModelBuffer()
    buf.start(rounds=3)
    assert buf.put(0, "site-2", "a") == pb.STORED
    assert buf.put(1, "site-2", "b") == pb.STORED
    assert buf.put(2, "site-2", "c") == pb.EARLY  # two rounds ahead
    assert buf.put(10**9, "site-2", "d") == pb.BAD_ROUND  # past the last round
    assert buf.put(-1, "site-2", "e") == pb.BAD_ROUND
    assert buf.put(True, "site-2", "f") == pb.BAD_ROUND  # bool is an int subclass: refused
    assert buf.put("0", "site-2", "g") == pb.BAD_ROUND
    buf.release(0)
    assert buf.put(2, "site-2", "c") == pb.STORED  # now the next round
    assert buf.put(3, "site-2", "x") == pb.BAD_ROUND  # rounds = 3: round 3 does not exist


def test_first_model_per_round_and_sender_is_kept():
    buf = PeerModelBuffer()
    buf.start(rounds=5)
    assert buf.put(0, "site-2", "first") == pb.STORED
    assert buf.put(0, "site-2", "second") == pb.DUPLICATE
    assert buf.wait_for(0, ["site-2"], timeout=0) == {"site-2": "first"}


def test_memory_is_bounded_whatever_peers_send():
    buf = PeerModelBuffer()
    buf.start(rounds=1000)
    senders = [f"site-{k}" for k in range(2, 9)]
    for r in range(1000):
        for s in senders:
            for _ in range(3):
                buf.put(r, s, object())
    assert buf.models_held() <= 2 * len(senders)
    for r in range(0, 50):
        buf.release(r)
        for s in senders:
            for k in range(r, r + 5):
                buf.put(k, s, object())
        assert buf.models_held() <= 2 * len(senders)


def test_a_resumed_site_starts_at_its_round():
    buf = PeerModelBuffer()
    buf.start(rounds=10, current=4)
    assert buf.put(3, "site-2", "a") == pb.LATE
    assert buf.put(4, "site-2", "b") == pb.STORED
