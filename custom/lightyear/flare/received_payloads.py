"""A received streamed request's payload that formats as its size, so that FLARE does not copy a model into a string.

FLARE 2.9 formats every streamed request a process receives, payload included, into a debug message before it decodes
it, whatever the log level (``Adapter.call`` in ``nvflare/fuel/f3/cellnet/cell.py``). A model the server forwards
inside its message (the peer-to-peer jobs' ``np_download_chunk_size`` 0) thus costs its receiver a string of about
four times its bytes: some 60 ms of CPU for the 6.7 MB digits CNN, more than the download round trips it saves
(docs/results.md, "How the server serves the models it hands on"). :func:`install` hands FLARE's adapter the same
chunks in a :class:`ReceivedChunks`, a list whose text is its count and size: FLARE decodes them as before.
"""

from __future__ import annotations

import threading

from nvflare.fuel.f3.cellnet import cell as flare_cell

_LOCK = threading.Lock()
_INSTALLED = "_lightyear_received_chunks"


class ReceivedChunks(list):
    """The chunks of a received payload, formatted as their count and size instead of their bytes."""

    def __repr__(self) -> str:
        return f"<{len(self)} chunks, {sum(len(c) for c in self)} bytes>"

    __str__ = __repr__


class ReceivedStream:
    """A stream's future as FLARE's adapter reads it, its result's chunks in a :class:`ReceivedChunks`."""

    def __init__(self, future):
        self._future = future

    def __getattr__(self, name):
        return getattr(self._future, name)

    def result(self, *args, **kwargs):
        value = self._future.result(*args, **kwargs)
        return ReceivedChunks(value) if type(value) is list else value


def install(adapter=None) -> bool:
    """Wrap ``adapter.call`` (FLARE's streamed-request adapter by default) once a process; False where it is missing."""
    adapter = getattr(flare_cell, "Adapter", None) if adapter is None else adapter
    with _LOCK:
        call = getattr(adapter, "call", None)
        if not callable(call):
            return False
        if getattr(call, _INSTALLED, False):
            return True

        def call_on_received_stream(self, future, *args, **kwargs):
            return call(self, ReceivedStream(future), *args, **kwargs)

        setattr(call_on_received_stream, _INSTALLED, True)
        adapter.call = call_on_received_stream
        return True
