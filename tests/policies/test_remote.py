"""remote: request and reply mapping of the adapter spec (no server: see tests/test_serve.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from robogen.errors import SpaceMismatchError
from robogen.policies import POLICY_SCHEMES, LoadContext
from robogen.policies.adapter import parse_remote_uri
from robogen.policies.remote import RemotePolicy


def _policy(query: str, obs_mode: str = "state+pixels") -> RemotePolicy:
    obs = gym.spaces.Dict({"state": gym.spaces.Box(-1, 1, (3,), np.float32),
                           "pixels": gym.spaces.Box(0, 255, (48, 64, 3), np.uint8)})
    act = gym.spaces.Box(-1, 1, (7,), np.float32)
    ctx = LoadContext("x", obs, act, obs_mode)
    endpoints, spec = parse_remote_uri(f"ws://127.0.0.1:1?{query}")
    return RemotePolicy(endpoints, spec, ctx)


def test_registered():
    assert "remote" in POLICY_SCHEMES.names()


def test_request_keys_image_size_and_prompt():
    p = _policy("image_size=32x32&prompt=open%20the%20drawer&state_key=s&image_key=cam")
    img = np.full((48, 64, 3), 200, np.uint8)
    msg = p.observation_message({"state": np.ones(3, np.float64), "pixels": img})
    assert set(msg) == {"s", "cam", "prompt"} and msg["prompt"] == "open the drawer"
    assert msg["s"].dtype == np.float32
    cam = msg["cam"]
    assert cam.shape == (32, 32, 3) and cam.dtype == np.uint8
    # aspect kept (64x48 -> 32x24), zero padding above and below
    assert (cam[:4] == 0).all() and (cam[-4:] == 0).all() and (cam[4:28] == 200).all()
    assert set(_policy("state_key=").observation_message(
        {"state": np.ones(3), "pixels": img})) == {"observation/image"}


def test_reply_chunk_slice_and_mismatches():
    p = _policy("action_slice=0:7")
    c = p.chunk({"actions": np.ones((10, 8), np.float64)})
    assert c.shape == (10, 7) and c.dtype == np.float32
    assert p.chunk({"actions": np.ones(8)}).shape == (1, 7)  # one action: horizon 1
    with pytest.raises(SpaceMismatchError, match=r"with keys \['action'\]"):
        p.chunk({"action": np.ones((10, 8))})
    with pytest.raises(SpaceMismatchError, match="of dtype int64"):
        p.chunk({"actions": np.ones((10, 8), np.int64)})
    with pytest.raises(SpaceMismatchError, match=r"shape \(10, 6\) after action_slice"):
        p.chunk({"actions": np.ones((10, 6))})


@pytest.mark.parametrize(("query", "needle"), [
    ("image_key=a,a&cameras=top", "'a' would be sent twice"),
    ("image_key=observation/state", "'observation/state' would be sent twice"),
    ("image_key=img,prompt&cameras=top&prompt=go", "'prompt' would be sent twice"),
    ("image_key=a,b", "one camera per image key after the first (1 for image_key='a,b'"),
    ("image_key=a&cameras=top", "one camera per image key after the first (0 for"),
])
def test_request_keys_must_differ_and_cameras_match_the_image_keys(query, needle):
    from robogen.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError) as e:
        parse_remote_uri(f"ws://127.0.0.1:1?{query}")
    assert needle in str(e.value)


def test_several_image_keys_map_to_the_observation_then_the_cameras():
    p = _policy("image_key=main,wrist,top&cameras=c1,c2&state_key=s")
    assert p.spec.image_keys == ("main", "wrist", "top")
    img = np.full((48, 64, 3), 7, np.uint8)
    extra = [np.full((48, 64, 3), 8, np.uint8), np.full((48, 64, 3), 9, np.uint8)]
    msg = p.observation_message({"state": np.zeros(3, np.float32), "pixels": img}, extra)
    assert sorted(msg) == ["main", "s", "top", "wrist"]
    assert [int(msg[k][0, 0, 0]) for k in ("main", "wrist", "top")] == [7, 8, 9]
