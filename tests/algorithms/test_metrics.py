"""Metrics on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms import metrics


def test_accuracy_and_confidence():
    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])
    labels = np.array([0, 1, 1, 0])
    assert metrics.accuracy(probs, labels) == pytest.approx(0.5)
    np.testing.assert_allclose(metrics.confidence(probs), [0.9, 0.7, 0.6, 0.8])
    assert metrics.mean_confidence(probs) == pytest.approx(0.75)


def test_ece_two_bins_by_hand():
    # bins (0, 0.5] and (0.5, 1]: all four samples land in the upper bin
    # upper bin: mean conf (0.9+0.7+0.6+0.8)/4 = 0.75, accuracy 2/4 = 0.5 -> ECE = |0.5-0.75| = 0.25
    probs = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])
    labels = np.array([0, 1, 1, 0])
    assert metrics.expected_calibration_error(probs, labels, n_bins=2) == pytest.approx(0.25)


def test_ece_separate_bins_by_hand():
    # 10 bins. sample A conf 0.95 correct (bin 10), B conf 0.55 wrong (bin 6), C conf 0.55 correct (bin 6)
    # bin 10: |1 - 0.95| * 1/3 ; bin 6: |0.5 - 0.55| * 2/3 -> 0.05/3 + 0.1/3 = 0.05
    probs = np.array([[0.95, 0.05], [0.55, 0.45], [0.45, 0.55]])
    labels = np.array([0, 1, 1])
    assert metrics.expected_calibration_error(probs, labels, n_bins=10) == pytest.approx(0.05)


def test_ece_bin_edge_goes_to_lower_bin():
    # conf exactly 0.5 belongs to bin (0.4, 0.5], not (0.5, 0.6]; a perfectly calibrated pair there gives 0
    probs = np.array([[0.5, 0.5], [0.5, 0.5]])
    labels = np.array([0, 1])
    assert metrics.expected_calibration_error(probs, labels, n_bins=10) == pytest.approx(0.0)


def test_ece_rejects_bad_bins():
    with pytest.raises(ValueError, match="n_bins"):
        metrics.expected_calibration_error(np.ones((1, 2)) / 2, [0], n_bins=0)


def test_entropy_normalised():
    probs = np.array([[0.5, 0.5], [1.0, 0.0]])
    np.testing.assert_allclose(metrics.entropy(probs), [np.log(2), 0.0], atol=1e-9)
    np.testing.assert_allclose(metrics.entropy(probs, normalize=True), [1.0, 0.0], atol=1e-9)


def test_dice_by_hand():
    # one 2x2 image: ground truth foreground at 2 pixels, prediction at 3 pixels, overlap 2 -> 2*2/(3+2) = 0.8
    fg = np.array([[0.9, 0.8], [0.7, 0.1]])
    probs = np.stack([1 - fg, fg])[None]
    masks = np.array([[[1, 1], [0, 0]]])
    assert metrics.dice(probs, masks) == pytest.approx(0.8)


def test_dice_empty_prediction_and_mask_is_perfect():
    probs = np.zeros((1, 2, 2, 2))
    probs[:, 0] = 1.0
    assert metrics.dice(probs, np.zeros((1, 2, 2), dtype=int)) == pytest.approx(1.0)


def test_flatten_pixels():
    probs = np.random.default_rng(0).random((2, 3, 4, 5))
    flat, labels = metrics.flatten_pixels(probs, np.zeros((2, 4, 5)))
    assert flat.shape == (40, 3) and labels.shape == (40,)
    np.testing.assert_allclose(flat[0], probs[0, :, 0, 0])


def test_per_sample_losses_and_errors_by_hand():
    probs = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])
    labels = np.array([0, 1, 1])
    # -ln 0.5, -ln 0.1, -ln 0.8; the arg-max of the first sample is class 0 (the first of a tie)
    np.testing.assert_allclose(metrics.sample_losses(probs, labels), [0.6931472, 2.3025851, 0.2231436], rtol=1e-6)
    np.testing.assert_array_equal(metrics.sample_errors(probs, labels), [0.0, 1.0, 0.0])
    assert metrics.sample_losses(np.array([[1.0, 0.0]]), np.array([1]))[0] == pytest.approx(-np.log(1e-12))


def test_per_image_losses_and_dice_errors_of_a_segmentation():
    # two 1x2 images, two classes; image 0 predicts [1, 0] against [1, 1] (Dice 2/3), image 1 is perfect
    probs = np.zeros((2, 2, 1, 2))
    probs[0, :, 0, 0], probs[0, :, 0, 1] = [0.2, 0.8], [0.6, 0.4]
    probs[1, :, 0, 0], probs[1, :, 0, 1] = [0.9, 0.1], [0.9, 0.1]
    masks = np.array([[[1, 1]], [[0, 0]]])
    expected = [(-np.log(0.8) - np.log(0.4)) / 2, -np.log(0.9)]
    np.testing.assert_allclose(metrics.sample_losses(probs, masks), expected, rtol=1e-9)
    np.testing.assert_allclose(metrics.sample_errors(probs, masks), [1 - 2 / 3, 0.0])
    assert metrics.dice(probs, masks) == pytest.approx(1 - np.mean(metrics.sample_errors(probs, masks)))
