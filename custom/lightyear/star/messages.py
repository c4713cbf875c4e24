"""How star-topology tasks and results carry models: plain FLARE DXOs, so FLARE's filters apply unchanged.

A task is a ``WEIGHTS`` DXO with the round (``MetaKey.CURRENT_ROUND``, or a Swarm task's ``current_round`` header),
the run settings (``lightyear_config``) and the method's extras in its meta; a result a ``WEIGHTS`` or
``WEIGHT_DIFF`` DXO with the sample count (``MetaKey.NUM_STEPS_CURRENT_ROUND``) and the round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nvflare.apis.dxo import DXO, DataKind, MetaKey, from_shareable
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.app_common.app_constant import AppConstants

from lightyear.flare.constants import KEY_CONFIG

RESULT_KINDS = (DataKind.WEIGHTS, DataKind.WEIGHT_DIFF)


def task_data(weights: dict, round_num: int, config: dict, extras: dict | None = None) -> Shareable:
    """The Shareable of a ``train`` or ``evaluate`` task: a WEIGHTS DXO with the round and settings in its meta."""
    meta = dict(extras or {})
    meta[MetaKey.CURRENT_ROUND] = int(round_num)
    meta[KEY_CONFIG] = dict(config)
    return DXO(data_kind=DataKind.WEIGHTS, data=weights, meta=meta).to_shareable()


@dataclass
class StarTask:
    """A task as the site reads it: the model sent (None for none), the round, the settings, the whole meta."""

    weights: dict | None
    round_num: int
    config: dict
    meta: dict = field(default_factory=dict)


def read_task(shareable: Shareable) -> StarTask:
    """Unpack a task; raises ValueError naming what is wrong (the site then reports the error)."""
    dxo = from_shareable(shareable)
    if dxo.data_kind != DataKind.WEIGHTS:
        raise ValueError(f"a star task carries a DXO of kind WEIGHTS, got {dxo.data_kind!r}")
    round_num = dxo.get_meta_prop(MetaKey.CURRENT_ROUND)
    if round_num is None:  # FLARE's Swarm Learning (lightyear.star.swarm) puts it in the task's header
        round_num = shareable.get_header(AppConstants.CURRENT_ROUND, 0)
    if isinstance(round_num, bool) or not isinstance(round_num, int) or round_num < 0:
        raise ValueError(f"the task's round must be an integer >= 0, got {round_num!r}")
    config = dxo.get_meta_prop(KEY_CONFIG) or {}
    if not isinstance(config, dict):
        raise ValueError(f"the task's {KEY_CONFIG} must be a mapping, got {type(config).__name__}")
    return StarTask(weights=dxo.data or None, round_num=round_num, config=config, meta=dict(dxo.meta or {}))


def result_data(weights: dict, num_samples: float, round_num: int, kind: str = DataKind.WEIGHTS) -> Shareable:
    """An OK reply holding the trained model (``WEIGHTS``) or trained minus received (``WEIGHT_DIFF``)."""
    if kind not in RESULT_KINDS:
        raise ValueError(f"a star result is a DXO of kind {' or '.join(RESULT_KINDS)}, got {kind!r}")
    meta = {MetaKey.NUM_STEPS_CURRENT_ROUND: num_samples, MetaKey.CURRENT_ROUND: int(round_num)}
    return DXO(data_kind=kind, data=weights, meta=meta).update_shareable(make_reply(ReturnCode.OK))


@dataclass
class StarResult:
    """A site's unpacked result; ``problem`` is set (and the rest meaningless) when it is no usable DXO."""

    kind: str = ""
    data: object = None
    num_samples: object = None
    problem: str = ""


def read_result(shareable: Shareable) -> StarResult:
    """Unpack a site's result without raising: whatever is malformed is named in ``problem``."""
    try:
        dxo = from_shareable(shareable)
    except Exception as exc:  # noqa: BLE001 - a hostile payload only gets its sender rejected
        return StarResult(problem=f"no DXO ({type(exc).__name__}: {exc})")
    if dxo.data_kind not in RESULT_KINDS:
        return StarResult(problem=f"DXO kind {dxo.data_kind!r} is neither WEIGHTS nor WEIGHT_DIFF")
    return StarResult(kind=dxo.data_kind, data=dxo.data, num_samples=dxo.get_meta_prop(MetaKey.NUM_STEPS_CURRENT_ROUND))
