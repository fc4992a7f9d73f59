"""Property: a bundle `edct submit` makes from an honest calibration run is always accepted.

Over the calibration behaviours (faithful, prior, stale, mixed:p), chain length k, the exclusion
policy, a judge panel with self-consistency, and an editor whose spill makes edits fail the gate
(excluded and truncated samples), the re-derivation must find every record exactly as the
protocol wrote it, and the board's numbers (with the run's own resamples) must be the run's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edct_task.cli.main import main
from edct_task.config import calibration_config, config_from_dict
from edct_task.leaderboard.verify import BoardScoring, Verified, verify_bundle
from edct_task.run.runner import run

BEHAVIORS = st.one_of(
    st.sampled_from(["faithful", "prior", "stale"]),
    st.sampled_from([0.25, 0.5, 0.75]).map(lambda p: f"mixed:{p}"),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    behavior=BEHAVIORS,
    n=st.integers(2, 4),
    k=st.sampled_from([1, 2]),
    policy=st.sampled_from(["exclude_sample", "truncate_chain"]),
    panel=st.booleans(),
    spill=st.sampled_from([0.0, 0.6]),
)
def test_an_honest_calibration_bundle_is_always_accepted(behavior, n, k, policy, panel, spill):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        raw = calibration_config(
            behavior, n=n, output_dir=tmp / "run", degradation={"spill": spill} if spill else None
        ).model_dump(mode="json")
        raw["progress"] = False
        raw["bootstrap_resamples"] = 200
        raw["protocol"].update(k=k, exclusion_policy=policy)
        if panel:
            raw["roles"]["judge"] = [{"backend": "calibration-rules"}] * 3
            raw["protocol"].update(judge_samples=2, judge_temperature=0.5)
        outcome = run(config_from_dict(raw))
        bundle = tmp / "run.edct.zip"
        assert main(["submit", str(tmp / "run"), "--out", str(bundle)]) == 0
        result = verify_bundle(bundle, scoring=BoardScoring(n_resamples=200))
        assert isinstance(result, Verified), result.reason
        assert result.summary == outcome.log.results
