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


def test_a_receiver_of_a_sealed_run_refuses_an_unsealed_or_forged_model_with_the_reason(project):
    world = Deployment(*project)
    plain = Shareable()
    plain.update({C.KEY_ROUND: 0, C.KEY_WEIGHTS: dict(REF), C.KEY_SENDER: "site-1"})
    plain.set_peer_props({ReservedKey.IDENTITY_NAME: "server"})
    world.exchanges["site-2"].on_model(plain, C.TOPIC_FORWARD)
    inbox = world.exchanges["site-2"].collect(0, abort=lambda: False)
    assert inbox.valid == {} and "not a sealed model" in inbox.rejected["site-1"]
    # a server that seals a model of its own under site-1's name, with a certificate the project never issued
    forger = ProjectCA("forger")
    key, cert = forger.issue("site-1")
    fake = Sealer("site-1", "job-1", key, cert, forger.root_pem, lambda names: {})
    real = x509.load_pem_x509_certificate(project[1]["site-3"][1]).public_key()  # site-3's real certificate
    site3 = {"site-3": real}
    sealed, seal = fake.seal(0, "float32", None, REF, site3)
    forged = Shareable()
    forged.update({C.KEY_ROUND: 0, C.KEY_WEIGHTS: sealed, C.KEY_SEAL: seal, C.KEY_SENDER: "site-1"})
    forged.update({C.KEY_PAYLOAD: "float32", C.KEY_CERTIFICATE: cert})
    forged.set_peer_props({ReservedKey.IDENTITY_NAME: "server"})
    world.exchanges["site-3"].on_model(forged, C.TOPIC_FORWARD)
    inbox = world.exchanges["site-3"].collect(0, abort=lambda: False)
    assert inbox.valid == {} and "root CA did not issue" in inbox.rejected["site-1"]


def test_a_model_for_another_job_is_refused(project):
    world = Deployment(*project)
    other = Deployment(*project, job="job-2")
    other.exchanges["site-1"].send(0, {"w": np.ones((2, 2), np.float32), "n": np.array(1)}, other)
    other.exchanges["site-1"].wait_sent(5.0)
    (upload,) = other.uploads
    request = Shareable()
    request.update({k: upload[k] for k in (C.KEY_ROUND, C.KEY_WEIGHTS, C.KEY_PAYLOAD)})
    request.update({C.KEY_SEAL: upload[C.KEY_SEAL], C.KEY_SENDER: "site-1", C.KEY_CERTIFICATE: project[1]["site-1"][1]})
    request.set_peer_props({ReservedKey.IDENTITY_NAME: "server"})
    world.exchanges["site-2"].on_model(request, C.TOPIC_FORWARD)
    inbox = world.exchanges["site-2"].collect(0, abort=lambda: False)
    assert inbox.valid == {} and "did not sign for this job" in inbox.rejected["site-1"]


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
