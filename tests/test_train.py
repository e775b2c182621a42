"""The trained small Wan DiT: latent transform, clips, training determinism, shipped checkpoint, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from algo.models import CaptureError, build_model
from algo.train import clips, patch_pca, trainer
from tests.test_cli import assert_one_line_error, kaleido

CKPT = trainer.CHECKPOINT


# -- latent transform ------------------------------------------------------------------------------

def test_shipped_transform_is_orthonormal_and_refits_byte_identically(tmp_path):
    pca = patch_pca.load()
    c = pca.components
    np.testing.assert_allclose(c @ c.T, np.eye(16), atol=1e-5)
    # Refit from the images: the same bytes as the shipped file (the fit is deterministic).
    fresh = patch_pca.fit()
    patch_pca.save(fresh, tmp_path / "t.safetensors")
    assert (tmp_path / "t.safetensors").read_bytes() == patch_pca.TRANSFORM_FILE.read_bytes()
    # PCA identity, computed independently of the fit code: the mean squared round-trip error over the
    # fit patches equals the discarded eigenvalues' sum / 192.
    rows = np.concatenate([patch_pca._patches(clips.load_image(n, h)) for n in clips.IMAGES
                           for h in patch_pca.FIT_HEIGHTS])
    z = (rows - fresh.mean) @ fresh.components.T
    back = fresh.mean + z @ fresh.components
    mse = float(np.mean((rows - back) ** 2))
    assert mse == pytest.approx(float(fresh.eigenvalues[16:].sum()) / 192, rel=1e-6)
    # latent variance over the fit set is 1 per element on average (the global scale)
    assert float(np.mean((z / fresh.scale) ** 2)) == pytest.approx(1.0, rel=1e-6)


def test_encode_decode_is_the_projection():
    pca = patch_pca.load()
    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, 16, 2, 3, 4)).astype(np.float32)
    frames = pca.decode(z)  # a video inside the patch subspace
    assert frames.shape == (2, 24, 32, 3)
    np.testing.assert_allclose(pca.encode(frames), z, atol=1e-4)
    # one cell by hand: cell (t=1, row 2, col 3) = mean + scale * C^T z, laid out (row, col, rgb)
    cell = frames[1, 16:24, 24:32].reshape(-1)
    np.testing.assert_allclose(cell, pca.mean + pca.scale * pca.components.T @ z[0, :, 1, 2, 3], atol=1e-5)
    with pytest.raises(patch_pca.TransformError, match="multiple|\\[T, 8H"):
        pca.encode(np.zeros((1, 12, 16, 3)))


def test_wrong_shape_transform_is_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    t = load_file(str(patch_pca.TRANSFORM_FILE))
    t["components"] = t["components"][:15]
    bad = tmp_path / "bad.safetensors"
    save_file(t, str(bad))
    with pytest.raises(patch_pca.TransformError, match=r"components has shape \[15, 192\]"):
        patch_pca.load(bad)
    out = tmp_path / "e.json"
    res = kaleido("train", "--eval", str(CKPT), "--json", str(out), "--transform", str(bad))
    assert_one_line_error(res, "components has shape")
    assert not out.exists()


# -- clips and objective ---------------------------------------------------------------------------

def test_clips_are_seeded_and_held_out_clips_use_their_own_stream():
    a, la = clips.clip_latents([0, clips.TRAIN_STREAM, 3, 1], (4, 16, 16))
    b, lb = clips.clip_latents([0, clips.TRAIN_STREAM, 3, 1], (4, 16, 16))
    assert a.shape == (1, 16, 4, 16, 16) and a.dtype == np.float32 and la == lb
    np.testing.assert_array_equal(a, b)
    x, labels = clips.training_batch(0, 0, 3, (3, 16, 24))
    assert x.shape == (3, 16, 3, 16, 24) and labels.dtype == np.int64
    held = clips.heldout_clips(4)
    assert [h[2] for h in held] == list(clips.GRIDS) and [h[1] for h in held] == [0, 1, 2, 3]
    assert clips.HELDOUT_STREAM != clips.TRAIN_STREAM
    e = clips.class_text(2, 32)
    assert e.shape == (1, 8, 32)
    np.testing.assert_array_equal(e, np.random.default_rng([clips.PROMPT_SEED, 2]).standard_normal((1, 8, 32))
                                  .astype(np.float32))


def test_camera_motion_moves_content():
    """A pure pan (no objects) shifts frame k by k * pan pixels: frame 1 shifted back equals frame 0."""
    img = clips.load_image("astronaut")
    f0 = clips._camera_frame(img, (32, 48), np.array([128.0, 120.0]), 0.0, 1.0)
    f1 = clips._camera_frame(img, (32, 48), np.array([128.0, 124.0]), 0.0, 1.0)  # 4 px right
    np.testing.assert_allclose(f1[:, :-4], f0[:, 4:], atol=1e-12)


def test_objective_and_schedule_by_hand():
    assert trainer.shifted_sigma(np.array([0.0, 0.5, 1.0]), 3.0).tolist() == [0.0, 0.75, 1.0]
    x0, eps = np.full((1, 1, 1, 1, 1), 2.0, np.float32), np.full((1, 1, 1, 1, 1), -1.0, np.float32)
    xt, v = trainer.flow_batch(x0, np.array([0.25]), eps)
    assert float(xt.item()) == 0.75 * 2 - 0.25 and float(v.item()) == -3.0
    assert trainer.lr_at(0, 1000, 1.0, 100) == pytest.approx(0.01)
    assert trainer.lr_at(99, 1000, 1.0, 100) == pytest.approx(1.0)
    assert trainer.lr_at(999, 1000, 1.0, 100) == pytest.approx(0.1)


def test_training_is_deterministic(tmp_path):
    a = trainer.train(tmp_path / "a", steps=2, batch=1)
    b = trainer.train(tmp_path / "b", steps=2, batch=1)
    for name in ("diffusion_pytorch_model.safetensors", "train_log.json", "loss_curve.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert a["loss"] == b["loss"] and len(a["loss"]) == 2
    net, desc = build_model("wan2.1-t2v-1.3b", "small", weights=tmp_path / "a" / "diffusion_pytorch_model.safetensors")
    assert desc.startswith("checkpoint (safetensors file)")


# -- the shipped checkpoint ------------------------------------------------------------------------

def test_shipped_checkpoint_is_small_and_trained():
    assert CKPT.stat().st_size < 25 * 2 ** 20
    log = json.loads((CKPT.parent / "train_log.json").read_text())
    assert log["threads"] == 1 and log["steps"] == len(log["loss"])
    res = trainer.evaluate(CKPT, sigmas=(0.3, 0.5, 0.7), n_clips=8)
    # The training target is >= 3x at sigma 0.3-0.7 (docs/training.md: measured on 48 clips); 2x here on 8 clips.
    for s, t, r in zip(res["sigma"], res["loss_trained"], res["loss_seeded"], strict=True):
        assert r / t >= 2.0, (s, t, r)


def test_checkpoint_errors_exit_2(tmp_path):
    from safetensors.torch import load_file, save_file

    out = tmp_path / "e.json"
    trunc = tmp_path / "trunc.safetensors"
    trunc.write_bytes(CKPT.read_bytes()[: CKPT.stat().st_size // 2])
    assert_one_line_error(kaleido("train", "--eval", str(trunc), "--json", str(out)), "not a readable safetensors")
    t = load_file(str(CKPT))
    cfg = dict(json.loads(__import__("safetensors").safe_open(str(CKPT), "pt").metadata()["config"]), num_layers=3)
    wrong = tmp_path / "wrong.safetensors"
    save_file(t, str(wrong), metadata={"config": json.dumps(cfg)})
    assert_one_line_error(kaleido("train", "--eval", str(wrong), "--json", str(out)), "num_layers 3 != 4")
    with pytest.raises(CaptureError, match="does not match"):
        build_model("wan2.1-t2v-1.3b", "small", weights=wrong)
    assert_one_line_error(kaleido("train", "--eval", str(tmp_path / "nope.safetensors")), "not found")
    assert not out.exists()


def test_capture_and_quality_of_the_trained_model(tmp_path):
    from algo.capture import capture
    from algo.quality import run_quality

    tr = capture(size="small", weights=CKPT, steps=(49,), blocks=[0], ops="qkv,qk")
    assert "patch PCA" in tr.notes and "class prompt 0 (astronaut)" in tr.notes
    assert tr.weights.startswith("checkpoint (safetensors file)") and [o.name for o in tr.ops] == ["qkv", "qk"]
    r = run_quality(size="small", weights=CKPT, steps=1, ops="ffn2", theta=(8, 24), float_reference=False)
    fr = r["frames"]
    assert fr["shape"] == [4, 128, 128, 3] and "patch PCA" in fr["decoder"]
    assert math.isinf(fr["psnr_db"]) or fr["psnr_db"] > 10
    torch.set_num_threads(torch.get_num_threads())  # the helpers restore the thread count
