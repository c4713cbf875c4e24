"""Ditto (Li et al. 2021): FedAvg on the server, a personal model per site (:mod:`lightyear.star.sites.personal`)."""

from lightyear.flare.declarations import STAR, Method
from lightyear.star.aggregator import FedAvgAggregator
from lightyear.star.sites.personal import PersonalExecutor

METHOD = Method(
    "ditto",
    STAR,
    "FedAvg; each site also trains a personal model with lam/2 ||v - w_global||^2 and reports it",
    site=PersonalExecutor,
    rule=FedAvgAggregator,
)
