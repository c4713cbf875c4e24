"""Names shared by the server and site components: task names, message topics, payload keys."""

P2P_RUN_TASK = "lightyear_p2p_run"
STAR_TRAIN_TASK = "train"
STAR_EVAL_TASK = "evaluate"

SERVER = "server"
"""How a site names the server as the target of an aux message."""

TOPIC_PING = "lightyear.ping"
TOPIC_MODEL = "lightyear.model"
TOPIC_PROGRESS = "lightyear.progress"
TOPIC_ROUND_METRICS = "lightyear.round_metrics"
"""A site's round metrics for TensorBoard (lightyear.flare.analytics)."""
TOPIC_COLLUDE = "lightyear.collude"
"""Simulated attackers' side channel: their honestly trained models (lightyear.p2p.attack.collusion)."""
TOPIC_DECLARE = "lightyear.declare"
"""A site tells the server the largest model message it takes (lightyear.p2p.server.model_relay)."""
TOPIC_UPLOAD = "lightyear.upload"
"""A site's model of a round, sent once to the server with the receivers it is for."""
TOPIC_FORWARD = "lightyear.forwarded_model"
"""The server hands a receiver a model another site uploaded, naming the sender it authenticated."""
TOPIC_CERTIFICATES = "lightyear.certificates"
"""A site asks the server for its receivers' certificates, to seal its models for them (lightyear.p2p.wire.sealing)."""
MODEL_TOPICS = (TOPIC_MODEL, TOPIC_COLLUDE, TOPIC_UPLOAD)
"""Topics whose messages from a site carry a model (a forwarded model comes from the server alone)."""

KEY_ROUND = "lightyear_round"
KEY_WEIGHTS = "lightyear_weights"
KEY_CONFIG = "lightyear_config"
KEY_RESULT = "lightyear_result"
KEY_ERROR = "lightyear_error"
KEY_PROGRESS = "lightyear_progress"
KEY_METRICS = "lightyear_metrics"
KEY_NUM_SAMPLES = "lightyear_num_samples"
KEY_PAYLOAD = "lightyear_payload"
KEY_SENDER = "lightyear_sender"
KEY_TARGETS = "lightyear_targets"
KEY_TOKEN = "lightyear_token"
KEY_LIMIT = "lightyear_limit"
KEY_SUPERSEDES = "lightyear_supersedes"
KEY_SEAL = "lightyear_seal"
KEY_CERTIFICATE = "lightyear_certificate"
KEY_CERTIFICATES = "lightyear_certificates"
KEY_NAMES = "lightyear_names"


def register_decomposers() -> None:
    """Register FLARE's serialisers for NumPy arrays before any model message is handled."""
    from nvflare.app_common.decomposers import common_decomposers, numpy_decomposers

    common_decomposers.register()
    numpy_decomposers.register()
