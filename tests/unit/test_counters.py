import math

import pytest

from specharness.engines.counters import (
    ACCEPTED,
    DRAFT_TOKENS,
    DRAFTS,
    GENERATION,
    acceptance_figures,
    parse_prometheus,
    reconcile_tokens,
)

SAMPLE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 31.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.79e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 124.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 110.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 29.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 28.0
vllm:generation_tokens_total{engine="0",model_name="m"} 148.0
vllm:generation_tokens_total{engine="1",model_name="m"} 2.0
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_parse_sums_label_sets_and_keeps_positions() -> None:
    snap = parse_prometheus(SAMPLE)
    assert snap.totals[DRAFTS] == 31 and snap.totals[DRAFT_TOKENS] == 124 and snap.totals[ACCEPTED] == 110
    assert snap.totals[GENERATION] == 150  # two engines summed
    assert snap.accepted_per_position == {0: 29.0, 1: 28.0}
    assert "vllm:spec_decode_num_drafts_created" not in snap.totals


def test_delta_and_figures() -> None:
    before = parse_prometheus(SAMPLE)
    after = parse_prometheus(
        SAMPLE.replace(" 31.0", " 41.0")
        .replace(" 124.0", " 164.0")
        .replace(" 110.0", " 140.0")
        .replace('position="1"} 28.0', 'position="1"} 30.0')
    )
    delta = after.minus(before)
    assert delta.totals[DRAFTS] == 10 and delta.accepted_per_position == [0.0, 2.0]
    figs = acceptance_figures(delta.totals)
    assert figs["acceptance_rate"] == 30 / 40 and figs["mean_acceptance_length"] == 1 + 30 / 10


def test_baseline_has_no_spec_counters() -> None:
    figs = acceptance_figures(parse_prometheus('vllm:generation_tokens_total{engine="0"} 5\n').totals)
    assert figs["drafts"] == 0 and math.isnan(figs["acceptance_rate"]) and math.isnan(figs["mean_acceptance_length"])


def test_reconcile_reports_the_difference() -> None:
    assert reconcile_tokens(150, 150) == ""
    assert "difference +3" in reconcile_tokens(153, 150)


# Fake /metrics text (a parsing test, no engine): the engine's own latency histograms, summed over label sets.
HISTOGRAMS_BEFORE = """\
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 10
vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.02
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="m"} 10
"""
HISTOGRAMS_AFTER = """\
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 20
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 20
vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.05
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="m"} 20
"""


def test_server_latency_means_come_from_histogram_deltas() -> None:
    from specharness.engines.counters import server_latency_means

    delta = parse_prometheus(HISTOGRAMS_AFTER).minus(parse_prometheus(HISTOGRAMS_BEFORE))
    means = server_latency_means(delta.totals)
    assert means["server_mean_ttft_ms"] == pytest.approx(50.0)  # 0.5 s over 10 requests
    assert means["server_mean_tpot_ms"] == pytest.approx(3.0)  # 0.03 s over 10 requests
    assert math.isnan(means["server_mean_itl_ms"])  # not exported here


def test_server_latency_means_read_the_older_tpot_name() -> None:
    from specharness.engines.counters import server_latency_means

    old = parse_prometheus("vllm:time_per_output_token_seconds_sum 0.4\nvllm:time_per_output_token_seconds_count 100\n")
    assert server_latency_means(old.totals)["server_mean_tpot_ms"] == pytest.approx(4.0)
