"""The executor's buffer of peer models: keyed by round, deadline, late models, freeing."""

import threading
import time

from lightyear.flare.peer_buffer import PeerModelBuffer


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
    assert buf.rounds_held() == [1]
    assert buf.put(0, "site-3", "late") is False
    assert buf.rounds_held() == [1]


def test_abort_stops_waiting():
    buf = PeerModelBuffer()
    start = time.monotonic()
    buf.wait_for(0, ["site-2"], timeout=30, abort=lambda: True)
    assert time.monotonic() - start < 2


def test_only_named_senders_are_returned():
    buf = PeerModelBuffer()
    buf.put(0, "intruder", "x")
    assert buf.wait_for(0, ["site-2"], timeout=0.05) == {}
