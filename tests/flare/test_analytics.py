"""Round metrics to TensorBoard: which metrics a site sends (one message a round), that sending never
stops a round, and that the server writes a site's curves only from a message it can trust."""

import math

import pytest
from nvflare.apis.event_type import EventType
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from lightyear.flare import constants as C
from lightyear.flare.analytics import (
    MAX_TAGS,
    RoundBoard,
    RoundMetricsSender,
    metrics_problem,
    metrics_to_stream,
    stream_round,
)


def test_only_finite_numeric_metrics_are_streamed():
    row = {
        "round": 3,
        "site": "site-1",
        "selected": ["site-2"],
        "val_acc": 0.5,
        "test_dice": 0.7,
        "train_loss": 1.25,
        "site-2_score": 0.8,
        "site-3_score": "",
        "val_ece": float("nan"),
        "late": [],
        "n_selected": 1,
        "warming_up": True,
    }
    assert metrics_to_stream(row) == {
        "val_acc": 0.5,
        "test_dice": 0.7,
        "train_loss": 1.25,
        "site-2_score": 0.8,
        "n_selected": 1.0,
    }


class _Client:
    def __init__(self, name):
        self.name = name


class _Workspace:
    def __init__(self, root):
        self.root = root

    def get_run_dir(self, job_id):
        return str(self.root / job_id)


class _Engine:
    """What the components use of FLARE's engine: components, clients, messages, the workspace."""

    def __init__(self, tmp_path=None, components=None, sites=(), fail=False):
        self.components, self.sites, self.fail = components or {}, list(sites), fail
        self.sent, self.handlers, self.workspace = [], {}, _Workspace(tmp_path)

    def get_component(self, cid):
        return self.components.get(cid)

    def get_clients(self):
        return [_Client(s) for s in self.sites]

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, **kwargs):
        if self.fail:
            raise RuntimeError("server unreachable")
        self.sent.append((targets, topic, request, timeout))

    def register_aux_message_handler(self, topic, message_handle_func):
        self.handlers[topic] = message_handle_func

    def get_workspace(self):
        return self.workspace


class _Ctx:
    def __init__(self, engine):
        self.engine = engine

    def get_engine(self):
        return self.engine

    def get_job_id(self):
        return "simulate_job"


class _Component:
    def __init__(self):
        self.warnings = []

    def log_warning(self, fl_ctx, msg):
        self.warnings.append(msg)


def test_a_round_goes_to_the_server_in_one_message_with_the_round_as_step():
    engine = _Engine(components={"round_metrics_sender": RoundMetricsSender()})
    assert stream_round(_Component(), {"round": 4, "val_acc": 0.9, "test_acc": 0.8, "site": "x"}, _Ctx(engine)) == 2
    [(targets, topic, message, timeout)] = engine.sent
    assert (targets, topic, timeout) == (["server"], C.TOPIC_ROUND_METRICS, 0.0)  # fire and forget
    assert message[C.KEY_ROUND] == 4 and message[C.KEY_METRICS] == {"val_acc": 0.9, "test_acc": 0.8}


def test_streaming_never_stops_a_round_and_a_job_without_it_sends_nothing():
    component = _Component()
    failing = _Engine(components={"round_metrics_sender": RoundMetricsSender()}, fail=True)
    assert stream_round(component, {"round": 4, "val_acc": 0.9}, _Ctx(failing)) == 0
    assert component.warnings and "server unreachable" in component.warnings[0]
    silent = _Engine()  # tensorboard=false: the job has no sender
    assert stream_round(_Component(), {"round": 1, "val_acc": 0.9}, _Ctx(silent)) == 0 and silent.sent == []


@pytest.mark.parametrize(
    "metrics, problem",
    [
        ({"val_acc": 0.5}, None),
        ({}, None),
        ([("val_acc", 0.5)], "metrics must be a mapping"),
        ({"val_acc": math.inf}, "'val_acc' is not a finite number"),
        ({"val_acc": "0.5"}, "'val_acc' is not a finite number"),
        ({"val_acc": True}, "'val_acc' is not a finite number"),
        ({"": 0.5}, "a tag must be a string"),
        ({"x" * 201: 0.5}, "a tag must be a string"),
        ({f"t{i}": 0.0 for i in range(MAX_TAGS + 1)}, f"more than {MAX_TAGS}"),
    ],
)
def test_what_a_round_message_must_hold_to_be_written(metrics, problem):
    found = metrics_problem(metrics)
    assert found is None if problem is None else problem in found


def _message(site, round_num, metrics):
    message = Shareable()
    message.set_peer_props({ReservedKey.IDENTITY_NAME: site})
    message[C.KEY_ROUND] = round_num
    message[C.KEY_METRICS] = metrics
    return message


def _curves(folder):
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_the_server_writes_each_sites_curves_from_the_authenticated_sender_only(tmp_path):
    engine = _Engine(tmp_path, sites=["site-1", "site-2"])
    board, ctx = RoundBoard(rounds=3), _Ctx(engine)
    warnings = []
    board.log_warning = lambda fl_ctx, msg: warnings.append(msg)
    board.log_info = lambda fl_ctx, msg: None
    board.handle_event(EventType.START_RUN, ctx)
    receive = engine.handlers[C.TOPIC_ROUND_METRICS]
    assert receive("t", _message("site-1", 0, {"val_acc": 0.5}), ctx).get_return_code() == ReturnCode.OK
    assert receive("t", _message("site-1", 1, {"val_acc": 0.75}), ctx).get_return_code() == ReturnCode.OK
    refused = [
        _message("site-9", 1, {"val_acc": 0.1}),  # not a site of this run
        _message("site-2", 1, {"val_acc": 0.1, "val_loss": math.nan}),  # refused whole, nothing written
        _message("../site-1", 1, {"val_acc": 0.1}),
        _message("site-1", 1, {"val_acc": 0.1}),  # the same round again: a site's curve is written once a round
        _message("site-1", 3, {"val_acc": 0.1}),  # not a round of this 3-round job
    ]
    for message in refused:
        assert receive("t", message, ctx).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    assert len(warnings) == 5 and "not a site of this run" in warnings[0] and "'val_loss'" in warnings[1]
    assert "round 1 was recorded already" in warnings[3] and "got 3" in warnings[4]
    run = tmp_path / "simulate_job" / "tb_events"
    assert sorted(p.name for p in run.iterdir()) == ["site-1"]
    assert _curves(run / "site-1") == {"val_acc": [(0, 0.5), (1, 0.75)]}  # readable while the run goes on
    board.handle_event(EventType.END_RUN, ctx)
    late = receive("t", _message("site-2", 2, {"val_acc": 0.9}), ctx)  # after the end: no file left open
    assert late.get_return_code() == ReturnCode.EXECUTION_EXCEPTION and "the run has ended" in warnings[-1]
    assert sorted(p.name for p in run.iterdir()) == ["site-1"]
    assert _curves(run / "site-1") == {"val_acc": [(0, 0.5), (1, 0.75)]}


@pytest.mark.parametrize("folder", ["", "/abs", "../up", 3])
def test_a_tensorboard_folder_outside_the_run_folder_is_refused(folder):
    with pytest.raises(ValueError, match="tb_folder must be a folder name inside the run folder"):
        RoundBoard(rounds=3, tb_folder=folder)


@pytest.mark.parametrize("rounds", [0, -1, 2.5, None])
def test_a_board_needs_the_jobs_number_of_rounds(rounds):
    with pytest.raises(ValueError, match="rounds"):
        RoundBoard(rounds=rounds)
