"""fpgallm.predict / fpgallm.simulate: the planner and the simulator from Python give what
the command line gives for the same design (the bindings pass the design, model and
options through unchanged)."""
import json
import subprocess

import pytest

import fpgallm
from conftest import MODEL, fpgallm_binary

pytestmark = pytest.mark.skipif(not hasattr(fpgallm, "simulate"), reason="built without sim/perf")


def u280_design():
    d = fpgallm.default_design()
    d["device"] = "u280"
    return d


def test_simulate_matches_the_cli(tmp_path):
    design = u280_design()
    path = tmp_path / "design.json"
    path.write_text(json.dumps(design))
    got = fpgallm.simulate(MODEL, str(path), context=64)
    assert got == fpgallm.simulate(fpgallm.load(MODEL), design, context=64)
    cli = subprocess.run([fpgallm_binary(), "simulate", MODEL, "--design", str(path), "--context", "64", "--json"],
                         check=True, capture_output=True, text=True, timeout=120)
    ref = json.loads(cli.stdout)
    assert got["cycles"] == ref["cycles"]
    assert got["tokens_per_s"] == pytest.approx(ref["tokens_per_s"], rel=1e-12)
    assert got["cycles"] > 0 and got["assumptions"]


def test_predict_carries_its_assumptions():
    p = fpgallm.predict("llama2-7b", u280_design(), scheme="int8")
    assert p["decode_tokens_per_s"] == pytest.approx(1.0 / p["decode_step_s"])
    assert {a["name"] for a in p["assumptions"]} >= {"clock", "memory_efficiency"}
    assert all(a["source"] for a in p["assumptions"])


def test_bad_design_and_device():
    bad = u280_design()
    bad["matrix_unit"]["rows"] = 0
    with pytest.raises(ValueError, match="matrix_unit.rows"):
        fpgallm.simulate(MODEL, bad)
    with pytest.raises(ValueError, match="nosuchcard"):
        fpgallm.predict(MODEL, u280_design(), device="nosuchcard")
