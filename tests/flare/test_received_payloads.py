"""A model forwarded inside the server's message is decoded as before, without FLARE formatting its bytes into a
string; the peer-to-peer jobs forward models that way."""

import os

import pytest
from nvflare.apis.shareable import Shareable
from nvflare.fuel.f3.cellnet import cell as flare_cell
from nvflare.fuel.f3.cellnet.defs import Encoding, MessageHeaderKey
from nvflare.fuel.f3.streaming.stream_const import StreamHeaderKey
from nvflare.fuel.f3.streaming.stream_types import StreamFuture
from nvflare.fuel.utils import fobs
from nvflare.fuel.utils.buffer_list import ConsumableBufferList

from lightyear.flare import received_payloads
from lightyear.jobs import generate

from repo import ROOT

PAYLOAD_BYTES = 1 << 22
CHUNK = 1 << 20


class Log:
    """Keeps what an adapter logs."""

    def __init__(self):
        self.lines = []

    def debug(self, text, *args):
        self.lines.append(str(text))

    info = warning = error = critical = debug


class Cell:
    """What FLARE's adapter reads of its cell."""

    decode_pass_through_channels: set = set()
    decode_pass_through_topics: set = set()

    def get_fobs_context(self, props=None):
        return dict(props or {})


HEADERS = {
    StreamHeaderKey.STREAM_REQ_ID: "req-1",
    StreamHeaderKey.CHANNEL: "aux_communication",
    StreamHeaderKey.TOPIC: "lightyear.forwarded_model",
    StreamHeaderKey.PAYLOAD_ENCODING: Encoding.FOBS,
    MessageHeaderKey.ORIGIN: "server",
}


def receive(chunks_class):
    """(what the handler got, FLARE's adapter's log lines) for a forwarded model of PAYLOAD_BYTES whose chunks FLARE's
    stream cell hands its adapter in a ``chunks_class``."""
    model = Shareable({"round": 3, "blob": os.urandom(PAYLOAD_BYTES)})
    encoded = fobs.dumps(model)
    future = StreamFuture(1, dict(HEADERS))
    future.set_result(chunks_class(encoded[i : i + CHUNK] for i in range(0, len(encoded), CHUNK)))
    got = []
    adapter = flare_cell.Adapter(lambda request: got.append(request.payload) or Shareable(), None, Cell())
    adapter.logger = Log()
    adapter._send_response = lambda *args: None
    adapter.call(future)
    assert len(got) == 1
    assert got[0]["round"] == 3 and got[0]["blob"] == model["blob"]
    return got[0], adapter.logger.lines


def test_a_received_payload_is_decoded_as_before_and_logged_as_its_size_only():
    class Chunks(ConsumableBufferList):
        pass

    assert received_payloads.install(Chunks)
    _, lines = receive(Chunks)
    assert max(len(line) for line in lines) < 2000
    assert any("<5 chunks, " in line for line in lines)


def test_flare_formats_the_whole_payload_of_a_received_request_without_it():
    """Why :mod:`lightyear.flare.received_payloads` exists: if this fails, FLARE stopped, and the module can go."""

    class Chunks(list):
        pass

    _, lines = receive(Chunks)
    assert max(len(line) for line in lines) > PAYLOAD_BYTES


def test_installing_changes_only_how_flares_received_chunks_format():
    assert received_payloads.install()
    chunks = ConsumableBufferList([b"ab", b"cde"])
    assert repr(chunks) == str(chunks) == f"{chunks}" == "<2 chunks, 5 bytes>"
    assert chunks == [b"ab", b"cde"] and isinstance(chunks, list)
    assert received_payloads.install(dict) is False and received_payloads.install(object()) is False


@pytest.mark.parametrize("method", ["lightyear", "p2p_fedavg"])
def test_the_server_of_a_peer_to_peer_job_forwards_models_inside_its_message(method):
    _, files = generate.build_job(os.path.join(ROOT, "app_configs"), method, "digits")
    assert files["app/config/config_fed_server.json"]["np_download_chunk_size"] == 0
