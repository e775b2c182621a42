"""The reuse algorithm: the bit-exact golden model (`golden`), its compiled equivalents (`kernels`),
thresholds (`thresholds`), decision statistics (`stats`), the baselines' rules (`policies`) and the
reuse applied inside a PyTorch forward pass (`torch_hooks`). Import the modules themselves."""
