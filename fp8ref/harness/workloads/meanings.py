"""What this family's profile keys mean, and what a change of one does to a training run: each
shipped workload's trace (``profile_keys.py``), and a team's own workload's in its golden
(``targets.py``: ``workload.<target>``, the target's ``:`` telling it from a shipped one). The
rows' form and the severities: ``fp8ref.harness.profiles.key_meanings``. No torch here."""

from __future__ import annotations

from ..profiles.key_meanings import KeyMeaning

__all__ = ["OWNS", "MEANINGS"]

OWNS = ("workload",)

_WHAT = (
    "the trace of the shipped workload {1} (fp8ref/harness/workloads): how many FP8 calls it recorded, "
    "how many broke the definition, and a digest of the ordered ops, their tensors' dtypes, shapes and strides "
    "and every recorded call's output bytes"
)
_DOES = (
    "the FP8 program a training step runs computed other float8 codes, ran other ops or broke the definition: "
    "the report's first divergence names the op whose output changed on unchanged inputs, and its line"
)
_TEAMS = (
    "the trace of the team's own workload {1}:{2} (pytest --fp8-workload, its dots written '_'): how many "
    "FP8 calls it recorded, how many broke the definition, and a digest of the ordered ops, their "
    "tensors' dtypes, shapes and strides and every recorded call's output bytes"
)
_TEAMS_DOES = (
    "the team's FP8 program computed other float8 codes, ran other ops or broke the definition: the report's "
    "first divergence names the op whose output changed, and its line in the team's code"
)

_M = KeyMeaning
MEANINGS: tuple[KeyMeaning, ...] = (
    _M("workload.*:*", "workloads", _TEAMS, _TEAMS_DOES, "numerics"),
    _M("workload.torchao.**", "workloads", _WHAT, _DOES, "numerics"),
    _M("workload.**", "workloads", _WHAT, _DOES, "numerics"),
)
