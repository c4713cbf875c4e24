"""A P2P executor wired as its run would wire it, without FLARE: a fake runtime (a 4-value model),
a fake engine, the helpers that deliver peers' models to it, and site-4 of a mesh of four armed as
an attacker."""

import numpy as np
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.p2p.attack.attacker import PeerAttacker
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.p2p.site.checkpoint import load_site_checkpoint
from lightyear.p2p.site.resume import find_checkpoint
from lightyear.p2p.site.sampling import RoundSampling
from lightyear.p2p.site.sending import SendingRun
from lightyear.p2p.wire.exchange import PeerExchange

from flare_fakes import SiteEngine, context, model_message

FAST = {"local_epochs": 1, "batch_size": 64}


class FakeData:
    def __init__(self, train=100):
        self.train = train

    def sizes(self):
        return {"train": self.train, "val": 10, "test": 10}


class FakeRuntime:
    """A 4-value model; training reports mean(w^2) as its loss, then shrinks w by 10 %.

    So a peer whose model lies far from 0 raises this site's next training loss, one near 0 lowers
    it; a model beyond 1e3 "diverges" (NaN loss), like a damaged network.
    """

    def __init__(self, value=1.0, train=100):
        self.w = {"w": np.full(4, value, dtype=np.float32), "n": np.array(0, dtype=np.int64)}
        self.data = FakeData(train)
        self.trained = 0
        self.flipped = []  # flip_labels of every train call

    def get_weights(self):
        return {k: v.copy() for k, v in self.w.items()}

    def set_weights(self, weights):
        self.w = {k: np.array(v, copy=True) for k, v in weights.items()}

    def train(self, round_num, flip_labels=False):
        self.trained += 1
        self.flipped.append(flip_labels)
        w = self.w["w"]
        loss = float("nan") if np.abs(w).max() > 1e3 else float(np.mean(w.astype(np.float64) ** 2))
        self.w["w"] = (w * 0.9).astype(np.float32)
        return {"train_loss": loss, "train_samples": self.data.train}

    def evaluate(self, split, weights=None):
        w = (self.w if weights is None else weights)["w"]
        return {"acc": 0.5, "loss": float(np.mean(np.asarray(w, dtype=np.float64) ** 2))}


class FakeEngine:
    def __init__(self):
        self.sent = []

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        if topic == C.TOPIC_MODEL:
            self.sent.append((sorted(targets), request.get(C.KEY_ROUND), request.get(C.KEY_NUM_SAMPLES)))
        return {t: make_reply(ReturnCode.OK) for t in targets}

    def new_context(self):
        return self.ctx

    def fire_event(self, event_type, fl_ctx):
        pass


def wire(ex, graph, site="site-1", rounds=10, deadline=0.3, runtime=None, seed=0, start=0):
    """Set an executor up as its run would, without FLARE: graph, sampling, exchange, runtime."""
    from lightyear.p2p.topology import in_neighbours

    ex.site, ex.rounds, ex.seed = site, rounds, seed
    ex.in_neighbours = in_neighbours(graph)[site]
    ex.neighbours = sorted(set(graph[site]) | set(ex.in_neighbours))
    ex.sampling = RoundSampling(graph, seed, ex.sample_neighbours)
    ex.runtime = runtime or FakeRuntime()
    ex.exchange = PeerExchange(
        graph[site],
        ex.in_neighbours,
        rounds,
        deadline,
        5.0,
        ex.max_missed_rounds,
        ex.max_abs_weight,
        lambda level, msg: None,
        start_round=start,
        asynchronous=ex.exchange_mode()[0],
        async_wait=ex.exchange_mode()[1],
    )
    ex.exchange.reference = ex.runtime.get_weights()
    if ex.shares_dataset_size:
        ex.exchange.num_samples = ex.runtime.data.sizes()["train"]
    return ex


def deliver(ex, sender, round_num, value, num_samples=None):
    req = Shareable()
    req[C.KEY_ROUND] = round_num
    req[C.KEY_WEIGHTS] = {"w": np.full(4, value, dtype=np.float32), "n": np.array(5, dtype=np.int64)}
    if num_samples is not None:
        req[C.KEY_NUM_SAMPLES] = num_samples
    req.set_peer_props({ReservedKey.IDENTITY_NAME: sender})
    return ex._on_model(C.TOPIC_MODEL, req, None)


FULL3 = {"site-1": ["site-2", "site-3"], "site-2": ["site-1", "site-3"], "site-3": ["site-1", "site-2"]}


# ---------------------------------------------------------------------------- an attacking site-4
SITES = ["site-1", "site-2", "site-3", "site-4"]
MESH4 = {s: [t for t in SITES if t != s] for s in SITES}


def attacking(ex, kind, knowledge="partial", params=None, attackers=("site-3", "site-4"), graph=MESH4, logs=None):
    """Arm a wired executor as site-4 attacking with ``attackers``, as its run would at START_RUN and start."""
    deadline = ex.exchange.peer_deadline
    attacker = PeerAttacker(kind, knowledge, list(attackers), params or {}, seed=0)
    ex.attack, ex.attack_id, ex.peer_deadline = attacker, "attack", deadline
    log = (lambda level, msg: logs.append((level, msg))) if logs is not None else (lambda level, msg: None)
    attacker.begin_run(sending_run(ex, graph, log))
    return ex


def sending_run(ex, graph=MESH4, log=None, **kwargs) -> SendingRun:
    """The run of a wired executor as its outgoing hook gets it (the network's unit groups: ``kwargs``)."""
    exchange = ex.exchange
    return SendingRun(
        ex.site,
        graph,
        ex.rounds,
        0,
        exchange.peer_deadline,
        5.0,
        ex.max_abs_weight,
        log or (lambda level, msg: None),
        exchange.reference,
        exchange.codec,
        False,
        evaluate=ex.runtime.evaluate,
        oracle=ex.predicted_outcome,
        **kwargs,
    )


def site4(cls=P2PFedAvgExecutor, graph=MESH4, deadline=2.0, runtime=None, **kwargs):
    """``cls`` wired as site-4 of ``graph``."""
    return wire(cls(train_args=FAST, **kwargs), graph, site="site-4", deadline=deadline, runtime=runtime)


def model(value, n=4):
    """Weights of the fake 4-value model, every entry ``value`` (and 5 as its sample count)."""
    return {"w": np.full(n, value, dtype=np.float32), "n": np.array(5, dtype=np.int64)}


def collude(ex, sender, round_num, weights):
    """A collusion message reaching site-4's attack component as FLARE would deliver it."""
    return ex.attack._on_collude(C.TOPIC_COLLUDE, model_message(sender, round_num, weights), None)


def sent(engine, topic=C.TOPIC_MODEL):
    """(targets, request) of every message ``engine`` sent on ``topic``."""
    return [(targets, request) for t, targets, request, _ in engine.sent if t == topic]


def run_round(ex, round_num=0):
    """One round of ``ex`` on a fresh fake engine: (its row, the engine)."""
    engine = SiteEngine("/tmp")
    row = ex._round(round_num, context(engine, ex.site), Signal())
    return row, engine


def starting_checkpoint(run_dir, meta, site, resume_from, reference=None, max_abs=None):
    """(the checkpoint a site starting its run continues from, its folder); (None, "") for round 0: what
    the executor's start does (find it, then read it whole and check it against ``reference``)."""
    found, folder, fix = find_checkpoint(run_dir, meta, site, resume_from)
    if found is None:
        return None, ""
    return load_site_checkpoint(folder, reference, max_abs, rounds=meta["rounds"], fix=fix), folder
