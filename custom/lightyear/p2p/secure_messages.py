"""The ``secure_messages`` job setting: end-to-end encryption of the models sites send each other.

On the ``server`` model route (the default) a site seals each model once for all its receivers,
with its provisioned key and their certificates (:mod:`lightyear.p2p.wire.sealing`); the server
hands on what it cannot read or forge. On the ``direct`` route FLARE encrypts each copy, as follows.
In FLARE 2.9 every message from one site to another is relayed by the server. A send with
``secure=True`` (``engine.send_aux_request(..., secure=True)``) has the sending site's cell
encrypt the serialized message body for the receiving site's certificate before it leaves
(``nvflare/fuel/f3/cellnet/core_cell.py``, ``encrypt_payload``; the cipher is in
``nvflare/fuel/f3/cellnet/cell_cipher.py``: a per-peer AES-256-GCM key wrapped with the
receiver's RSA key, every message signed with the sender's key and checked against the
project's root CA), and the receiving cell decrypts it; the reply is encrypted the same way.
Arrays that travel through FLARE's download service inherit the protection of the message that
referred to them (``nvflare/fuel/utils/fobs/decomposers/via_downloader.py``). The relay still
sees the message headers: origin and destination cells, channel and topic, the clear payload
length, and when and how much is sent.

Encryption needs every site to hold a certificate signed by the project's root CA, which
exists only when FLARE runs in secure mode (a provisioned deployment, and ``nvflare poc`` in
2.9, which provisions certificates too); the simulator has none. FLARE's own client-controlled
workflows enable it under the same condition (``nvflare/app_common/ccwf/client_ctl.py``,
``is_task_secure``: the ``SECURE_MODE`` context property).

Values: ``"auto"`` (default: on exactly when the deployment runs in secure mode), ``true``
(required: a run where it is unavailable stops at its start with a message saying so) and
``false`` (never). When on, a receiving site also refuses model messages and array downloads that
arrive unencrypted. FLARE passes a plain message to the aux handler exactly like a decrypted one
(``nvflare/private/fed/client/command_agent.py`` hands it the payload alone), so the site checks
FLARE's ``SECURE``/``ENCRYPTED`` markers on its cell, before FLARE decrypts or decodes anything
(:mod:`lightyear.p2p.wire.cell_gate`).
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
    """The effective choice for a process whose secure mode is ``secure_mode``.

    ``true`` where FLARE does not run in secure mode raises a RuntimeError that says why and
    what to do; ``where`` names the process (``the server``, ``site-2``).
    """
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
