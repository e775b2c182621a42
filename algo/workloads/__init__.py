"""Workload generators: schedulers that change what each denoising step computes, written as
workload files (`algo.workloads.format`) that `sim.workload` times on one or P devices (one
module per generator).

- `algo.workloads.ddit`: DDiT dynamic patch scheduling (patch size per step from the third-order
  finite difference of the latent trajectory).
- `algo.workloads.synth`: synthetic decision traces (`kaleido synth`) for every op of chosen blocks
  and steps, drawn from a stated field of reuse decisions.
"""
