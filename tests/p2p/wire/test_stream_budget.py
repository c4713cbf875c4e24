"""The bound on what one other site's streams make a site hold, on hand-worked frame sequences."""

from lightyear.p2p.wire.stream_budget import (
    FINISHED_TTL,
    FRAMES_BASE,
    LIMITS_PER_SITE,
    STREAM_TTL,
    STREAMS_PER_SITE,
    StreamBudget,
)


def test_declared_bytes_and_open_streams_are_bounded_per_sending_site():
    b = StreamBudget(limit=1_000)
    for sid in range(LIMITS_PER_SITE):  # 4 streams of 1000 declared bytes: 4000, the bound
        assert b.admit("site-2", ("site-2", sid), 1_000, 10, 0, now=0.0) is None
    assert "would declare 4001 bytes together" in b.admit("site-2", ("site-2", 9), 1, 1, 0, now=0.0)
    assert b.admit("site-3", ("site-3", 0), 1_000, 10, 0, now=0.0) is None  # another site's own bound
    b = StreamBudget(limit=1_000)
    for sid in range(STREAMS_PER_SITE):
        assert b.admit("site-2", ("site-2", sid), 10, 1, 0, now=0.0) is None
    assert f"at most {STREAMS_PER_SITE}" in b.admit("site-2", ("site-2", 99), 10, 1, 0, now=0.0)
    # a stream that never ends stops counting after FLARE's read timeout
    assert b.admit("site-2", ("site-2", 100), 10, 1, 0, now=STREAM_TTL + 1) is None


def test_a_stream_ends_when_its_declared_bytes_arrived_in_distinct_frames():
    b = StreamBudget(limit=1_000)
    key = ("site-2", 1)
    assert b.admit("site-2", key, 300, 100, 0, now=0.0) is None
    assert b.admit("site-2", key, 300, 100, 0, now=0.0) is None  # frame 0 again: counted once
    assert b.open[key].arrived == 100
    assert b.admit("site-2", key, 300, 100, 2, now=0.0) is None  # frames may come in any order
    assert b.admit("site-2", key, 300, 100, 1, now=0.0) is None
    assert key not in b.open
    # a late frame of the ended stream opens nothing for FLARE's own grace; later it is a new stream
    assert b.admit("site-2", key, 300, 100, 1, now=FINISHED_TTL) is None and key not in b.open
    assert b.admit("site-2", key, 300, 100, 1, now=FINISHED_TTL + 1) is None and key in b.open


def test_a_stream_of_nothing_but_data_and_one_of_endless_tiny_frames_are_refused():
    b = StreamBudget(limit=10**9)
    assert "declares 0 bytes but carries 5" in b.admit("site-2", ("site-2", 1), 0, 5, 0, now=0.0)
    assert b.admit("site-2", ("site-2", 2), 0, 0, 0, now=0.0) is None  # an empty reply is what it says
    key = ("site-2", 3)
    assert all(b.admit("site-2", key, 10**8, 1, seq, now=0.0) is None for seq in range(FRAMES_BASE + 1525))
    assert "frames for 100000000 bytes" in b.admit("site-2", key, 10**8, 1, -1, now=0.0)
