"""FedAvg's declaration: the star method whose server rule is the sample-weighted mean
(:class:`lightyear.star.aggregator.FedAvgAggregator`, shared with FedProx and Ditto, whose difference is on
the sites)."""

from lightyear.flare.declarations import STAR, Method
from lightyear.star.aggregator import FedAvgAggregator

METHOD = Method(
    "fedavg",
    STAR,
    "sample-weighted mean on the server",
    rule=FedAvgAggregator,
)
"""Star FedAvg (McMahan et al. 2017): it excludes no sender, so it has no detection figures."""
