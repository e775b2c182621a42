"""Block streaming (`--stream-blocks`, D27) for every family, seeded and from checkpoints.

What is checked, with values obtained independently of the streaming code:

- seeded: a streamed capture equals the ordinary (unstreamed) capture of the same seed op for op,
  bit for bit (the ordinary build is the reference: `algo.models.build_model`), every block is
  materialised exactly once per forward pass and freed after it, at most one block is live;
- checkpoints: the test saves a tiny model seeded with 5 itself, as a sharded diffusers folder
  (several shards + index), a single-file folder and one ``.safetensors`` file; the plain
  ``--weights`` capture of each holds the seed-5 model's weights (a seeded seed-5 capture is the
  reference) and the streamed ``--weights`` capture equals the plain one bit for bit;
- memory: after the streamed build only the non-block tensors were read and every block holds
  meta tensors; while a block runs, it is the only one holding real tensors.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import algo.capture.run as cap
from algo.capture import CaptureError, capture
from algo.models import SAFETENSORS_INDEX, blocks_of, build_model, build_streamed

FAMILIES = ("wan2.1-t2v-14b", "hunyuanvideo", "cogvideox-5b")
KW = dict(size="tiny", steps=(49,), seed=0)


def assert_same_ops(a, b):
    assert len(a.ops) == len(b.ops) > 0
    for x, y in zip(a.ops, b.ops, strict=True):
        assert (x.name, x.block, x.step) == (y.name, y.block, y.step)
        np.testing.assert_array_equal(x.X, y.X)
        np.testing.assert_array_equal(x.W, y.W)
        assert (x.x_scale, x.w_scale) == (y.x_scale, y.w_scale)
        if x.attn_out is not None or y.attn_out is not None:
            np.testing.assert_array_equal(x.attn_out, y.attn_out)
            np.testing.assert_array_equal(x.lse, y.lse)


@pytest.fixture
def spy(monkeypatch):
    """Keeps the `StreamedBlocks` of the last streamed build (and the model)."""
    seen = {}
    real = cap.build_streamed

    def wrapped(*a, **k):
        net, desc, streamer = real(*a, **k)
        seen.update(net=net, streamer=streamer)
        return net, desc, streamer

    monkeypatch.setattr(cap, "build_streamed", wrapped)
    return seen


@pytest.mark.parametrize("model, dtype", [("wan2.1-t2v-14b", "bf16"), ("hunyuanvideo", "fp32"), ("cogvideox-5b", "fp32")])
def test_streamed_seeded_equals_unstreamed(spy, model, dtype):
    plain = capture(model=model, dtype=dtype, **KW)
    streamed = capture(model=model, dtype=dtype, stream_blocks=True, **KW)
    assert_same_ops(streamed, plain)
    st = spy["streamer"]
    n = len(blocks_of(spy["net"]))
    assert n == 2 and st.built == [1] * n and st.freed == [1] * n and st.max_live == 1
    assert all(p.is_meta for _, blk in blocks_of(spy["net"]) for p in blk.parameters())
    assert "streamed" in streamed.weights and plain.weights.split("; no checkpoint")[0] in streamed.weights


def test_streamed_trace_file_is_deterministic_two_steps(tmp_path, spy):
    kw = dict(KW, steps=(40, 49))
    for name in ("a.npz", "b.npz"):
        cap.capture_to_file(tmp_path / name, model="cogvideox-5b", stream_blocks=True, ops="qkv,pv", **kw)
        assert spy["streamer"].built == [2, 2] and spy["streamer"].freed == [2, 2]  # once per step
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


# -- checkpoints ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    """Per family: a tiny model seeded with 5 saved sharded, as one-file folder and as one file."""
    from safetensors.torch import save_file

    out = {}
    for model in FAMILIES:
        d = tmp_path_factory.mktemp(model.replace(".", "_"))
        net, _ = build_model(model, "tiny", seed=5)
        net.save_pretrained(d / "sharded", max_shard_size="60KB")
        net.save_pretrained(d / "single")
        save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(d / "w.safetensors"))
        out[model] = d
    return out


@pytest.mark.parametrize("model", FAMILIES)
def test_streamed_checkpoint_equals_plain_checkpoint(ckpts, spy, model):
    d = ckpts[model]
    shards = set(json.loads((d / "sharded" / SAFETENSORS_INDEX).read_text())["weight_map"].values())
    assert len(shards) >= 3  # the streamed reader really has to pick tensors out of several files
    kw = dict(model=model, ops="qkv,qk,pv,ffn2", **KW)
    net, _ = build_model(model, "tiny", seed=5)
    plain = capture(weights=d / "sharded", **kw)  # plain --weights: diffusers from_pretrained
    for op in plain.ops:  # the qkv weights are the seed-5 checkpoint's, quantised by hand here
        if op.name == "qkv":
            kind, blk = blocks_of(net)[op.block]
            a = blk.attn1 if kind in ("wan", "cogvideox") else blk.attn
            w = torch.cat([a.to_q.weight, a.to_k.weight, a.to_v.weight]).T.double().numpy()
            scale = np.abs(w).max() / 127
            assert op.w_scale == pytest.approx(scale, rel=1e-12)
            np.testing.assert_array_equal(op.W[0], np.clip(np.rint(w / scale), -128, 127))
    assert_same_ops(capture(weights=d / "w.safetensors", **kw), plain)  # plain, one safetensors file
    for src in ("sharded", "single", "w.safetensors"):
        streamed = capture(weights=d / src, stream_blocks=True, **kw)
        assert_same_ops(streamed, plain)
        st = spy["streamer"]
        assert st.max_live == 1 and st.built == [1, 1] and st.freed == [1, 1]
        assert "streamed" in streamed.weights and streamed.weights.startswith(
            f"checkpoint ({'safetensors file' if src.endswith('.safetensors') else 'diffusers folder'}): "
            f"{(d / src).resolve()}")


def test_streamed_checkpoint_reads_blocks_lazily(ckpts):
    """Peak memory holds the non-block tensors and one block, never the whole checkpoint."""
    path = ckpts["hunyuanvideo"] / "sharded"
    net, _, st = build_streamed("hunyuanvideo", "tiny", weights=path)
    full, _ = build_model("hunyuanvideo", "tiny", seed=5)
    sd = full.state_dict()
    block_keys = [k for k in sd if k.startswith(("transformer_blocks.", "single_transformer_blocks."))]
    assert st.checkpoint.reads == len(sd) - len(block_keys)  # only the non-block tensors so far
    assert all(p.is_meta for _, blk in blocks_of(net) for p in blk.parameters())
    assert all(not v.is_meta for k, v in net.state_dict().items() if k not in block_keys)
    for k, v in net.state_dict().items():
        if k not in block_keys:
            assert torch.equal(v, sd[k]), k
    # run the dual-stream block alone: only its tensors are read, the single-stream block stays meta
    dual, single = (blk for _, blk in blocks_of(net))
    (build_hook,) = dual._forward_pre_hooks.values()  # the streamer's pre-hook, called as forward would
    build_hook(dual, ())
    n_dual = sum(k.startswith("transformer_blocks.0.") for k in sd)
    assert st.checkpoint.reads == len(sd) - len(block_keys) + n_dual
    for k, v in dual.state_dict().items():
        assert torch.equal(v, sd["transformer_blocks.0." + k]), k
    assert all(p.is_meta for p in single.parameters())
    st.release()
    assert all(p.is_meta for _, blk in blocks_of(net) for p in blk.parameters())


def test_streamed_checkpoint_errors(ckpts, tmp_path):
    net, _ = build_model("cogvideox-5b", "tiny", seed=5)
    net.save_pretrained(tmp_path / "bin", safe_serialization=False)
    with pytest.raises(CaptureError, match="needs safetensors weights"):
        capture(model="cogvideox-5b", weights=tmp_path / "bin", stream_blocks=True, **KW)
    with pytest.raises(CaptureError, match=r"no diffusion_pytorch_model.safetensors .*\.bin pickles"):
        capture(model="cogvideox-5b", weights=tmp_path / "bin", **KW)  # plain loading refuses pickles too
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in (ckpts["cogvideox-5b"] / "sharded").iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    first = sorted(broken.glob("*-00001-of-*.safetensors"))[0]
    first.unlink()
    with pytest.raises(CaptureError, match=r"not a readable safetensors file .*00001"):
        capture(model="cogvideox-5b", weights=broken, stream_blocks=True, **KW)
    with pytest.raises(CaptureError, match="does not match hunyuanvideo"):  # a CogVideoX file for Hunyuan
        capture(model="hunyuanvideo", weights=ckpts["cogvideox-5b"] / "w.safetensors", stream_blocks=True, **KW)


def test_cli_stream_blocks_with_weights(ckpts, tmp_path):
    from typer.testing import CliRunner

    from algo.trace import load_trace
    from sim.cli import app

    out = tmp_path / "t.npz"
    r = CliRunner().invoke(app, ["capture", "--model", "wan2.1-t2v-14b", "--steps", "49", "--blocks", "1",
                                 "--ops", "qkv", "--stream-blocks", "--weights", str(ckpts["wan2.1-t2v-14b"] / "sharded"),
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    tr = load_trace(out)
    assert tr.weights.startswith("checkpoint (diffusers folder)") and [o.block for o in tr.ops] == [1]
    r = CliRunner().invoke(app, ["capture", "--model", "wan2.1-t2v-14b", "--stream-blocks", "--weights",
                                 str(tmp_path / "missing"), "-o", str(tmp_path / "u.npz")])
    assert r.exit_code == 2 and "not found" in r.output and not (tmp_path / "u.npz").exists()
