"""What other sites send is checked on the site's FLARE cell before FLARE decrypts, buffers or
decodes it: its declared size against the model's, and, with secure_messages=true, encryption."""

import pytest
from nvflare.fuel.f3.cellnet.defs import CellChannel, MessageHeaderKey, MessageType
from nvflare.fuel.f3.message import Message
from nvflare.fuel.f3.streaming.download_service import OBJ_DOWNLOADER_CHANNEL
from nvflare.fuel.f3.streaming.stream_const import STREAM_CHANNEL, STREAM_DATA_TOPIC, StreamHeaderKey

from lightyear.flare import constants as C
from lightyear.p2p.wire.cell_gate import PRE_RUN_LIMIT, WATCHED, PeerGate
from lightyear.p2p.wire.stream_budget import LIMITS_PER_SITE, STREAM_TTL, STREAMS_PER_SITE

from flare_fakes import FakeCell

OWN = "site-1.job-7"


def frame(
    origin="site-2.job-7",
    channel=CellChannel.AUX_COMMUNICATION,
    topic=C.TOPIC_MODEL,
    size=1000,
    payload=b"x" * 100,
    encrypted=False,
    sid=1,
    **extra,
):
    """One stream frame as it reaches the cell's incoming filter (before decryption)."""
    headers = {
        MessageHeaderKey.ORIGIN: origin,
        MessageHeaderKey.DESTINATION: OWN,
        MessageHeaderKey.CHANNEL: STREAM_CHANNEL,
        MessageHeaderKey.TOPIC: STREAM_DATA_TOPIC,
        StreamHeaderKey.CHANNEL: channel,
        StreamHeaderKey.TOPIC: topic,
        StreamHeaderKey.STREAM_ID: sid,
        StreamHeaderKey.SEQUENCE: 0,
    }
    if size is not None:
        headers[StreamHeaderKey.SIZE] = size
    if encrypted:
        headers.update({MessageHeaderKey.SECURE: True, MessageHeaderKey.ENCRYPTED: True})
    headers.update(extra)
    return Message(headers, payload)


def gate(limit=10_000, secure=False, open_=True):
    logs = []
    cell = FakeCell(OWN)
    g = PeerGate(lambda level, message: logs.append((level, message)))
    assert g.install(cell) and g.install(cell)  # once only
    assert [(c, t) for c, t, _ in cell.core_cell.filters] == list(WATCHED)
    if open_:
        g.open(limit, secure)
    g.logs, g.cell = logs, cell
    return g


def test_a_message_larger_than_the_model_allows_is_refused_before_flare_buffers_it():
    g = gate(limit=10_000)
    assert g.check(frame(size=10_000)) is None
    reply = g.check(frame(size=10_001, sid=2))
    assert reply is not None and "10001 bytes, more than the 10000 bytes" in reply.get_header(MessageHeaderKey.ERROR)
    assert g.check(frame(size=10, payload=b"x" * 20_000, sid=3)) is not None  # a frame bigger than it declared
    assert g.check(frame(size=None, sid=4)) is not None  # a stream must declare its size
    assert g.check(frame(size=-1, sid=5)) is not None
    # every refused stream is logged once and its sender told at once
    for _ in range(3):
        g.check(frame(size=10_001, sid=9))
    assert sum("10001 bytes, more" in m for _, m in g.logs) == 2
    assert [sid for sid, _ in g.cell.rejected] == [2, 3, 4, 5, 9]


def test_any_channel_from_another_site_is_bounded_but_the_server_and_the_site_itself_are_not():
    g = gate(limit=10_000)
    assert g.check(frame(topic=C.TOPIC_PING, size=50_000)) is not None
    reply = frame(channel=CellChannel.RETURN_ONLY, topic=f"{OBJ_DOWNLOADER_CHANNEL}:download", size=50_000, sid=2)
    assert g.check(reply) is not None  # a download reply: bounded like any frame
    assert g.check(frame(origin="server.job-7", size=10**9, sid=3)) is None
    assert g.check(frame(origin="site-1", size=10**9, sid=4)) is None  # this site's parent process
    assert (
        g.check(frame(size=10**9, sid=5, **{MessageHeaderKey.DESTINATION: "site-3.job-7"})) is None
    )  # passing through


def test_before_the_run_starts_no_model_is_taken_and_the_bound_is_small():
    g = gate(open_=False)
    assert "before this site's run started" in g.check(frame()).get_header(MessageHeaderKey.ERROR)
    assert g.check(frame(topic=C.TOPIC_PING, size=100, sid=2)) is None  # the start handshake passes
    assert g.check(frame(topic=C.TOPIC_PING, size=PRE_RUN_LIMIT + 1, sid=3)) is not None
    g.open(10_000, False)
    assert g.check(frame(sid=4)) is None


def test_secure_messages_true_refuses_model_traffic_that_was_not_encrypted():
    g = gate(secure=True)
    refused = g.check(frame())
    assert refused is not None and "not encrypted" in refused.get_header(MessageHeaderKey.ERROR)
    assert any("refused a model message from site-2.job-7: not encrypted" in m for _, m in g.logs)
    assert g.check(frame(encrypted=True, sid=2)) is None
    # a marker without FLARE's SECURE flag is not encryption: the cell would not decrypt it
    assert g.check(frame(sid=3, **{MessageHeaderKey.ENCRYPTED: True})) is not None
    download = frame(channel=CellChannel.RETURN_ONLY, topic=f"{OBJ_DOWNLOADER_CHANNEL}:download", sid=4)
    assert g.check(download) is not None  # a model's arrays come through the download service
    assert g.check(frame(topic=C.TOPIC_PING, sid=5)) is None  # the handshake is not a model
    assert g.check(frame(origin="server.job-7", sid=6)) is None
    # an unstreamed model message (a sender bypassing the stream) is checked the same way
    direct = Message(
        {
            MessageHeaderKey.ORIGIN: "site-3.job-7",
            MessageHeaderKey.DESTINATION: OWN,
            MessageHeaderKey.CHANNEL: CellChannel.AUX_COMMUNICATION,
            MessageHeaderKey.TOPIC: C.TOPIC_MODEL,
            MessageHeaderKey.MSG_TYPE: MessageType.REQ,
            MessageHeaderKey.REQ_ID: "r1",
        },
        b"x" * 100,
    )
    assert g.check(direct) is not None
    direct.headers.update({MessageHeaderKey.SECURE: True, MessageHeaderKey.ENCRYPTED: True})
    assert g.check(direct) is None


@pytest.mark.parametrize("cell", [None, object()])
def test_a_cell_without_incoming_filters_is_not_watched(cell):
    assert PeerGate(lambda *a: None).install(cell) is False


def test_a_collusion_message_carries_a_model_and_is_gated_like_one():
    g = gate(open_=False)
    assert "before this site's run started" in g.check(frame(topic=C.TOPIC_COLLUDE)).get_header(MessageHeaderKey.ERROR)
    g = gate(secure=True)
    refused = g.check(frame(topic=C.TOPIC_COLLUDE, sid=2))
    assert refused is not None and "not encrypted" in refused.get_header(MessageHeaderKey.ERROR)
    assert any("refused a collusion message from site-2.job-7" in m for _, m in g.logs)
    assert g.check(frame(topic=C.TOPIC_COLLUDE, encrypted=True, sid=3)) is None
    assert g.check(frame(topic=C.TOPIC_COLLUDE, encrypted=True, size=10_001, sid=4)) is not None


def test_one_site_cannot_make_this_site_hold_more_open_streams_than_its_bound():
    # FLARE pre-allocates each stream's declared size on its first frame and holds it until the
    # stream ends or times out: ten bytes each must not buy a sender a model's size each
    g = gate(limit=10_000)
    assert all(g.check(frame(size=10_000, payload=b"x" * 10, sid=s)) is None for s in range(LIMITS_PER_SITE))
    reply = g.check(frame(size=10_000, payload=b"x" * 10, sid=99))
    assert reply is not None and "more than 4 times the 10000 bytes" in reply.get_header(MessageHeaderKey.ERROR)
    assert g.check(frame(size=10_000, payload=b"x" * 10, sid=99)) is not None  # its later frames too
    assert g.check(frame(origin="site-3.job-7", size=10_000, sid=1)) is None  # another site has its own bound
    # a stream whose declared bytes have all passed no longer counts, whatever the order of its frames
    assert g.check(frame(size=10_000, payload=b"x" * 9_990, sid=0, **{StreamHeaderKey.SEQUENCE: 1})) is None
    assert g.check(frame(size=10_000, payload=b"x" * 10, sid=100)) is None
    # small streams are bounded in number
    g = gate(limit=10_000)
    now = [0.0]
    g.clock = lambda: now[0]
    assert all(g.check(frame(size=100, payload=b"x", sid=s)) is None for s in range(STREAMS_PER_SITE))
    reply = g.check(frame(size=100, payload=b"x", sid=STREAMS_PER_SITE))
    assert reply is not None and f"at most {STREAMS_PER_SITE}" in reply.get_header(MessageHeaderKey.ERROR)
    # a stream that never ends stops counting after FLARE's read timeout
    now[0] = STREAM_TTL + 1
    assert g.check(frame(size=100, payload=b"x", sid=500)) is None


def test_a_stream_that_declares_no_bytes_but_carries_some_is_refused():
    # FLARE neither allocates nor caps a stream that declares 0 bytes: only its 4 GiB blob limit would stop it
    g = gate(limit=10_000)
    reply = g.check(frame(size=0, payload=b"x" * 9_999, sid=7))
    assert reply is not None and "declares 0 bytes but carries 9999" in reply.get_header(MessageHeaderKey.ERROR)
    assert g.check(frame(size=0, payload=b"", sid=8)) is None  # an empty stream is what it says
    assert g.check(frame(origin="site-1.job-7", size=0, payload=b"x" * 100, sid=9)) is None  # the site itself


def test_honest_encrypted_and_retransmitted_frames_end_their_streams():
    # an encrypted frame is 541 bytes longer than the plaintext it carries: counting those bytes
    # ended a stream one frame early, and its real last frame then held a slot for 300 s
    g = gate(limit=10_000)
    for sid in range(3 * STREAMS_PER_SITE):
        for seq, clear in ((0, 4_000), (1, 100)):
            extra = {
                MessageHeaderKey.CLEAR_PAYLOAD_LEN: clear,
                StreamHeaderKey.SEQUENCE: seq,
            }
            assert g.check(frame(size=4_100, payload=b"x" * (clear + 541), encrypted=True, sid=sid, **extra)) is None
        retry = frame(size=4_100, payload=b"x" * 100, sid=sid, **{StreamHeaderKey.SEQUENCE: 1})
        assert g.check(retry) is None  # a retransmission of a stream that ended opens nothing
    assert g.budget.open == {}
    # FLARE sends a reply without a body as a 0-byte stream; encrypted, its one frame has 541 bytes
    empty = frame(size=0, payload=b"x" * 541, encrypted=True, sid=99, **{MessageHeaderKey.CLEAR_PAYLOAD_LEN: 0})
    assert g.check(empty) is None


def test_a_forwarded_model_is_taken_from_the_server_alone():
    g = gate()
    why = g.check(frame(topic=C.TOPIC_FORWARD)).get_header(MessageHeaderKey.ERROR)
    assert "a forwarded model comes from the server alone" in why
    assert g.check(frame(origin="server.job-7", topic=C.TOPIC_FORWARD, size=10**9)) is None


def test_models_through_the_server_need_a_cell_to_check_the_forwarders_origin():
    g = PeerGate(lambda level, message: None)
    with pytest.raises(RuntimeError, match="model_route=direct"):
        g.open(10_000, False, server_only_forwards=True)
