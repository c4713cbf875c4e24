"""A received stream's payload that formats as its size, so that FLARE does not copy a model into a string.

FLARE 2.9 formats every streamed request a process receives, payload included, into a debug message before it decodes
it, whatever the log level (``Adapter.call`` in ``nvflare/fuel/f3/cellnet/cell.py``, line 96). A model the server
forwards inside its message (the peer-to-peer jobs' ``np_download_chunk_size`` 0) thus costs its receiver a string of
up to four times its bytes: some 60 ms of CPU for the 6.7 MB digits CNN, more than the download round trips it saves
(docs/results.md, "How the server serves the models it hands on"). FLARE binds that adapter to its cell before a job's
code runs, so :func:`install` wraps what the adapter reads the payload from, a stream's result
(``StreamFuture.result``): a list of chunks comes back as a :class:`ReceivedChunks`, the same chunks in a list whose
text is their count and size. FLARE decodes them as before; results that are not a list are returned unchanged.
"""

from __future__ import annotations

import threading

from nvflare.fuel.f3.streaming import stream_types

_LOCK = threading.Lock()
_INSTALLED = "_lightyear_received_chunks"


class ReceivedChunks(list):
    """The chunks of a received payload, formatted as their count and size instead of their bytes."""

    def __repr__(self) -> str:
        return f"<{len(self)} chunks, {sum(len(c) for c in self)} bytes>"

    __str__ = __repr__


def install(future_class=None) -> bool:
    """Wrap ``future_class.result`` (FLARE's ``StreamFuture`` by default) once a process; False where it has none."""
    future_class = getattr(stream_types, "StreamFuture", None) if future_class is None else future_class
    with _LOCK:
        result = getattr(future_class, "result", None)
        if not callable(result):
            return False
        if getattr(result, _INSTALLED, False):
            return True

        def result_in_received_chunks(self, *args, **kwargs):
            value = result(self, *args, **kwargs)
            return ReceivedChunks(value) if type(value) is list else value

        setattr(result_in_received_chunks, _INSTALLED, True)
        future_class.result = result_in_received_chunks
        return True
