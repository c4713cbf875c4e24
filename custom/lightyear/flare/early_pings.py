"""A liveness ping (``lightyear.ping``) that reaches a site before it registered its handler is no error: FLARE 2.9
logs it as one at both ends, though the sender rightly reads the answer as ``starting``
(``lightyear.p2p.site.handshake``); :func:`quiet_early_pings` logs those records at DEBUG instead."""

from __future__ import annotations

import logging

from lightyear.flare import constants as C

AUX_RUNNER_LOGGER = "nvflare.private.aux_runner.AuxRunner"
"""The logger of FLARE 2.9's ``AuxRunner``: a message of a topic without a handler, at the receiver."""
STREAMER_LOGGER = "nvflare.fuel.f3.streaming.byte_streamer"
"""The logger of FLARE 2.9's ``ByteStreamer``: the receiver's refusal of such a message, at the sender."""
EARLY_PING = {
    AUX_RUNNER_LOGGER: ("unknown aux message topic " + C.TOPIC_PING,),
    STREAMER_LOGGER: ("stream error", "No callback is registered for", "/" + C.TOPIC_PING),
}
"""logger -> the parts every record of an early ping holds there."""


class EarlyPingFilter(logging.Filter):
    """Logs an early ping's record at DEBUG (module docstring); ``parts``: what such a record holds."""

    def __init__(self, parts: tuple[str, ...]):
        super().__init__()
        self.parts = parts

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        if record.levelno <= logging.DEBUG or not all(part in text for part in self.parts):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg = f"{record.msg} (a ping before the site registered its handler: the sender takes it as 'starting')"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


def quiet_early_pings() -> None:
    """Install :class:`EarlyPingFilter` on FLARE's loggers, once each (before any message: when a site is built)."""
    for name, parts in EARLY_PING.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, EarlyPingFilter) for f in logger.filters):
            logger.addFilter(EarlyPingFilter(parts))
