"""The data dispatcher in hardware: the scheduler (`scheduler.Scheduler`, position clustering by
reuse pattern) and the matcher (`matcher.Matcher`, channel pairing), each making the same choices as
`sim.timing.dispatch`; `hw.core.TileCore` puts the matcher in front of the array (docs/decisions.md D20, D21)."""
