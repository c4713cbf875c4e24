"""One record a site and round of the job: what the server keeps of a site's round reports."""

import threading

import pytest

from lightyear.flare.round_ledger import RoundLedger


def test_a_round_is_granted_once_a_site_and_only_within_the_job():
    ledger = RoundLedger(rounds=3)
    assert ledger.claim("site-1", 0) is None
    assert ledger.claim("site-2", 0) is None  # another site's round 0
    assert ledger.claim("site-1", 0) == "round 0 was recorded already"
    assert ledger.claim("site-1", 2) is None
    assert ledger.claim("site-1", 3) == "round must be an integer in [0, 2], got 3"
    for bad in (-1, 1.0, "1", True, None):
        assert ledger.claim("site-1", bad).startswith("round must be an integer in [0, 2], got")
    assert ledger.claim("site-1", 1) is None  # refusals granted nothing


def test_a_round_claimed_at_once_by_many_threads_is_granted_to_one():
    ledger = RoundLedger(rounds=1)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(ledger.claim("site-1", 0))) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(None) == 1 and len(answers) == 16


@pytest.mark.parametrize("rounds", [0, -1, 2.5, None, True])
def test_a_ledger_needs_the_jobs_number_of_rounds(rounds):
    with pytest.raises(ValueError, match="rounds must be a positive integer"):
        RoundLedger(rounds)
