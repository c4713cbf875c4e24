"""The outgoing hook: a component that replaces what a site sends, and nothing else; the honest path
(the site's round and the methods) imports no attack code."""

import ast
import pathlib

import numpy as np
from nvflare.apis.event_type import EventType

from lightyear.algorithms.attacks.updates import LF
from lightyear.flare import constants as C
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.p2p.site.executor import FLIPPED_LABELS
from lightyear.p2p.site.sending import PerReceiver, Sending, SendingRun

from flare_fakes import context
from p2p_fakes import deliver, run_round, sending_run, sent, site4

P2P = pathlib.Path(__file__).resolve().parents[3] / "custom" / "lightyear" / "p2p"


class ZeroHook:
    """A hook of a plugin's own: sends site-1 zeros and every other receiver its honest model."""

    kind = "zeros"
    needs_oracle = False

    def __init__(self):
        self.run, self.seen = None, []

    def begin_run(self, run: SendingRun) -> None:
        self.run = run

    def outgoing(self, sending: Sending):
        self.seen.append(sending)
        zeros = {k: np.zeros_like(v) for k, v in sending.honest.items()}
        return PerReceiver({r: zeros if r == "site-1" else sending.honest for r in sending.receivers}), {"hook": 1}


def test_a_hook_replaces_what_is_sent_and_the_site_keeps_its_honest_model():
    ex = site4()
    hook = ZeroHook()
    ex.attack = hook
    hook.begin_run(sending_run(ex))
    for sender in ("site-1", "site-2", "site-3"):
        deliver(ex, sender, 0, 1.0)
    row, engine = run_round(ex)
    models = {t: request[C.KEY_WEIGHTS]["w"] for targets, request in sent(engine) for t in targets}
    assert np.all(models["site-1"] == 0.0) and np.all(models["site-2"] == hook.seen[0].honest["w"])
    assert row["malfunction"] == "zeros" and row["hook"] == 1
    (sending,) = hook.seen
    assert sending.round_num == 0 and sorted(sending.receivers) == ["site-1", "site-2", "site-3"]
    assert np.all(ex.runtime.get_weights()["w"] != 0.0)  # it aggregated its honest model with the peers'


def test_a_hook_that_needs_the_methods_oracle_is_refused_at_the_start_where_the_method_has_none():
    class Engine:
        def __init__(self, hook):
            self.hook, self.panics = hook, []

        def get_component(self, cid):
            return self.hook

        def register_aux_message_handler(self, topic, message_handle_func):
            pass

    hook = ZeroHook()
    hook.needs_oracle = True
    ex = P2PFedAvgExecutor(attack_id="hook")
    panics = []
    ex.system_panic = lambda reason, fl_ctx: panics.append(reason)
    ex.handle_event(EventType.START_RUN, context(Engine(hook), "site-4"))
    assert ex.attack is None and "declares none" in panics[0] and "P2PFedAvgExecutor" in panics[0]


def test_the_records_name_flipped_labels_as_the_attack_catalogue_does():
    assert FLIPPED_LABELS == LF


def _imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_sites_round_and_the_methods_import_no_attack_code():
    honest = sorted((P2P / "site").glob("*.py")) + sorted((P2P / "methods").glob("*.py"))
    assert honest
    for path in honest:
        for module in _imports(path):
            assert not module.startswith("lightyear.p2p.attack"), f"{path.name} imports {module}"
            assert not module.startswith("lightyear.algorithms.attacks"), f"{path.name} imports {module}"
