"""A peer-to-peer site's round queues for a compute slot twice: to train, then to aggregate and evaluate."""

from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.training.compute_slots import ComputeSlots

from flare_fakes import SiteEngine, context

FULL3 = {"site-1": ["site-2", "site-3"], "site-2": ["site-1", "site-3"], "site-3": ["site-1", "site-2"]}


def test_a_round_queues_once_to_train_and_once_to_aggregate_and_evaluate(tmp_path, monkeypatch):
    holds = []
    hold = ComputeSlots.hold

    def counted(self, abort=None):
        holds.append(self.slots)
        return hold(self, abort)

    monkeypatch.setattr(ComputeSlots, "hold", counted)
    run_dir = tmp_path / "site-1" / "job"
    run_dir.mkdir(parents=True)
    ex = P2PFedAvgExecutor(train_args={"local_epochs": 1, "batch_size": 64}, num_threads=1, compute_slots=1)
    ex.site = "site-1"
    ex.peer_deadline = 0.3  # no peer answers: each round waits this long, then keeps the own model
    task = Shareable()
    task[C.KEY_CONFIG] = {"rounds": 2, "seed": 0, "neighbours": FULL3}
    reply = ex.execute(C.P2P_RUN_TASK, task, context(SiteEngine(str(run_dir))), Signal())
    assert reply.get_return_code() == ReturnCode.OK
    assert len(holds) == 1 + 2 * 2  # the first round's start handshake, then two a round
