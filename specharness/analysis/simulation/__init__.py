"""Error rates of the speed interval and verdict, by Monte Carlo on a stated data-generating model.

Each simulated run is judged by the project's own interval and verdict functions, called as they are, and by the
methods they replaced. Model and methods: docs/method.md#the-error-rate-simulation. Submodules:
- ``model``: what both studies share (heavy-tail and drift constants, confidence, the mirrored arm order).
- ``blocks``: the block design's coverage, false verdicts and power (:func:`run_study` / :func:`format_study`).
- ``traffic_scenarios``: the traffic study's worlds (:class:`TrafficScenario`, :func:`traffic_scenarios`).
- ``traffic_records``: one simulated traffic run as request records.
- ``traffic``: the verdict on real traffic (:func:`run_traffic_study` / :func:`format_traffic_study`).
- ``tokens``: the greedy estimators on a token-level simulation of divergent outputs (:func:`run_token_study`).
"""

from specharness.analysis.simulation.blocks import (
    METHODS,
    Scenario,
    ScenarioResult,
    default_scenarios,
    false_verdicts_by_offset,
    format_study,
    run_study,
    simulate,
)
from specharness.analysis.simulation.model import mirrored_a_first
from specharness.analysis.simulation.traffic import (
    TRAFFIC_METHODS,
    TrafficResult,
    format_traffic_study,
    run_traffic_study,
    simulate_traffic,
)
from specharness.analysis.simulation.traffic_scenarios import TrafficScenario, traffic_scenarios

__all__ = [
    "METHODS",
    "TRAFFIC_METHODS",
    "Scenario",
    "ScenarioResult",
    "TrafficResult",
    "TrafficScenario",
    "default_scenarios",
    "false_verdicts_by_offset",
    "format_study",
    "format_traffic_study",
    "mirrored_a_first",
    "run_study",
    "run_traffic_study",
    "simulate",
    "simulate_traffic",
    "traffic_scenarios",
]
