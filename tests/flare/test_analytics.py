"""Which round metrics go to TensorBoard, and that streaming never stops a round."""

from lightyear.flare.analytics import metrics_to_stream, stream_round


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


class _Sender:
    def __init__(self, fail=False):
        self.sent, self.fail = [], fail

    def add(self, tag, value, data_type, global_step=None):
        if self.fail:
            raise RuntimeError("server unreachable")
        self.sent.append((tag, value, global_step))


class _Ctx:
    def __init__(self, sender):
        self.sender = sender

    def get_engine(self):
        return self

    def get_component(self, cid):
        return self.sender if cid == "analytics_sender" else None


class _Component:
    def __init__(self):
        self.warnings = []

    def log_warning(self, fl_ctx, msg):
        self.warnings.append(msg)


def test_stream_round_sends_with_the_round_as_step_and_swallows_failures():
    sender = _Sender()
    assert stream_round(_Component(), {"round": 4, "val_acc": 0.9}, _Ctx(sender)) == 1
    assert sender.sent == [("val_acc", 0.9, 4)]
    component = _Component()
    assert stream_round(component, {"round": 4, "val_acc": 0.9}, _Ctx(_Sender(fail=True))) == 0
    assert component.warnings and "server unreachable" in component.warnings[0]
    assert stream_round(_Component(), {"round": 1, "val_acc": 0.9}, _Ctx(None)) == 0  # job without streaming
