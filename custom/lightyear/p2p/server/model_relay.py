"""The server's fan-out of the sites' models (``model_route="server"``): a model crosses each link once.

A site uploads each model once and :class:`ModelRelay` hands it to its out-neighbours (once per sender, round and
receiver, only :data:`FORWARDED_KEYS`), naming as sender the site whose run-task token the upload carried; with
``sealed``, sealed (:mod:`lightyear.p2p.wire.sealing`), so the relay can read or forge none. An upload is at most
:attr:`ModelRelay.bound` bytes (the lower median of the sites' declared limits, once more than half declared), at
most :data:`IN_FLIGHT_PER_RECEIVER` wait per sender and receiver, and each is dropped once all took it or after
``peer_deadline`` s; a receiver not ready or not answering is retried until then, delaying no other. No FLARE import.
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
"""Models the relay hands to one receiver at once: it assembles that many at a time, whatever its senders."""
MAX_DECLARED_LIMIT = 1 << 40
"""The largest payload limit a site may declare (1 TiB)."""
FORWARDED_KEYS = (C.KEY_ROUND, C.KEY_WEIGHTS, C.KEY_PAYLOAD, C.KEY_NUM_SAMPLES)
"""What of an upload the receivers get (beside the sender's name): never the uploader's other content."""

# reply codes, as FLARE's ReturnCode spells them
OK = "OK"
NOT_READY = "SERVICE_UNAVAILABLE"
REFUSED = "BAD_REQUEST_DATA"


def check_route(value) -> str:
    if value not in ROUTES:
        raise ValueError(
            f'model_route must be "auto", "server" (a site uploads each model once; the server hands it to the '
            f'receivers) or "direct" (a site sends each receiver its copy), got {value!r}'
        )
    return value


def resolve_route(setting: str, topology: str) -> str:
    """The route of a run: ``setting``, with ``auto`` the server; direct when no model is sent at all."""
    setting = check_route(setting)
    return DIRECT if topology == "none" else SERVER if setting == AUTO else setting


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
    """The server's side of ``model_route="server"``; ``send(targets, topic, message, timeout)`` returns {site: return
    code}; ``on_bound(bytes)`` is called when the upload bound changes, ``on_idle()`` when no model is held."""

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
        return self._site_of.get(token) if isinstance(token, str) else None

    def on_declare(self, token, limit, claimed: str | None = None, certificate=None) -> tuple[str, str]:
        """A site declares the largest model message it takes (sealed: and its certificate); (code, why refused)."""
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
            if bound is not None and bound != self.bound:  # once set, never None again: only more sites declare
                self.bound = bound
                self.on_bound(bound)
        return OK, ""

    def on_certificates(self, token, names, claimed: str | None = None) -> tuple[str, str, dict]:
        """(code, why refused, {name: certificate}): the declared certificates of some of a site's out-neighbours."""
        site = self.site_of(token)
        if site is None:
            return (*self._refused(f"a certificate request from {_shown(claimed)} with no valid token"), {})
        if not self.sealed or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return (*self._refused(f"a certificate request from {site} without a list of names"), {})
        with self._lock:
            wanted = set(names) & set(self.graph[site])
            return OK, "", {n: self.certificates[n] for n in sorted(wanted) if n in self.certificates}

    def on_upload(self, token, message: Mapping, claimed: str | None = None) -> tuple[str, str, list[str]]:
        """A site's model of a round for some of its out-neighbours; (code, why refused, the receivers taken)."""
        sender = self.site_of(token)
        if sender is None:
            return (*self._refused(f"a model upload from {_shown(claimed)} with no valid token"), [])
        round_num, targets = message.get(C.KEY_ROUND), message.get(C.KEY_TARGETS)
        problem = self._upload_problem(sender, round_num, targets, message.get(C.KEY_WEIGHTS), message.get(C.KEY_SEAL))
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

    def _upload_problem(self, sender: str, round_num, targets, weights, seal) -> str | None:
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
        if not self.sealed:
            return None
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
        """(holding the lock) Start the delivery workers ``receiver`` lacks."""
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
        """One of ``receiver``'s delivery workers, until the relay stops; no failed delivery ends it."""
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
        """One try to hand ``delivery`` to ``receiver``; not ready or unanswered: queued again until its deadline."""
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
        """(holding the lock) The soonest due delivery of ``receiver``, waiting for it; None once the relay stops."""
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
        """(holding the lock) Give up the queued deliveries of ``receivers`` (None: all) whose upload ended."""
        for receiver in self._due if receivers is None else receivers:
            queue = self._due[receiver]
            ended = [d for d in queue if d.upload.stop.is_set() or d.upload.deadline <= now]
            if ended:
                queue[:] = [d for d in queue if d not in ended]
                heapq.heapify(queue)
                for delivery in ended:
                    self._settle(delivery.upload, receiver, delivered=False)

    def _settle(self, upload: _Upload, receiver: str, delivered: bool) -> None:
        """(holding the lock) ``receiver`` took ``upload`` or is given up; once all are, the model is let go."""
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
        with self._lock:
            self._drop_ended(time.monotonic())
            held = sum(u.nbytes for uploads in self._uploads.values() for u in uploads if u.pending)
        self._say()
        return held

    def stop(self, timeout: float = 2.0) -> None:
        """Stop forwarding, giving up every delivery not made; waits at most ``timeout`` s for the workers."""
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
