"""A P2P executor run in-process arms its delivery watch when the run ends (lightyear.p2p.site.result_watch);
no server takes the result there, so each test disarms the watches it armed: otherwise one fires
minutes later inside another test and panics that test's engine."""

import pytest

from lightyear.p2p.site import result_watch as delivery


@pytest.fixture(autouse=True)
def disarm_delivery_watches(monkeypatch):
    armed = []
    arm = delivery.DeliveryWatch.arm

    def arm_and_remember(watch):
        armed.append(watch)
        arm(watch)

    monkeypatch.setattr(delivery.DeliveryWatch, "arm", arm_and_remember)
    yield
    for watch in armed:
        watch.disarm()
