"""What an op costs beyond its cycles: `actions` (counts of every hardware action), `energy`
(actions × a per-technology table), `area` (area breakdown, Yosys PE cross-check) and `tech`
(the energy/area tables, one TOML file per technology node with a source per row)."""
