"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous Networks", MLSys
2020): FedAvg on the server; each site minimises h_k(w; w^t) = F_k(w) + mu/2 ||w - w^t||^2 (Eq. 2, Algorithm 2), the
received w^t frozen. Default mu = 0.01: in the paper's grid (Sec. 5.3), FLARE's ``PTFedProxLoss`` default.
"""

from __future__ import annotations

from lightyear.flare.declarations import STAR, Method
from lightyear.star.aggregator import FedAvgAggregator
from lightyear.star.executor import StarExecutor
from lightyear.star.messages import StarTask
from lightyear.training.regularizers import check_mu, parameter_snapshot, proximal_term

MU = 0.01


class FedProxExecutor(StarExecutor):
    def __init__(self, mu: float = MU, **kwargs):
        """Args: mu: strength of the proximal term (>= 0; 0 turns it off); the others: as
        :class:`~lightyear.star.executor.StarExecutor`."""
        self.mu = check_mu(mu)
        super().__init__(**kwargs)

    def train_round(self, task: StarTask) -> dict:
        reference = parameter_snapshot(self.runtime.model)  # w^t, as received
        return self.runtime.train(
            task.round_num, regularizer=lambda model: proximal_term(model, reference, self.mu), **self.data_options()
        )


METHOD = Method(
    "fedprox",
    STAR,
    "FedAvg; each site adds mu/2 ||w - w_global||^2 to its loss",
    site=FedProxExecutor,
    rule=FedAvgAggregator,
)
