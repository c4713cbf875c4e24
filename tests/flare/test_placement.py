"""Where a job's sites run in FLARE's simulator, and what a stalled peer-to-peer start says to do."""

import pytest

from lightyear.flare.placement import gpu_groups, p2p_simulator_advice, parse_gpu_ids
from lightyear.p2p.site.handshake import handshake


def test_every_site_gets_its_own_group_with_the_gpus_dealt_in_turn():
    assert gpu_groups(4, [0, 1]) == "0,1,0,1"
    assert gpu_groups(5, ["2", "3"]) == "2,3,2,3,2"
    assert gpu_groups(2, [0, 1, 2, 3]) == "0,1"
    assert parse_gpu_ids(" 0, 1") == [0, 1]


@pytest.mark.parametrize("bad", ["", "0,,1", "a", "-1", "0;1"])
def test_bad_gpu_ids_are_refused_naming_the_form(bad):
    with pytest.raises(ValueError, match="comma-separated GPU ids"):
        parse_gpu_ids(bad)


def test_the_advice_gives_the_exact_cpu_and_gpu_commands():
    text = p2p_simulator_advice(8, num_gpus=3)
    assert "nvflare simulator JOB -w WORKSPACE -t 8" in text
    assert "nvflare simulator JOB -w WORKSPACE -gpu 0,1,2,0,1,2,0,1" in text
    assert "-gpu 0,1,0,1" in p2p_simulator_advice(4, num_gpus=0)  # no GPU here: the example uses 2


def test_a_site_whose_neighbours_never_answer_says_how_to_run_the_job():
    class Silent:
        def send_aux_request(self, **kwargs):
            return {}

    with pytest.raises(RuntimeError) as err:
        handshake(
            Silent(), None, ["site-2", "site-3", "site-4"], ready_timeout=0.2, abort=lambda: False, log=lambda *a: None
        )
    assert "-t 4" in str(err.value) and "-gpu " in str(err.value)
