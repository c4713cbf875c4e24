# ruff: noqa: B018  (each expression names what is used; evaluating it is the point)
"""Names the dead-code check (tests/test_dead_code.py, vulture) must take as used: what no module of
the package, no benchmark and no dataset script calls, because FLARE, an entry point, a class path
in a job's configuration, PyTorch or the logging module does. Tests do not count as callers.

Vulture matches by name, so one entry covers every definition of that name. The entries are real
expressions: tests/test_dead_code.py runs this file, so an entry whose name is renamed or removed
fails there instead of staying behind. Add an entry only with the caller that vulture cannot see.
"""

import logging

import cpu_profile  # benchmarks/cpu_profile.py (tests/test_dead_code.py puts benchmarks/ on sys.path)
import torch

from lightyear.algorithms.p2p.defta_trust import TrustDecision
from lightyear.experiments import results
from lightyear.flare import analytics, malfunction_filter
from lightyear.jobs.flare_job import GeneratedJobConfig, GeneratedRecipe
from lightyear.p2p.attack.attacker import PeerAttacker
from lightyear.p2p.methods import balance, defta, p2p_fedavg, scclip
from lightyear.p2p.methods import lightyear as lightyear_method
from lightyear.p2p.server import controller as p2p_controller
from lightyear.p2p.site import result_watch
from lightyear.p2p.wire import buffer, latest_models
from lightyear.records import summary_main
from lightyear.star import controller as star_controller
from lightyear.star import swarm
from lightyear.star.sites import fedprox, personal
from lightyear.training.losses import WeightedFocalLoss


class Names:
    """Any attribute, for a name that is no attribute of a class or module (a parameter)."""

    def __getattr__(self, name: str) -> str:
        return name


_ = Names()

# Components FLARE builds from the class path in a job's configuration (app_configs templates, the
# methods' declarations, the generator), and the methods FLARE calls on them.
for controller in (star_controller.StarController, p2p_controller.P2PController):
    controller.start_controller, controller.control_flow, controller.stop_controller
    controller.process_result_of_unknown_task  # FLARE passes client_task_id, which the controllers do not use
_.client_task_id
balance.BalanceExecutor, defta.DeftaExecutor, p2p_fedavg.P2PFedAvgExecutor, scclip.ScclipExecutor
fedprox.FedProxExecutor, personal.PersonalExecutor
PeerAttacker  # an attacking site's component (lightyear.jobs.attacks.PEER_ATTACKER)
analytics.RoundBoard
malfunction_filter.MalfunctionFilter.process  # a FLARE Filter: FLARE calls process
swarm.SeededModelPersistor.load_model, swarm.SeededModelPersistor.save_model  # a FLARE ModelPersistor
cpu_profile.CPUProfile  # added to a job's configuration by benchmarks/site_profile.py

# The methods' declarations, which lightyear.jobs.registry loads by name from its BUILTIN strings
# ("module:METHOD"); one entry covers every module's METHOD.
lightyear_method.METHOD

# FLARE's Job API calls these overrides (nvflare/job_config/fed_job_config.py, nvflare/recipe/spec.py).
GeneratedJobConfig.generate_job_config, GeneratedRecipe.process_env

# A console script of pyproject.toml ([project.scripts] lightyear-summary).
summary_main

# Public API for users' own analyses, documented in docs/results.md.
results.load_sweep

# Set or read by libraries: PyTorch's module repr, cuDNN's switch (trainer.use_deterministic_kernels),
# a log record's level name (p2p/site/handshake.EarlyPingFilter).
WeightedFocalLoss.extra_repr
torch.backends.cudnn.benchmark
logging.makeLogRecord({}).levelname

# A field of DeFTA's trust decision (Algorithm 3's score changes), returned whole; read by its tests.
TrustDecision(False, False, 0.0).score_changes

# The tests' view of what a site holds: the memory bounds a peer's messages cannot grow past, and
# whether the result watch is armed.
buffer.PeerModelBuffer.models_held, latest_models.LatestModelStore.models_held
result_watch.DeliveryWatch.armed
