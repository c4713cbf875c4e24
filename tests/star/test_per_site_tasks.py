"""One task per site, waited for as a broadcast waits: an abort, enough answers, every task ended."""

from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask, Task, TaskCompletionStatus
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.star.per_site_tasks import wait_like_broadcast


def _mark(task, completion_status):
    """What FLARE's cancel_task does: mark the task; its monitor then removes it."""
    task.completion_status = completion_status


def _tasks(count: int) -> list[Task]:
    return [Task(name=C.STAR_TRAIN_TASK, data=Shareable()) for _ in range(count)]


def test_an_abort_cancels_every_open_task_as_aborted():
    tasks = _tasks(2)
    signal = Signal()
    signal.trigger("stop")
    wait_like_broadcast(tasks, need=1, wait_after=10.0, abort_signal=signal, cancel_task=_mark)
    assert {t.completion_status for t in tasks} == {TaskCompletionStatus.ABORTED}


def test_enough_answers_cancel_the_rest_once_the_extra_wait_passed():
    tasks = _tasks(2)
    answered = ClientTask(Client("site-1", None), tasks[0])
    answered.result_received_time = 1.0
    tasks[0].client_tasks.append(answered)
    tasks[0].completion_status = TaskCompletionStatus.OK
    wait_like_broadcast(tasks, need=1, wait_after=0.0, abort_signal=Signal(), cancel_task=_mark, poll=0.01)
    assert tasks[0].completion_status == TaskCompletionStatus.OK
    assert tasks[1].completion_status == TaskCompletionStatus.CANCELLED


def test_nothing_is_cancelled_when_every_task_ended():
    tasks = _tasks(2)
    for task in tasks:
        task.completion_status = TaskCompletionStatus.TIMEOUT
    wait_like_broadcast(tasks, need=2, wait_after=10.0, abort_signal=None, cancel_task=_mark)
    assert {t.completion_status for t in tasks} == {TaskCompletionStatus.TIMEOUT}
