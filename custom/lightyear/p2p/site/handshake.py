"""The start of a peer-to-peer run: wait until the neighbours are ready, and say truly why not (docs/reliability.md).

A ping is answered with the site's state (:func:`ping_answer`). :func:`handshake` tells apart a neighbour that never
answers (not running this job), one still starting, and one whose run ended: if all ended it raises
:class:`NeighboursGone` at once. Answers are hostile input: only known states are taken, reasons cut to one line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.flare import constants as C
from lightyear.flare.placement import p2p_simulator_advice

STARTING, READY, FAILED, STOPPED, FINISHED, ABORTED = "starting", "ready", "failed", "stopped", "finished", "aborted"
SILENT = "silent"  # a neighbour that did not answer (not running this job, or unreachable)
ENDED = (FAILED, STOPPED, FINISHED, ABORTED)
STATES = (STARTING, READY, *ENDED)
MAX_REASON = 300  # characters of a neighbour's reason that are kept


class NeighboursGone(RuntimeError):
    """Every neighbour's run ended before it was ready: this site would only train alone, and stops."""


@dataclass(frozen=True)
class Answer:
    state: str
    reason: str = ""

    def describe(self, peer: str, ready_timeout: float) -> str:
        if self.state == SILENT:
            return f"{peer} did not answer (it is not running this job)"
        if self.state == STARTING:
            return (
                f"{peer} runs this job but was not ready within ready_timeout={ready_timeout:g} s (raise ready_timeout)"
            )
        return f"{peer}'s run {self.state}" + (f": {self.reason}" if self.reason else "")


def ping_answer(state: str, reason: str, ready: bool) -> Shareable:
    """What a site answers a ping with; ``ready`` stays for peers that read only it."""
    reply = make_reply(ReturnCode.OK)
    reply.update({"ready": bool(ready), "state": state, "reason": _one_line(reason)})
    return reply


def read_answer(reply) -> Answer:
    """A neighbour's answer to a ping, taken as hostile input."""
    if not isinstance(reply, Shareable):
        return Answer(SILENT)
    rc = reply.get_return_code()
    if rc == ReturnCode.TOPIC_UNKNOWN:
        return Answer(STARTING)  # its job runs but has not registered the ping yet
    if rc != ReturnCode.OK:
        return Answer(SILENT)
    state = reply.get("state")
    if state not in STATES:  # a peer of an earlier version answers only "ready"
        state = READY if reply.get("ready") is True else STARTING
    reason = reply.get("reason")
    return Answer(state, _one_line(reason) if isinstance(reason, str) and state in ENDED else "")


def handshake(
    engine,
    fl_ctx,
    neighbours: list[str],
    ready_timeout: float,
    abort: Callable[[], bool],
    log: Callable[[str, str], None],
    pause: float = 0.5,
) -> list[str]:
    """Wait at most ``ready_timeout`` s until every neighbour is ready; return those not ready (raise if none is)."""
    answers = {peer: Answer(SILENT) for peer in neighbours}
    pending = set(neighbours)
    deadline = time.monotonic() + ready_timeout
    while pending and not abort():
        replies = engine.send_aux_request(
            targets=sorted(pending), topic=C.TOPIC_PING, request=Shareable(), timeout=3.0, fl_ctx=fl_ctx, optional=True
        )
        for peer in sorted(pending):
            answer = read_answer((replies or {}).get(peer))
            if answer.state != SILENT or answers[peer].state == SILENT:  # a silent ping does not undo an answer
                answers[peer] = answer
            if answer.state == READY:
                pending.discard(peer)
        if not pending or all(answers[p].state in ENDED for p in pending) or time.monotonic() > deadline:
            break
        time.sleep(pause)
    if pending and pending == set(neighbours):
        raise _none_ready(neighbours, answers, ready_timeout)
    if pending:
        log("warning", "going on without " + "; ".join(answers[p].describe(p, ready_timeout) for p in sorted(pending)))
    return sorted(pending)


class BackgroundHandshake:
    """:func:`handshake` in a thread, while the first round trains; :meth:`join` returns or raises its outcome."""

    def __init__(
        self,
        engine,
        fl_ctx,
        neighbours: list[str],
        ready_timeout: float,
        abort: Callable[[], bool],
        log: Callable[[str, str], None],
    ):
        new_context = getattr(engine, "new_context", None)
        context = new_context() if callable(new_context) else fl_ctx  # a context of the thread's own
        self._not_ready: list[str] = []
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._not_ready = handshake(engine, context, neighbours, ready_timeout, abort, log)
            except BaseException as exc:  # handed to the site's thread by join()
                self._error = exc

        self._thread = threading.Thread(target=run, name="lightyear-handshake", daemon=True)
        self._thread.start()

    def join(self) -> list[str]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._not_ready


def _none_ready(neighbours: list[str], answers: dict[str, Answer], ready_timeout: float) -> RuntimeError:
    described = "; ".join(answers[p].describe(p, ready_timeout) for p in neighbours)
    if all(answers[p].state in ENDED for p in neighbours):
        return NeighboursGone(
            f"every neighbour's run ended before it was ready, so this site would only train alone: {described}"
        )
    message = f"no neighbour was ready within ready_timeout={ready_timeout:g} s: {described}"
    if any(answers[p].state == SILENT for p in neighbours):
        message += ". " + p2p_simulator_advice(len(neighbours) + 1)
    return RuntimeError(message)


def _one_line(text) -> str:
    text = " ".join(str(text or "").split())
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."
