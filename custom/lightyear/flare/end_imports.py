"""Import at a run's start what FLARE's server imports when the run ends.

When a workflow ends, FLARE 2.9's ``WFCommServer.finalize_run`` cleans up tensor downloads by
importing ``nvflare.app_opt.pt.tensor_downloader``, and with it PyTorch
(``nvflare/apis/impl/wf_comm_server.py``). A peer-to-peer server needs PyTorch for nothing else,
so that import (its cost: docs/results.md, "Waits taken off the two ends of a run") ran after the
last round, while every site waited for the end of the run. Started in a background thread when
the run starts, it overlaps the sites' own start instead; the import at the end then finds the
module loaded. A failure here changes nothing: FLARE's own import handles a missing module.
"""

from __future__ import annotations

import importlib
import threading

FLARE_END_OF_RUN_IMPORTS = ("nvflare.app_opt.pt.tensor_downloader",)


def import_in_background(modules=FLARE_END_OF_RUN_IMPORTS) -> threading.Thread:
    """Import ``modules`` in a daemon thread (started, returned so a caller can wait for it)."""

    def load():
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - FLARE imports it again and handles the failure itself
                continue

    thread = threading.Thread(target=load, name="lightyear-end-imports", daemon=True)
    thread.start()
    return thread
