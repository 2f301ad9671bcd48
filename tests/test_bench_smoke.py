"""The benchmark harness runs (small inputs, one run): not a measurement, and no verdicts
are checked, since timings on a shared machine are `make bench`'s business."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}


def run_module(*args: str, timeout: float) -> str:
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode in (0, 1), f"exit {done.returncode} (2: a benchmark errored)\n{done.stderr[-3000:]}"
    return done.stdout


def table_rows(output: str) -> dict[str, str]:
    """figure name -> result column, from the printed table."""
    rows = [line.split("|")[1:-1] for line in output.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): cells[-1].strip() for cells in rows[1:]}


def test_bench_quick_subset_prints_one_table_with_verdicts():
    rows = table_rows(run_module("bench", "--quick", "--runs", "1", "--only", "streaming", "ttft", "media",
                                 timeout=180))
    assert "engine stream ÷ bare tokens/s" in rows and "TTFT added by the app, one image" in rows
    assert any(name.endswith("ours ÷ load_video(opencv)") for name in rows)
    assert set(rows.values()) <= {"PASS", "FAIL", "info"}, rows


def test_gpu_bench_smoke_on_the_cpu():
    rows = table_rows(run_module("bench.gpu_bench", "--device", "cpu", "--tiny", "--runs", "1", "--tokens", "8",
                                 "--with-drafter", timeout=240))
    assert {"engine ÷ bare tokens/s, text", "TTFT added by the engine, 1080p photo"} <= set(rows)
    assert {"engine ÷ bare tokens/s, text, MTP drafter", "TTFT added by the engine, text, MTP drafter"} <= set(rows)
    assert set(rows.values()) <= {"PASS", "FAIL", "info"}, rows


def test_hostile_load_and_relay_smoke():
    rows = table_rows(run_module("bench", "--quick", "--runs", "1", "--only", "hostile-load", "relay", timeout=420))
    assert {"honest p95 TTFT, hostile ÷ calm", "hostile requests answered otherwise than the limits say",
            "temp-disk growth, hostile", "relay CPU per token, 1 stream"} <= set(rows)
    assert rows["hostile requests answered otherwise than the limits say"] == "PASS", rows
    assert set(rows.values()) <= {"PASS", "FAIL", "info"}, rows
