"""A received stream's chunks that format as their count and size, so that FLARE does not copy a model into a string.

FLARE 2.9 formats every streamed request a process receives, payload included, into a debug message before it decodes
it, whatever the log level (``Adapter.call`` in ``nvflare/fuel/f3/cellnet/cell.py``, line 96). A model the server
forwards inside its message (the peer-to-peer jobs' ``np_download_chunk_size`` 0) thus costs its receiver a string of
up to four times its bytes, more CPU than the download round trips it saves (docs/results.md, "How the server serves
the models it hands on"). Such a payload arrives as FLARE's ``ConsumableBufferList``
(``nvflare/fuel/utils/buffer_list.py``), a list of the chunks, which its decoder removes from the front as it reads
them; :func:`install` gives that class a text of the chunks' count and size. Nothing else of it changes.
"""

from __future__ import annotations

from nvflare.fuel.utils import buffer_list


def chunks_text(chunks) -> str:
    """What a list of received chunks formats as: their count and size, not their bytes."""
    return f"<{len(chunks)} chunks, {sum(len(c) for c in chunks)} bytes>"


def install(chunks_class=None) -> bool:
    """Make ``chunks_class`` (FLARE's ``ConsumableBufferList`` by default) format as :func:`chunks_text`; False where
    there is no such class (another FLARE version), which then only costs CPU."""
    chunks_class = getattr(buffer_list, "ConsumableBufferList", None) if chunks_class is None else chunks_class
    if not (isinstance(chunks_class, type) and issubclass(chunks_class, list)):
        return False
    for name in ("__repr__", "__str__"):  # the text every format, str() and repr() of it reads
        setattr(chunks_class, name, chunks_text)
    return True
