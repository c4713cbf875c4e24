"""The ``secure_messages`` job setting: end-to-end encryption of the models sites send each other (docs/deployment.md).

``"auto"`` is on exactly in FLARE's secure mode (a provisioned deployment or ``nvflare poc``, never the simulator);
``true`` stops a run where it is unavailable; ``false`` never. Models are sealed once per send on the ``server`` route
(:mod:`lightyear.p2p.wire.sealing`) or encrypted per copy by FLARE's cell on ``direct``; unencrypted ones are refused
on the cell (:mod:`lightyear.p2p.wire.cell_gate`).
"""

from __future__ import annotations

AUTO = "auto"


def check_setting(value):
    """``value`` itself when it is ``"auto"``, ``true`` or ``false``; else a ValueError naming it."""
    if value is AUTO or value == AUTO or isinstance(value, bool):
        return value
    raise ValueError(f'secure_messages must be "auto", true or false, got {value!r}')


def deployment_secure(fl_ctx) -> bool:
    """Whether this FLARE process runs in secure mode (certificates present, messages can be encrypted)."""
    from nvflare.apis.fl_constant import FLContextKey

    return bool(fl_ctx.get_prop(FLContextKey.SECURE_MODE, False))


def resolve(setting, secure_mode: bool, where: str) -> bool:
    """The effective choice for process ``where``; ``true`` without ``secure_mode`` raises a RuntimeError (the fix)."""
    setting = check_setting(setting)
    if setting == AUTO:
        return bool(secure_mode)
    if setting and not secure_mode:
        raise RuntimeError(
            f"secure_messages=true, but {where} does not run in FLARE's secure mode, so models sent between "
            "sites cannot be encrypted end to end (the simulator never can). Run the job in a provisioned "
            "deployment (or nvflare poc), or generate it with --set secure_messages=auto (encrypt where "
            "possible) or false"
        )
    return bool(setting)
