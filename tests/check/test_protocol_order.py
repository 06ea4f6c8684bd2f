from __future__ import annotations

import dataclasses

from robogen.check.inputs import protocol_differences
from robogen.rollout.plan import build_conditions
from robogen.types import EvalManifest, RenderSettings


def _m(axes, severities) -> EvalManifest:
    return EvalManifest(
        schema_version=1, env_id="robogen/Reach-v0", policy="p", vecnormalize=None,
        obs_mode="state", axes=tuple(axes), severities=tuple(severities), splits=(),
        combined=True, n_episodes=10, seed=0, max_steps=100, batch_size=8,
        success_threshold=None, conditions=build_conditions(axes, severities),
        render=RenderSettings(),
    )


def test_axis_order_does_not_make_protocols_differ():
    a = _m(["embodiment", "physics"], [0.5, 1.0])
    b = _m(["physics", "embodiment"], [0.5, 1.0])
    assert protocol_differences(a, b) == []
    c = dataclasses.replace(b, max_steps=50)
    assert [d.split(":")[0] for d in protocol_differences(a, c)] == ["max_steps"]
