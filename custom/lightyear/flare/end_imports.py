"""Import at a run's start what FLARE's server imports when the run ends: ``WFCommServer.finalize_run`` imports
PyTorch with ``nvflare.app_opt.pt.tensor_downloader`` after the last round, while every site waits; imported in a
background thread when the run starts, it overlaps the sites' start. A failure here changes nothing."""

from __future__ import annotations

import contextlib
import importlib
import threading

FLARE_END_OF_RUN_IMPORTS = ("nvflare.app_opt.pt.tensor_downloader",)


def import_in_background(modules=FLARE_END_OF_RUN_IMPORTS) -> threading.Thread:
    """Import ``modules`` in a daemon thread (started, returned so a caller can wait for it)."""

    def load():
        for module in modules:
            with contextlib.suppress(Exception):  # FLARE imports it again and handles the failure itself
                importlib.import_module(module)

    thread = threading.Thread(target=load, name="lightyear-end-imports", daemon=True)
    thread.start()
    return thread
