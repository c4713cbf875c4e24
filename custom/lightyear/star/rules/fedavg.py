"""Star FedAvg (McMahan et al. 2017): the sample-weighted mean on the server
(:class:`~lightyear.star.aggregator.FedAvgAggregator`); it excludes no sender, so it has no detection figures."""

from lightyear.flare.declarations import STAR, Method
from lightyear.star.aggregator import FedAvgAggregator

METHOD = Method(
    "fedavg",
    STAR,
    "sample-weighted mean on the server",
    rule=FedAvgAggregator,
)
