"""The malfunction component: corrupts what a faulty site sends, in either topology (the rules:
:mod:`lightyear.algorithms.malfunctions`). Peer-to-peer executors call :meth:`MalfunctionFilter.corrupt` on the model
they send (their own stays clean); star jobs list it as a result filter of the ``train`` task, corrupting the DXO."""

from __future__ import annotations

from nvflare.apis.dxo import DataKind, MetaKey, from_shareable
from nvflare.apis.filter import Filter
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable

from lightyear.algorithms.malfunctions import KINDS, NONE, MalfunctionSpec
from lightyear.checks import finite_number, integer, one_of

MODEL_KINDS = (DataKind.WEIGHTS, DataKind.WEIGHT_DIFF)


class MalfunctionFilter(Filter):
    def __init__(
        self,
        kind: str = NONE,
        sigma: float = 1.0,
        scale: float = 120.5,
        alpha: float = 1.0,
        dynamic_kinds: list | None = None,
        seed: int = 0,
        model: str = "cnn",
        model_args: dict | None = None,
        num_classes: int | None = None,
        in_channels: int = 1,
    ):
        """A site's malfunction (:class:`lightyear.algorithms.malfunctions.MalfunctionSpec`; ``kind`` one of its KINDS):
        ``sigma`` the ANA noise standard deviation (Eq. 4); ``scale`` s of the relative ANA, theta + N(0,1) * s/100 *
        theta; ``alpha`` the SFA factor (Eq. 5); ``dynamic_kinds`` what ``dynamic`` draws from (default ana_relative,
        sfa, random); ``seed`` fixes every draw with site and round; the model arguments build ``random``'s network."""
        super().__init__()
        one_of("kind (the malfunction)", kind, KINDS)
        self.spec_args = dict(
            kind=kind,
            sigma=finite_number("sigma (ana_sigma)", sigma),
            scale=finite_number("scale (ana_scale)", scale),
            alpha=finite_number("alpha (sfa_alpha)", alpha),
            seed=integer("seed", seed),
        )
        if dynamic_kinds:
            self.spec_args["dynamic_kinds"] = tuple(dynamic_kinds)
        MalfunctionSpec(**self.spec_args)  # validate now, before training starts
        self.model = model
        self.model_args = dict(model_args or {})
        self.num_classes = num_classes
        self.in_channels = in_channels
        self._spec: MalfunctionSpec | None = None

    @property
    def kind(self) -> str:
        return self.spec_args["kind"]

    def spec(self, site: str) -> MalfunctionSpec:
        if self._spec is None or self._spec.site != site:
            self._spec = MalfunctionSpec(site=site, fresh_init=self._fresh_init, **self.spec_args)
        return self._spec

    def _fresh_init(self, seed: int):
        from lightyear.training.weights import seeded_weights  # torch: only for the random malfunction

        if self.num_classes is None:
            raise ValueError("the random malfunction needs num_classes to build a fresh model")
        return seeded_weights(self.model, self.num_classes, self.in_channels, seed, self.model_args)

    def corrupt(self, weights, round_num: int, site: str):
        """Return (corrupted copy of ``weights``, kind applied this round)."""
        return self.spec(site).apply(weights, round_num)

    def process(self, shareable: Shareable, fl_ctx: FLContext) -> Shareable:
        """Corrupt the model (or update) in a star result's DXO; anything else passes unchanged."""
        try:
            dxo = from_shareable(shareable)
        except ValueError:
            return shareable  # no DXO: an error reply, nothing to corrupt
        if dxo.data_kind not in MODEL_KINDS or not dxo.data:
            return shareable
        round_num = int(dxo.get_meta_prop(MetaKey.CURRENT_ROUND, 0))
        site = fl_ctx.get_identity_name()
        dxo.data, applied = self.corrupt(dxo.data, round_num, site)
        dxo.add_filter_history(type(self).__name__)
        what = "update" if dxo.data_kind == DataKind.WEIGHT_DIFF else "model"
        self.log_info(fl_ctx, f"malfunction round {round_num}: sent {applied} {what}")
        return dxo.update_shareable(shareable)
