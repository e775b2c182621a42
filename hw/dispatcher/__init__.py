"""The data dispatcher in hardware: the matcher (`matcher.Matcher`); the scheduler is the reference
tiling of `sim.dispatch` (position blocks frame after frame) and is driven by the stream source."""
