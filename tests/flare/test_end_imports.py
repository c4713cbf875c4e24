"""What FLARE's server imports when a run ends is imported when the run starts, off the run's end."""

import subprocess
import sys

CHECK = """
import sys
from lightyear.flare.end_imports import FLARE_END_OF_RUN_IMPORTS, import_in_background
assert not any(m in sys.modules for m in FLARE_END_OF_RUN_IMPORTS)
import_in_background(("no_such_module_anywhere", *FLARE_END_OF_RUN_IMPORTS)).join(120)
print(all(m in sys.modules for m in FLARE_END_OF_RUN_IMPORTS))
"""


def test_the_modules_flare_imports_at_the_end_are_loaded_and_a_missing_one_changes_nothing():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


def test_flare_still_imports_them_when_a_workflow_ends():
    """The module named here is the one FLARE 2.9's WFCommServer imports at the end of a workflow: if FLARE
    stops importing it, preloading it would only cost."""
    import inspect

    from nvflare.apis.impl.wf_comm_server import WFCommServer

    from lightyear.flare.end_imports import FLARE_END_OF_RUN_IMPORTS

    source = inspect.getsource(WFCommServer)
    assert all(f"from {m} import" in source for m in FLARE_END_OF_RUN_IMPORTS)
