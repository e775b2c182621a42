"""Training a small video DiT on real image content, on the CPU (docs/training.md).

- `algo.train.patch_pca`: the latent transform, a PCA of 8x8x3 pixel patches (encode / decode).
- `algo.train.clips`: clips with camera motion and independently moving patches, class prompts.
- `algo.train.trainer`: flow-matching training, held-out evaluation, samples, loss curve.

The shipped results live in ``algo/train/assets/`` (transform, checkpoint, training log).
"""
