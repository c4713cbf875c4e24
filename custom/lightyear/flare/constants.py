"""Names shared by the server and site components: task names, message topics, payload keys."""

P2P_RUN_TASK = "lightyear_p2p_run"
STAR_TRAIN_TASK = "train"
STAR_EVAL_TASK = "evaluate"

TOPIC_PING = "lightyear.ping"
TOPIC_MODEL = "lightyear.model"
TOPIC_PROGRESS = "lightyear.progress"
TOPIC_ROUND_METRICS = "lightyear.round_metrics"
"""A site's round metrics for TensorBoard (lightyear.flare.analytics)."""
TOPIC_COLLUDE = "lightyear.collude"
"""Simulated attackers' side channel: their honestly trained models, shared among them
(lightyear.p2p.attack.collusion)."""
MODEL_TOPICS = (TOPIC_MODEL, TOPIC_COLLUDE)
"""Peer topics whose messages carry a model."""

KEY_ROUND = "lightyear_round"
KEY_WEIGHTS = "lightyear_weights"
KEY_CONFIG = "lightyear_config"
KEY_RESULT = "lightyear_result"
KEY_ERROR = "lightyear_error"
KEY_PROGRESS = "lightyear_progress"
KEY_METRICS = "lightyear_metrics"
KEY_NUM_SAMPLES = "lightyear_num_samples"
KEY_PAYLOAD = "lightyear_payload"


def register_decomposers() -> None:
    """Register FLARE's serialisers for NumPy arrays before any model message is handled."""
    from nvflare.app_common.decomposers import common_decomposers, numpy_decomposers

    common_decomposers.register()
    numpy_decomposers.register()
