"""A subscription group's retry policy (RocketMQ 5's GroupRetryPolicy) as JSON.

    retry_policy_from_json({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000}})
    # {"exponentialRetryPolicy": {"initial": 1000, "max": 7200000, "multiplier": 2},
    #  "type": "EXPONENTIAL"}
    next_delay_ms(policy, reconsume_times=0)  # 1000

The type is EXPONENTIAL or CUSTOMIZED (the default, with no policy object: RocketMQ's 1 s ... 2 h
table). Keys are written sorted, as fastjson writes them; a part the group does not set is
left out, as fastjson leaves out nulls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidewinder.protocol.errors import SidewinderError

DEFAULT_RETRY_POLICY: dict[str, Any] = {"type": "CUSTOMIZED"}
EXPONENTIAL_DEFAULTS = {"initial": 5_000, "max": 7_200_000, "multiplier": 2}
# 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
_NEXT_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
CUSTOMIZED_NEXT_MS = tuple(s * 1000 for s in _NEXT_S)
TYPES = ("EXPONENTIAL", "CUSTOMIZED")


def retry_policy_from_json(value: Any) -> dict[str, Any]:
    """The policy a SubscriptionGroupConfig's `groupRetryPolicy` gives, normalized; refuses
    (SYSTEM_ERROR naming the field) what RocketMQ could not decode."""
    if value is None:
        return dict(DEFAULT_RETRY_POLICY)
    if not isinstance(value, Mapping):
        raise SidewinderError(f"groupRetryPolicy is not an object: {value!r}")
    kind = value.get("type") or "CUSTOMIZED"
    if kind not in TYPES:
        raise SidewinderError(f"groupRetryPolicy.type {kind!r} is not one of {list(TYPES)}")
    policy: dict[str, Any] = {}
    exponential = value.get("exponentialRetryPolicy")
    if exponential is not None:
        if not isinstance(exponential, Mapping):
            raise SidewinderError("groupRetryPolicy.exponentialRetryPolicy is not an object")
        policy["exponentialRetryPolicy"] = {
            key: _long(exponential.get(key, default), f"exponentialRetryPolicy.{key}")
            for key, default in EXPONENTIAL_DEFAULTS.items()
        }
    customized = value.get("customizedRetryPolicy")
    if customized is not None:
        steps = customized.get("next") if isinstance(customized, Mapping) else None
        if not isinstance(steps, list):
            raise SidewinderError("groupRetryPolicy.customizedRetryPolicy.next is not a list")
        policy["customizedRetryPolicy"] = {
            "next": [_long(step, "customizedRetryPolicy.next") for step in steps]
        }
    policy["type"] = kind
    return policy


def next_delay_ms(policy: Mapping[str, Any], reconsume_times: int) -> int:
    """RetryPolicy.nextDelayDuration of the group's policy."""
    times = max(reconsume_times, 0)
    exponential = policy.get("exponentialRetryPolicy")
    if policy.get("type") == "EXPONENTIAL" and exponential:
        times = min(times, 32)
        return int(
            min(exponential["max"], exponential["initial"] * exponential["multiplier"] ** times)
        )
    customized = policy.get("customizedRetryPolicy")
    steps = customized["next"] if policy.get("type") == "CUSTOMIZED" and customized else None
    table = steps or CUSTOMIZED_NEXT_MS
    return int(table[min(times + 2, len(table) - 1)])


def _long(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SidewinderError(f"groupRetryPolicy.{name} is not a number: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise SidewinderError(f"groupRetryPolicy.{name} is not a number: {value!r}") from None
