"""The server's fan-out of the sites' models: a model crosses each link once.

FLARE 2.9 relays every client-to-client message through the server, so a site that sends its
model to its ``d`` out-neighbours directly puts ``d`` copies on its own link and the server
carries ``2 d`` (each copy in and out). With ``model_route="server"`` a site uploads each model
of a round once (:data:`~lightyear.flare.constants.TOPIC_UPLOAD`, naming its receivers) and
:class:`ModelRelay` hands it to every receiver (:data:`~lightyear.flare.constants.TOPIC_FORWARD`):
``N + N d`` model copies through the server a round instead of ``2 N d`` (docs/deployment.md).

What a receiver can rely on, whatever the sites send:

- **Who sent it.** Every site gets a random token with its run task, which FLARE delivers to the
  site it authenticated; an upload counts as the site whose token it carries, whatever it claims
  otherwise, and a forwarded model names that site (``KEY_SENDER``). A receiver takes
  ``TOPIC_FORWARD`` from the server's cell only (:mod:`lightyear.p2p.wire.cell_gate`).
- **Only what the topology allows.** A site's upload goes only to its out-neighbours of the run's
  graph, one model per sender, round and receiver: a second model for a receiver that already
  has one of that round is refused, and the payload keeps only the model's keys (the round, the
  weights, their encoding, the training-set size), never the uploader's other content.
- **The same checks as a direct message.** The receiver checks a forwarded model exactly as one it
  received directly (:mod:`lightyear.p2p.wire.exchange`).
- **Sealed models** (``sealed``: ``secure_messages`` on). Each site declares its provisioned
  certificate with its payload limit, may ask for its out-neighbours' (:meth:`ModelRelay.on_certificates`),
  and uploads its model sealed (:mod:`lightyear.p2p.wire.sealing`): one ciphertext, a content key
  wrapped for each receiver and the sender's signature. The relay hands on the ciphertext, the
  nonce, the signature, the keys wrapped for the upload's receivers and the sender's declared
  certificate, and refuses an upload that is not sealed. It reads no model and could forge none:
  a receiver checks the certificate against the project's root CA and the sender's name, and the
  signature over the job, sender, round and ciphertext.

What the server holds, whatever the sites send: an upload is at most :attr:`ModelRelay.bound`
bytes (the lower median of the payload limits the sites declared with their token, taken once
more than half of the sites have declared; until then uploads are answered "not ready" and sent
again), counted before FLARE assembles it by the server's cell gate and again by
:meth:`ModelRelay.on_upload`; a site has at most :data:`IN_FLIGHT_PER_RECEIVER` uploads waiting
for any one out-neighbour (a receiver it keeps busy holds up none of its models to the others).
An upload is dropped once every receiver took it or ``peer_deadline`` seconds after it arrived,
so the server holds at most ``N x d x IN_FLIGHT_PER_RECEIVER x bound`` bytes of models, and an
honest run about one model per site. A receiver that is not ready yet (it answers "not ready": it
has not started, or is more than one round behind the sender) or does not answer is tried again
after 1 s, then every 2 s, until that deadline, and costs its deadline and no other receiver's; a
model a receiver refuses is not sent to it again.

What a receiver holds while models arrive: each receiver has :data:`DELIVERIES_PER_RECEIVER` delivery
worker(s), each handing it one model at a time (the soonest due first), so it assembles at most that
many models at once however many senders it has, instead of one from every sender of a round.

No FLARE import: the controller hands it the send function and the log.
"""

from __future__ import annotations

import heapq
import itertools
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lightyear.flare import constants as C
from lightyear.p2p.wire.buffer import MAX_RETRY_S, RETRY_S
from lightyear.p2p.wire.payload import payload_bytes
from lightyear.p2p.wire.sealing import MAX_CERTIFICATE_BYTES, seal_problem, sealed_weights_problem

AUTO, SERVER, DIRECT = "auto", "server", "direct"
ROUTES = (AUTO, SERVER, DIRECT)
SEND_TIMEOUT = 60.0
"""Seconds one try to hand a model to its receivers may take (at most ``peer_deadline``)."""
IN_FLIGHT_PER_RECEIVER = 2
"""Uploads per out-neighbour a site may have being forwarded at once (the current round and the next)."""
DELIVERIES_PER_RECEIVER = 1
"""Models the relay hands to one receiver at once (one send each): a receiver assembles one model at a time,
whatever the number of its senders, and one that does not answer holds up no other (a receiver's link
carries its models one after the other either way; docs/deployment.md has the measurements)."""
MAX_DECLARED_LIMIT = 1 << 40
"""The largest payload limit a site may declare (1 TiB)."""
FORWARDED_KEYS = (C.KEY_ROUND, C.KEY_WEIGHTS, C.KEY_PAYLOAD, C.KEY_NUM_SAMPLES)
"""What of an upload the receivers get (beside the sender's name): never the uploader's other content."""

# reply codes, as FLARE's ReturnCode spells them (no FLARE import here)
OK = "OK"
NOT_READY = "SERVICE_UNAVAILABLE"
REFUSED = "BAD_REQUEST_DATA"


def check_route(value) -> str:
    """``value`` when it is a model route; else a ValueError naming the three."""
    if value not in ROUTES:
        raise ValueError(
            f'model_route must be "auto", "server" (a site uploads each model once; the server hands it to the '
            f'receivers) or "direct" (a site sends each receiver its copy), got {value!r}'
        )
    return value


def resolve_route(setting: str, topology: str) -> str:
    """The route of a run: ``setting``, with ``auto`` the server (with ``secure_messages`` on, the models
    go sealed end to end, :mod:`lightyear.p2p.wire.sealing`); direct when no model is sent at all."""
    setting = check_route(setting)
    if topology == "none":
        return DIRECT
    return SERVER if setting == AUTO else setting


@dataclass
class RelayCounts:
    """What the relay moved: uploads taken, model copies handed on, and their bytes in and out."""

    uploads: int = 0
    forwarded: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    undelivered: int = 0

    def as_dict(self) -> dict:
        return {
            "uploads": self.uploads,
            "forwarded": self.forwarded,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "undelivered": self.undelivered,
        }


@dataclass
class _Upload:
    sender: str
    round_num: int
    message: dict
    pending: list[str]
    nbytes: int
    deadline: float
    stop: threading.Event = field(default_factory=threading.Event)
    left: list[str] = field(default_factory=list)

    @property
    def live(self) -> bool:
        """Still being handed on: some receiver has not taken it and nothing stopped it."""
        return bool(self.pending) and not self.stop.is_set()


@dataclass(order=True)
class _Delivery:
    """One upload for one receiver, tried at ``due`` (monotonic seconds), then again after ``retry``."""

    due: float
    number: int
    upload: _Upload = field(compare=False)
    retry: float = field(compare=False)
    failed: bool = field(default=False, compare=False)


class ModelRelay:
    """The server's side of ``model_route="server"`` (see the module docstring).

    ``graph``: site -> its out-neighbours (the run's topology); ``sealed``: models travel sealed
    end to end (see the module docstring); ``send(targets, topic, message,
    timeout)`` hands ``message`` (a dict of payload keys) to the sites ``targets`` and returns
    {site: return code}; ``log(level, text)``; ``on_bound(bytes)`` is called when the upload
    bound is set or changes (the controller opens its cell gate at it), ``on_idle()`` when the
    relay let go of its last model (the controller returns the freed heap to the system).
    """

    def __init__(
        self,
        graph: Mapping[str, list[str]],
        rounds: int,
        peer_deadline: float,
        send_timeout: float,
        send: Callable[[list[str], str, dict, float], dict],
        log: Callable[[str, str], None],
        on_bound: Callable[[int], None] = lambda limit: None,
        on_idle: Callable[[], object] = lambda: None,
        sealed: bool = False,
    ):
        self.graph = {site: sorted(outs) for site, outs in graph.items()}
        self.sealed = bool(sealed)
        self.certificates: dict[str, bytes] = {}
        self.rounds = int(rounds)
        self.peer_deadline = float(peer_deadline)
        self.send_timeout = float(send_timeout)
        self.send = send
        self.log = log
        self.on_bound = on_bound
        self.on_idle = on_idle
        self.tokens = {site: secrets.token_hex(16) for site in self.graph}
        self._site_of = {token: site for site, token in self.tokens.items()}
        self.declared: dict[str, int] = {}
        self.bound: int | None = None
        self.counts = RelayCounts()
        self._claimed: set[tuple[str, int, str]] = set()
        self._uploads: dict[str, list[_Upload]] = {site: [] for site in self.graph}
        self._workers: dict[str, list[threading.Thread]] = {}  # receiver -> its delivery workers
        self._lock = threading.Lock()
        self._due: dict[str, list[_Delivery]] = {}  # receiver -> its deliveries, a heap by due time
        self._wake = threading.Condition(self._lock)
        self._numbered = itertools.count()
        self._stopped = False
        self._said: list[tuple[str, str]] = []  # (level, text) settled under the lock, logged after it
        self._idle = False

    # ------------------------------------------------------------------ what sites send the server
    def site_of(self, token) -> str | None:
        """The site whose token ``token`` is, or None."""
        return self._site_of.get(token) if isinstance(token, str) else None

    def on_declare(self, token, limit, claimed: str | None = None, certificate=None) -> tuple[str, str]:
        """A site declares the largest model message it takes and, for sealed models, its certificate;
        (reply code, why refused or "")."""
        site = self.site_of(token)
        if site is None:
            return self._refused(f"a payload limit from {_shown(claimed)} with no valid token")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_DECLARED_LIMIT:
            return self._refused(f"{site} declared a payload limit of {_shown(limit)}, not an integer in [1, 2**40]")
        if self.sealed and not (isinstance(certificate, bytes) and 0 < len(certificate) <= MAX_CERTIFICATE_BYTES):
            return self._refused(f"{site} declared no certificate of at most {MAX_CERTIFICATE_BYTES} bytes")
        with self._lock:  # the bound and the gate's limit change together
            if site in self.declared:
                return OK, ""
            self.declared[site] = limit
            if self.sealed:
                self.certificates[site] = certificate
            values = sorted(self.declared.values())
            bound = values[(len(values) - 1) // 2] if 2 * len(values) > len(self.graph) else None
            changed = bound != self.bound
            self.bound = bound
            if changed and bound is not None:
                self.on_bound(bound)
        return OK, ""

    def on_certificates(self, token, names, claimed: str | None = None) -> tuple[str, str, dict]:
        """The declared certificates of some of a site's out-neighbours (those it seals models for);
        (reply code, why refused or "", {name: certificate})."""
        site = self.site_of(token)
        if site is None:
            return (*self._refused(f"a certificate request from {_shown(claimed)} with no valid token"), {})
        if not self.sealed or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return (*self._refused(f"a certificate request from {site} without a list of names"), {})
        with self._lock:
            wanted = set(names) & set(self.graph[site])
            return OK, "", {n: self.certificates[n] for n in sorted(wanted) if n in self.certificates}

    def on_upload(self, token, message: Mapping, claimed: str | None = None) -> tuple[str, str, list[str]]:
        """A site's model of a round for some of its out-neighbours; (reply code, why refused or "",
        the receivers the relay took it for). ``message``: the upload's payload keys."""
        sender = self.site_of(token)
        if sender is None:
            return (*self._refused(f"a model upload from {_shown(claimed)} with no valid token"), [])
        round_num, targets = message.get(C.KEY_ROUND), message.get(C.KEY_TARGETS)
        problem = self._upload_problem(sender, round_num, targets, message.get(C.KEY_WEIGHTS))
        if not problem and self.sealed:
            problem = self._seal_problem(sender, targets, message.get(C.KEY_WEIGHTS), message.get(C.KEY_SEAL))
        if problem:
            return (*self._refused(f"the model upload of {sender}: {problem}"), [])
        nbytes = payload_bytes(message[C.KEY_WEIGHTS])
        with self._lock:
            if self.bound is None:
                return NOT_READY, "", []
            if nbytes > self.bound:
                problem = f"{nbytes} bytes, more than the {self.bound} bytes a model of this job takes"
            else:
                self._drop_ended(time.monotonic())  # an upload past its deadline counts against no one
                ongoing = [u for u in self._uploads[sender] if u.live]
                waiting = Counter(t for u in ongoing for t in u.pending)
                if any(waiting[t] >= IN_FLIGHT_PER_RECEIVER for t in targets):
                    return NOT_READY, "", []
                fresh = [t for t in dict.fromkeys(targets) if (sender, round_num, t) not in self._claimed]
                self._claimed.update((sender, round_num, t) for t in fresh)
                if message.get(C.KEY_SUPERSEDES) is True:  # asynchronous mode: a newer model makes older ones moot
                    for older in ongoing:
                        older.stop.set()
                    self._wake.notify_all()  # their deliveries are given up now, not at their next try
        self._say()
        if problem:
            return (*self._refused(f"the model upload of {sender} for round {round_num}: {problem}"), [])
        refused = sorted(set(targets) - set(fresh))
        if refused:
            self.log("warning", f"{sender} sent a second model for round {round_num} to {refused}: not forwarded")
        if fresh:
            self._start(sender, round_num, message, fresh, nbytes)
        return OK, "", fresh

    def _upload_problem(self, sender: str, round_num, targets, weights) -> str | None:
        if isinstance(round_num, bool) or not isinstance(round_num, int) or not 0 <= round_num < self.rounds:
            return f"round {_shown(round_num)} is not one of the run's {self.rounds} rounds"
        if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
            return "it names no list of receivers"
        strangers = sorted(set(targets) - set(self.graph[sender]))
        if strangers:
            return f"{_shown(strangers)} are not its out-neighbours"
        if not isinstance(weights, Mapping):
            return f"it carries {type(weights).__name__}, not a model"
        for key, value in weights.items():
            if not isinstance(value, (np.ndarray, np.generic)):
                return f"its entry {_shown(key)} is {type(value).__name__}, not an array"
        return None

    def _seal_problem(self, sender: str, targets: list[str], weights: Mapping, seal) -> str | None:
        """Why a sealed run's upload is not a sealed model the relay can hand on, or None."""
        if sender not in self.certificates:
            return "it declared no certificate"
        return sealed_weights_problem(weights) or seal_problem(seal, targets) or None

    def _refused(self, why: str) -> tuple[str, str]:
        self.log("warning", f"refused {why}")
        return REFUSED, why

    # ------------------------------------------------------------------ handing models on
    def _start(self, sender: str, round_num: int, message: Mapping, targets: list[str], nbytes: int) -> None:
        forwarded = {k: message[k] for k in FORWARDED_KEYS if k in message}
        forwarded[C.KEY_SENDER] = sender
        if self.sealed:  # only what the receivers need: the seal's fields, their wrapped keys, the certificate
            seal = message[C.KEY_SEAL]
            wrapped = {t: seal["wrapped"][t] for t in targets}
            forwarded[C.KEY_SEAL] = {"nonce": seal["nonce"], "signature": seal["signature"], "wrapped": wrapped}
            forwarded[C.KEY_CERTIFICATE] = self.certificates[sender]
        now = time.monotonic()
        upload = _Upload(sender, round_num, forwarded, list(targets), nbytes, now + self.peer_deadline)
        with self._lock:
            self._uploads[sender] = [u for u in self._uploads[sender] if u.pending] + [upload]
            self.counts.uploads += 1
            self.counts.bytes_in += nbytes
            for target in targets:
                heapq.heappush(self._due.setdefault(target, []), _Delivery(now, next(self._numbered), upload, RETRY_S))
                self._staff(target)
            self._wake.notify_all()
        self._say()

    def _staff(self, receiver: str) -> None:
        """(holding the lock) Start the delivery workers ``receiver`` lacks: on its first model, or in place of
        one that ended."""
        workers = [w for w in self._workers.get(receiver, []) if w.is_alive()]
        while len(workers) < DELIVERIES_PER_RECEIVER:
            worker = threading.Thread(target=self._deliver, args=(receiver,), daemon=True, name=f"relay-{receiver}")
            try:
                worker.start()
            except RuntimeError as exc:  # no thread can start now: the next model for it tries again
                self._said.append(("warning", f"no delivery worker for {receiver} could start ({exc})"))
                break
            workers.append(worker)
        self._workers[receiver] = workers

    def _deliver(self, receiver: str) -> None:
        """One of ``receiver``'s delivery workers: hands it its models one send at a time, soonest due first,
        until the relay stops; no delivery, whatever happens to it, ends the worker."""
        while True:
            with self._lock:
                delivery = self._next_due(receiver)
            self._say()
            if delivery is None:
                return
            try:
                self._hand(receiver, delivery)
            except Exception as exc:  # noqa: BLE001 - the delivery is given up, the worker goes on
                with self._lock:
                    self._settle(delivery.upload, receiver, delivered=False)
                    self._said.append(("warning", f"handing a model to {receiver} failed: {type(exc).__name__}: {exc}"))
            self._say()

    def _hand(self, receiver: str, delivery: _Delivery) -> None:
        """One try to hand ``delivery`` to ``receiver``: taken, refused (given up: sending it again changes
        nothing), or not ready or unanswered (tried again, less and less often, until its deadline)."""
        upload = delivery.upload
        if upload.stop.is_set() or self._stopped:  # stopped since it came due: not sent
            with self._lock:
                self._settle(upload, receiver, delivered=False)
            return
        try:
            timeout = max(1.0, min(self.send_timeout, upload.deadline - time.monotonic()))
            codes = self.send([receiver], C.TOPIC_FORWARD, upload.message, timeout)
        except Exception as exc:  # noqa: BLE001 - a failed send is retried until the deadline
            if not delivery.failed:  # said once a delivery, not at every retry
                self.log(
                    "warning",
                    f"forwarding the model of {upload.sender} to {receiver} failed ({type(exc).__name__}: {exc})",
                )
            delivery.failed, codes = True, {}
        code = codes.get(receiver) if isinstance(codes, Mapping) else None
        with self._lock:
            ended = upload.stop.is_set() or self._stopped or upload.deadline <= time.monotonic()
            if code in (OK, REFUSED) or ended:
                if code == OK:
                    self.counts.forwarded += 1
                    self.counts.bytes_out += upload.nbytes
                self._settle(upload, receiver, delivered=code == OK)
                return
            delivery.due = time.monotonic() + delivery.retry
            delivery.retry = min(MAX_RETRY_S, 2 * delivery.retry)
            heapq.heappush(self._due[receiver], delivery)

    def _next_due(self, receiver: str) -> _Delivery | None:
        """(holding the lock) The soonest due delivery of ``receiver`` once it is due, waiting for it; None once
        the relay stops."""
        queue = self._due[receiver]
        while not self._stopped:
            now = time.monotonic()
            self._drop_ended(now, [receiver])  # the others' queues: at each upload and count
            if queue and queue[0].due <= now:
                return heapq.heappop(queue)
            soonest = min(queue[0].due, min(d.upload.deadline for d in queue)) if queue else None
            self._wake.wait(None if soonest is None else soonest - now)
        return None

    def _drop_ended(self, now: float, receivers: list[str] | None = None) -> None:
        """(holding the lock) Give up every queued delivery whose upload passed its deadline or was stopped, for
        ``receivers`` (None: every receiver, so that one whose worker is held up in a send keeps no model past
        its deadline)."""
        for receiver in self._due if receivers is None else receivers:
            queue = self._due[receiver]
            ended = [d for d in queue if d.upload.stop.is_set() or d.upload.deadline <= now]
            if ended:
                queue[:] = [d for d in queue if d not in ended]
                heapq.heapify(queue)
                for delivery in ended:
                    self._settle(delivery.upload, receiver, delivered=False)

    def _settle(self, upload: _Upload, receiver: str, delivered: bool) -> None:
        """(holding the lock) ``receiver`` took ``upload`` or is given up; once every receiver is settled the
        model is let go (what is to be said is said by :meth:`_say`, after the lock)."""
        if receiver not in upload.pending:
            return
        upload.pending.remove(receiver)
        if not delivered:
            upload.left.append(receiver)
            self.counts.undelivered += 1
        if upload.pending:
            return
        upload.message = {}  # the model is let go as soon as it is handed on or given up
        if upload.left and not upload.stop.is_set():
            self._said.append(
                ("warning", f"round {upload.round_num}: could not hand the model of {upload.sender} to {upload.left}")
            )
        if not any(u.pending for uploads in self._uploads.values() for u in uploads):
            self._idle = True

    def _say(self) -> None:
        """Log what was settled under the lock and, once no model is held, call ``on_idle``; outside the lock."""
        with self._lock:
            said, self._said = self._said, []
            idle, self._idle = self._idle, False
        try:  # what the log or on_idle raises ends no delivery worker
            for level, text in said:
                self.log(level, text)
            if idle:
                self.on_idle()
        except Exception:  # noqa: BLE001, S110 - nothing else to tell it to
            pass

    def in_flight_bytes(self) -> int:
        """Bytes of models the relay holds now."""
        with self._lock:
            self._drop_ended(time.monotonic())
            held = sum(u.nbytes for uploads in self._uploads.values() for u in uploads if u.pending)
        self._say()
        return held

    def stop(self, timeout: float = 2.0) -> None:
        """Stop forwarding (the run ended): every delivery not made is given up; waits at most ``timeout`` s
        for the delivery workers."""
        with self._lock:
            self._stopped = True
            for uploads in self._uploads.values():
                for upload in uploads:
                    upload.stop.set()
            self._drop_ended(time.monotonic())
            self._wake.notify_all()
            workers = [w for ws in self._workers.values() for w in ws]
        self._say()
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))


def _shown(value) -> str:
    return repr(value)[:80]
