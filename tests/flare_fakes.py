"""Small stand-ins for FLARE's engine parts, shared by the component tests."""

from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask, Task
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.flare import constants as C


class FakeWorkspace:
    def __init__(self, root):
        self.root = root

    def get_run_dir(self, job_id):
        return self.root


def model_message(sender, round_num, weights):
    """A peer's model message as FLARE delivers it: the sender's identity in the peer properties."""
    req = Shareable()
    req[C.KEY_ROUND] = round_num
    req[C.KEY_WEIGHTS] = weights
    req.set_peer_props({ReservedKey.IDENTITY_NAME: sender})
    return req


def context(engine, site="site-1"):
    """An FLContext of ``site`` whose engine is ``engine`` (which keeps it as its new_context())."""
    from nvflare.apis.fl_context import FLContext

    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, engine, private=True, sticky=False)
    ctx.set_prop(ReservedKey.IDENTITY_NAME, site, private=False, sticky=False)
    engine.ctx = ctx
    return ctx


class _StatsEngine:
    """The part of the server engine FLARE's InfoCollector uses: a new context and fire_event."""

    def __init__(self, components):
        self.components = components

    def new_context(self):
        from nvflare.apis.fl_context import FLContext

        return FLContext()

    def fire_event(self, event_type, fl_ctx):
        for component in self.components:
            component.handle_event(event_type, fl_ctx)


def show_stats(*components):
    """What FLARE's server answers to ``show_stats JOB server`` with these components in the job:
    its InfoCollector widget fires the stats event to them and returns what they added."""
    from nvflare.apis.event_type import EventType
    from nvflare.apis.fl_context import FLContext
    from nvflare.widgets.info_collector import InfoCollector

    engine = _StatsEngine(components)
    collector = InfoCollector()
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, engine, private=True, sticky=False)
    collector.handle_event(EventType.START_RUN, ctx)
    return collector.get_run_stats()


class FakeCoreCell:
    """The part of FLARE's CoreCell a site's gate uses: its FQCN and incoming filters (recorded)."""

    def __init__(self, fqcn):
        self.fqcn = fqcn
        self.filters = []

    def get_fqcn(self):
        return self.fqcn

    def add_incoming_filter(self, channel, topic, cb):
        self.filters.append((channel, topic, cb))


class FakeByteReceiver:
    def __init__(self):
        self.rejected = []

    def reject(self, message, error):
        from nvflare.fuel.f3.streaming.stream_const import StreamHeaderKey

        self.rejected.append((message.get_header(StreamHeaderKey.STREAM_ID), str(error)))


class FakeCell:
    """A site's job cell: ``core_cell`` with its filters, ``byte_receiver`` recording rejected streams."""

    def __init__(self, fqcn="site-1.job"):
        self.core_cell = FakeCoreCell(fqcn)
        self.byte_receiver = FakeByteReceiver()

    @property
    def rejected(self):
        return self.byte_receiver.rejected

    def deliver(self, message):
        """What the cell's incoming filters say of ``message``: None (delivered) or the refusal."""
        for _, _, cb in self.core_cell.filters:
            reply = cb(message)
            if reply is not None:
                return reply
        return None


class SiteEngine:
    """A P2P site's engine: records every send as (topic, targets, request, secure) in ``sent``
    and answers each neighbour OK and ready (progress reports to the server get no reply).
    Subclasses override :meth:`before_send` to fail a send."""

    def __init__(self, root, cell=None):
        self.sent = []
        self.workspace = FakeWorkspace(root)
        self.cell = cell or FakeCell()

    def get_cell(self):
        return self.cell

    def before_send(self, topic, targets):
        pass

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        self.sent.append((topic, list(targets) if isinstance(targets, list) else targets, request, secure))
        if topic == C.TOPIC_PROGRESS:
            return {}
        self.before_send(topic, targets)
        replies = {t: make_reply(ReturnCode.OK) for t in targets}
        for reply in replies.values():
            reply["ready"] = True
        return replies

    def new_context(self):
        return self.ctx

    def get_workspace(self):
        return self.workspace

    def fire_event(self, event_type, fl_ctx):
        pass


class ServerEngine:
    """The server's engine: ``sites`` connected, every ping recorded in ``pings`` and answered OK,
    except by the sites in ``dead``."""

    def __init__(self, root, sites, dead=()):
        self.workspace = FakeWorkspace(root)
        self.sites = list(sites)
        self.dead = set(dead)
        self.pings = []

    def get_clients(self):
        return [Client(s, None) for s in self.sites]

    def get_workspace(self):
        return self.workspace

    def register_aux_message_handler(self, topic, message_handle_func):
        pass

    def fire_event(self, event_type, fl_ctx):
        pass

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        self.pings.append(list(targets))
        return {t: make_reply(ReturnCode.OK) for t in targets if t not in self.dead}


class StarServerEngine:
    """A star server's engine: ``sites`` connected, ``components`` by id, every event kept in
    ``events`` as (type, event data)."""

    def __init__(self, root, sites, components):
        self.workspace, self.sites, self.components, self.events = FakeWorkspace(root), list(sites), components, []

    def get_clients(self):
        return [Client(s, None) for s in self.sites]

    def get_workspace(self):
        return self.workspace

    def get_component(self, cid):
        return self.components.get(cid)

    def fire_event(self, event_type, fl_ctx):
        self.events.append((event_type, fl_ctx.get_prop("__event_data__")))


def train_task_with(results):
    """A star ``train`` task whose client tasks hold ``results`` (site -> Shareable)."""
    task = Task(name=C.STAR_TRAIN_TASK, data=Shareable())
    for name, res in results.items():
        ct = ClientTask(Client(name, None), task)
        ct.result = res
        task.client_tasks.append(ct)
    return task


def answer_star_task(task, site, train_result):
    """Add ``site``'s answer to a star task: ``train_result`` to a train task, else a finished
    site's summary (test accuracy 0.5)."""
    ct = ClientTask(Client(site, None), task)
    if task.name == C.STAR_TRAIN_TASK:
        ct.result = train_result
    else:
        ct.result = make_reply(ReturnCode.OK)
        ct.result[C.KEY_RESULT] = {"site": site, "malfunction": "none", "test": {"acc": 0.5}}
    task.client_tasks.append(ct)
