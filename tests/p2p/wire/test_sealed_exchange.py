"""Sealed models between sites' exchanges through a real relay: the receivers get the model, the server
holds no weight it could read, and a receiver of a sealed run takes nothing unsealed."""

import threading
import time

import numpy as np
import pytest
from cryptography import x509
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.flare import constants as C
from lightyear.p2p.server.model_relay import ModelRelay
from lightyear.p2p.wire.exchange import PeerExchange
from lightyear.p2p.wire.sealing import Sealer
from project_ca import ProjectCA

GRAPH = {"site-1": ["site-2", "site-3"], "site-2": [], "site-3": []}
REF = {"w": np.zeros((2, 2), dtype=np.float32), "n": np.array(3, dtype=np.int64)}


class Deployment:
    """Three sites' exchanges and the server's relay, wired as FLARE would wire them (one process)."""

    def __init__(self, ca: ProjectCA, creds: dict, job: str = "job-1", deadline: float = 1.0):
        self.uploads, self.logs = [], []
        self.relay = ModelRelay(GRAPH, 5, 2.0, 1.0, self.forward, lambda level, text: None, sealed=True)
        self.exchanges = {}
        for site in GRAPH:
            receive_from = [s for s, outs in GRAPH.items() if site in outs]
            sealer = Sealer(site, job, *creds[site], ca.root_pem, self.fetcher(site))
            ex = PeerExchange(
                GRAPH[site], receive_from, 5, deadline, 5.0, 2, 1e6, self.log, reference=REF, secure=True,
                via_server=True, token=self.relay.tokens[site], sealer=sealer,
            )  # fmt: skip
            self.exchanges[site] = ex
            assert self.relay.on_declare(ex.token, 10_000, certificate=sealer.certificate)[0] == "OK"

    def log(self, level, text):
        self.logs.append((level, text))

    def fetcher(self, site):
        return lambda names: self.relay.on_certificates(self.relay.tokens[site], names)[2]

    def forward(self, targets, topic, message, timeout):
        codes = {}
        for target in targets:
            request = Shareable()
            request.update(message)
            request.set_peer_props({ReservedKey.IDENTITY_NAME: "server"})
            codes[target] = self.exchanges[target].on_model(request, topic).get_return_code()
        return codes

    # the sites' engine: an upload goes to the relay
    def new_context(self):
        return None

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        assert targets == [C.SERVER] and topic == C.TOPIC_UPLOAD
        self.uploads.append(dict(request))
        code, _, _ = self.relay.on_upload(request.get(C.KEY_TOKEN), request)
        return {"server": make_reply(ReturnCode.OK if code == "OK" else ReturnCode.BAD_REQUEST_DATA)}


@pytest.fixture(scope="module")
def project():
    ca = ProjectCA()
    return ca, {site: ca.issue(site) for site in GRAPH}


def settle(relay, timeout=5.0):
    deadline = time.monotonic() + timeout
    while relay.in_flight_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_sealed_model_reaches_each_receiver_and_the_server_sees_no_weight(project):
    world = Deployment(*project)
    weights = {"w": np.full((2, 2), 0.123, dtype=np.float32), "n": np.array(7, dtype=np.int64)}
    world.exchanges["site-1"].send(0, weights, world)
    world.exchanges["site-1"].wait_sent(5.0)
    settle(world.relay)
    (upload,) = world.uploads
    assert list(upload[C.KEY_WEIGHTS]) == ["sealed"] and weights["w"].tobytes() not in upload[C.KEY_WEIGHTS]["sealed"]
    for site in ("site-2", "site-3"):
        inbox = world.exchanges[site].collect(0, abort=lambda: False)
        assert list(inbox.valid) == ["site-1"] and inbox.rejected == {}
        np.testing.assert_array_equal(inbox.valid["site-1"]["w"], weights["w"])
    assert world.relay.counts.forwarded == 2 and world.relay.counts.uploads == 1


def forwarded(fields: dict) -> Shareable:
    request = Shareable()
    request.update(fields)
    request.set_peer_props({ReservedKey.IDENTITY_NAME: "server"})
    return request


def refused_unsigned(world, receiver, request, why) -> None:
    """``request`` is refused and logged, not counted against the sender it names, whose own model is then taken."""
    ex = world.exchanges[receiver]
    assert ex.on_model(request, C.TOPIC_FORWARD).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    assert any("site-1 did not sign" in text and why in text for level, text in world.logs if level == "warning")
    assert ex.buffer.models_held() == 0
    world.exchanges["site-1"].send(0, {"w": np.full((2, 2), 0.5, np.float32), "n": np.array(1)}, world)
    world.exchanges["site-1"].wait_sent(5.0)
    settle(world.relay)
    inbox = ex.collect(0, abort=lambda: False)
    assert list(inbox.valid) == ["site-1"] and inbox.rejected == {}


def test_an_unsealed_model_is_refused_and_does_not_take_the_senders_place(project):
    world = Deployment(*project)
    plain = forwarded({C.KEY_ROUND: 0, C.KEY_WEIGHTS: dict(REF), C.KEY_SENDER: "site-1"})
    refused_unsigned(world, "site-2", plain, "not a sealed model")


def test_a_model_the_server_sealed_under_a_sites_name_is_refused_and_not_counted_against_it(project):
    world = Deployment(*project)
    forger = ProjectCA("forger")  # a certificate named site-1 from a CA the project never trusted
    key, cert = forger.issue("site-1")
    fake = Sealer("site-1", "job-1", key, cert, forger.root_pem, lambda names: {})
    real = x509.load_pem_x509_certificate(project[1]["site-3"][1]).public_key()  # site-3's real certificate
    sealed, seal = fake.seal(0, "float32", None, REF, {"site-3": real})
    fields = {C.KEY_ROUND: 0, C.KEY_WEIGHTS: sealed, C.KEY_SEAL: seal, C.KEY_SENDER: "site-1"}
    forged = forwarded({**fields, C.KEY_PAYLOAD: "float32", C.KEY_CERTIFICATE: cert})
    refused_unsigned(world, "site-3", forged, "root CA did not issue")


def test_a_model_of_another_job_is_refused(project):
    world = Deployment(*project)
    other = Deployment(*project, job="job-2")
    other.exchanges["site-1"].send(0, {"w": np.ones((2, 2), np.float32), "n": np.array(1)}, other)
    other.exchanges["site-1"].wait_sent(5.0)
    (upload,) = other.uploads
    fields = {k: upload[k] for k in (C.KEY_ROUND, C.KEY_WEIGHTS, C.KEY_PAYLOAD, C.KEY_SEAL)}
    replayed = forwarded({**fields, C.KEY_SENDER: "site-1", C.KEY_CERTIFICATE: project[1]["site-1"][1]})
    refused_unsigned(world, "site-2", replayed, "did not sign for this job")


def test_a_second_copy_of_a_held_model_is_not_opened_again(project, monkeypatch):
    world = Deployment(*project)
    world.exchanges["site-1"].send(0, {"w": np.ones((2, 2), np.float32), "n": np.array(1)}, world)
    world.exchanges["site-1"].wait_sent(5.0)
    settle(world.relay)
    (upload,) = world.uploads
    receiver = world.exchanges["site-2"]
    monkeypatch.setattr(receiver.sealer, "open", lambda *a, **k: pytest.fail("a held model's copy was opened"))
    fields = {k: upload[k] for k in (C.KEY_ROUND, C.KEY_WEIGHTS, C.KEY_PAYLOAD, C.KEY_SEAL)}
    copy = forwarded({**fields, C.KEY_SENDER: "site-1", C.KEY_CERTIFICATE: project[1]["site-1"][1]})
    assert receiver.on_model(copy, C.TOPIC_FORWARD).get_return_code() == ReturnCode.OK


def test_a_receiver_whose_certificate_comes_late_still_gets_the_model_and_no_one_gets_it_twice(project):
    world = Deployment(*project, deadline=4.0)
    late = world.relay.certificates.pop("site-3")  # site-3 has not declared yet when site-1 first sends
    threading.Timer(0.3, lambda: world.relay.certificates.__setitem__("site-3", late)).start()
    world.exchanges["site-1"].send(0, {"w": np.ones((2, 2), np.float32), "n": np.array(1)}, world)
    world.exchanges["site-1"].wait_sent(5.0)
    settle(world.relay)
    for site in ("site-2", "site-3"):
        assert list(world.exchanges[site].collect(0, abort=lambda: False).valid) == ["site-1"]
    assert world.relay.counts.uploads == 2 and world.relay.counts.forwarded == 2  # one seal each, sent once
