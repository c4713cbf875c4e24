"""Self-centred clipping (ClippedGossip) and remove-then-clip on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms.p2p.scclip import adaptive_radius, clip, scclip_update


def model(w, count=3):
    return {"w": np.array(w, dtype=np.float32), "n": np.array(count, dtype=np.int64)}


PEERS = {"near": model([1.0, 0.0]), "mid": model([0.0, 2.0]), "far": model([30.0, 40.0])}  # distances 1, 2, 50 from 0


def test_adaptive_radius_clips_far_neighbour_and_leaves_near_ones():
    out, tau, rec = scclip_update(model([0.0, 0.0]), PEERS)
    # tau = second-largest distance = 2; far: [30, 40] * 2 / 50 = [1.2, 1.6]; near and mid untouched
    # mean of ([1, 0], [0, 2], [1.2, 1.6]) = [2.2, 3.6] / 3 = [0.7333, 1.2]
    assert tau == pytest.approx(2.0)
    np.testing.assert_allclose(out["w"], [2.2 / 3, 1.2], rtol=1e-6)
    assert rec["far"].clipped and rec["far"].scale == pytest.approx(0.04) and rec["far"].distance == pytest.approx(50.0)
    assert not rec["near"].clipped and rec["near"].scale == 1.0
    assert not rec["mid"].clipped  # exactly at the radius: not shortened
    assert not any(r.removed for r in rec.values())
    assert out["n"] == 3 and out["w"].dtype == np.float32


def test_clipping_is_centred_on_the_own_model():
    shift = np.array([1.0, 1.0])
    own = model(shift)
    shifted = {p: model(m["w"] + shift) for p, m in PEERS.items()}
    out, tau, _ = scclip_update(own, shifted)
    # same differences as above, so the same step [0.7333, 1.2] from [1, 1]
    assert tau == pytest.approx(2.0)
    np.testing.assert_allclose(out["w"], [1.0 + 2.2 / 3, 2.2], rtol=1e-6)


def test_fixed_radius():
    out, tau, rec = scclip_update(model([0.0, 0.0]), PEERS, radius=1.5)
    # near [1, 0] kept; mid -> [0, 1.5]; far -> [30, 40] * 1.5 / 50 = [0.9, 1.2]; mean = [1.9, 2.7] / 3
    assert tau == 1.5
    np.testing.assert_allclose(out["w"], [1.9 / 3, 0.9], rtol=1e-6)
    assert rec["mid"].clipped and rec["far"].clipped and not rec["near"].clipped


def test_remove_then_clip_drops_the_farthest_first():
    out, tau, rec = scclip_update(model([0.0, 0.0]), PEERS, remove=1)
    # far removed; kept distances 1 and 2 -> tau = 1; mid -> [0, 1]; mean([1, 0], [0, 1]) = [0.5, 0.5]
    assert rec["far"].removed and rec["far"].scale == 0.0
    assert tau == pytest.approx(1.0)
    assert rec["mid"].clipped and not rec["near"].clipped
    np.testing.assert_allclose(out["w"], [0.5, 0.5])


def test_removing_everyone_keeps_own_model():
    out, _, rec = scclip_update(model([2.0, 2.0]), PEERS, remove=5)
    np.testing.assert_allclose(out["w"], [2.0, 2.0])
    assert all(r.removed for r in rec.values())


def test_single_neighbour_with_adaptive_radius_moves_nothing():
    # no second-largest distance: tau = 0, the lone neighbour is clipped to nothing
    out, tau, rec = scclip_update(model([0.0, 0.0]), {"only": model([3.0, 4.0])})
    assert tau == 0.0 and rec["only"].clipped and rec["only"].scale == 0.0
    np.testing.assert_allclose(out["w"], [0.0, 0.0])


def test_difference_is_clipped_as_one_vector_across_entries():
    own = {"w": np.zeros(1, np.float32), "b": np.zeros(1, np.float32)}
    peer = {"w": np.array([3.0], np.float32), "b": np.array([4.0], np.float32)}
    out, _, rec = scclip_update(own, {"p": peer}, radius=1.0)
    # ||(3, 4)|| = 5 -> scaled by 1/5: (0.6, 0.8); clipping each entry alone would give (1, 1)
    assert rec["p"].distance == pytest.approx(5.0)
    np.testing.assert_allclose([out["w"][0], out["b"][0]], [0.6, 0.8], rtol=1e-6)


def test_clip_and_radius_helpers():
    np.testing.assert_allclose(clip(np.array([3.0, 4.0]), 10.0), [3.0, 4.0])
    np.testing.assert_allclose(clip(np.array([3.0, 4.0]), 2.5), [1.5, 2.0])
    np.testing.assert_allclose(clip(np.zeros(2), 0.0), [0.0, 0.0])
    assert adaptive_radius([5.0, 1.0, 3.0]) == 3.0
    assert adaptive_radius([4.0]) == 0.0


def test_non_finite_models_are_rejected_not_zeroed():
    with pytest.raises(ValueError, match="'bad'.*not finite"):
        scclip_update(model([0.0, 0.0]), {"bad": model([np.nan, 0.0]), "ok": model([1.0, 1.0])})
    with pytest.raises(ValueError, match="own model.*not finite"):
        scclip_update(model([np.inf, 0.0]), {"ok": model([1.0, 1.0])})


@pytest.mark.parametrize("kwargs", [{"radius": -1.0}, {"radius": float("inf")}, {"remove": -1}, {"remove": 1.5}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="radius|remove"):
        scclip_update(model([0.0]), {}, **kwargs)
