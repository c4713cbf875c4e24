"""The attack component of a simulated attacking peer: what the job names, checked when it is built.

Listed by an attacking site's client app (``app_faulty``) and named by its executor's ``attack_id``: the site's
:class:`~lightyear.p2p.site.sending.OutgoingHook` (:mod:`lightyear.p2p.attack.crafting`, ``docs/attacks-p2p.md``),
also answering the other attackers' collusion messages. Label flipping is no component: see ``flip_labels``.
"""

from __future__ import annotations

from nvflare.apis.event_type import EventType
from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.algorithms.attacks.settings import AttackSpec
from lightyear.algorithms.attacks.updates import ADAPTIVE, LF, PARTIAL
from lightyear.checks import integer
from lightyear.flare import constants as C
from lightyear.p2p.attack.collusion import Collusion
from lightyear.p2p.attack.crafting import WAIT_SHARE, PeerAttack
from lightyear.p2p.site.sending import Sending, SendingRun


class PeerAttacker(FLComponent):
    def __init__(
        self,
        kind: str,
        knowledge: str = PARTIAL,
        attackers: list | None = None,
        params: dict | None = None,
        seed: int = 0,
    ):
        """Args:
        kind: the attack (sf, mr, lie, minmax, minsum, ipm, adaptive, rescale, permute or rescale_permute).
        knowledge: ``partial`` (the attackers pool their honest updates) or ``full`` (also the benign ones').
        attackers: every attacking site of the run, this one included; seed: the job seed, for the attack's draws.
        params: the ``attack_<param>`` settings (:func:`~lightyear.algorithms.attacks.settings.params_of`).
        """
        super().__init__()
        self.spec = AttackSpec(
            kind, knowledge, () if attackers is None else attackers, {} if params is None else params
        )
        if kind == LF:
            raise ValueError(
                "label flipping (lf) is no PeerAttacker: "
                "give the attackers' executor the argument flip_labels=true instead"
            )
        if not self.spec.attackers:
            raise ValueError("attackers must list the attacking sites (this one included), got none")
        self.seed = integer("seed", seed)
        self.collusion: Collusion | None = None
        self.attack: PeerAttack | None = None

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def needs_oracle(self) -> bool:
        """The adaptive attack predicts each receiver's round with the method's own decision."""
        return self.spec.kind == ADAPTIVE

    def handle_event(self, event_type: str, fl_ctx: FLContext):
        if event_type == EventType.START_RUN:
            engine = fl_ctx.get_engine()
            engine.register_aux_message_handler(topic=C.TOPIC_COLLUDE, message_handle_func=self._on_collude)

    def _on_collude(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        collusion = self.collusion
        if collusion is None:
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)  # the run has not started: the sender retries
        try:
            return collusion.on_message(request)
        except Exception as exc:  # noqa: BLE001 - a message can only get its sender refused
            self.log_warning(fl_ctx, f"refused a collusion message: {type(exc).__name__}: {exc}")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)

    def begin_run(self, run: SendingRun) -> None:
        """The run starts: build the attack and take the other attackers' messages (checked against the reference)."""
        if run.site not in self.spec.attackers:
            raise ValueError(
                f"site {run.site} runs the attack component but is not among its attackers "
                f"{list(self.spec.attackers)}; regenerate the job"
            )
        collusion = Collusion(
            run.site, self.spec.attackers, run.rounds, run.max_abs_weight, run.log, start_round=run.start_round
        )
        collusion.open(run.reference, run.codec, run.secure, run.send_timeout, WAIT_SHARE * run.peer_deadline)
        self.attack = PeerAttack(self.spec, run, collusion, seed=self.seed)
        self.collusion = collusion

    def outgoing(self, sending: Sending) -> tuple[dict, dict]:
        """(the model to send this round, or a PerReceiver of them; the attack's record fields)."""
        return self.attack.outgoing(sending)
