"""Array organisations as a config parameter (issue 15): the field, the `--organisation` override,
its one-line errors, and the results JSON naming the organisation."""

from __future__ import annotations

import json

import pytest

from hw.config import ORGANISATIONS, ConfigError, load_config, with_organisation
from tests.test_cli import assert_one_line_error, kaleido, small_trace


def test_presets_default_to_lockstep():
    for name in ("tiny-8x8", "kaleido-16nm-128x128"):
        assert load_config(name).organisation == "lockstep"


def test_unknown_organisation_names_the_known_ones():
    with pytest.raises(ConfigError) as err:
        with_organisation(load_config("tiny-8x8"), "systolic-magic")
    msg = str(err.value)
    assert "systolic-magic" in msg and all(o in msg for o in ORGANISATIONS)


def test_cli_unknown_organisation_exits_2_and_writes_nothing(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--organisation", "nope", "--json", str(out))
    assert_one_line_error(res, "'nope'", *ORGANISATIONS)
    assert not out.exists()


def test_results_name_the_organisation(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--organisation", "lockstep", "--json", str(out))
    assert res.returncode == 0, res.stderr
    r = json.loads(out.read_text())
    assert r["organisation"] == "lockstep" and r["config"]["organisation"] == "lockstep"
