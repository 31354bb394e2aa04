#!/usr/bin/env bash
# Runs ON the lent GPU machine (see ../shared/gpu/README.md), from the checkout's copy, after the bundle parts were
# carried to /tmp/stage. Writes what comes back under $OUT.
#   scripts/gpu_campaign.sh asv               unpack, then the standard paired experiment through ASV (existing env),
#                                             recorded at the release ledger's commit for the unpacked vLLM release
#   scripts/gpu_campaign.sh starts-fork       baseline and ngram started twice each, as the harness starts them now
#   scripts/gpu_campaign.sh starts-warm       baseline and ngram started three times each as the harness starts them
#                                             (STARTS_ARMS, STARTS_REPEAT), then one ngram start (STACKS_ARM) with
#                                             vLLM's DEBUG log and a stack sample of each process every 0.5 s
#                                             (STACKS_ARM=none: no such start)
#   scripts/gpu_campaign.sh starts-preload    baseline spawned twice, then baseline and ngram twice each forked from a
#                                             preloaded interpreter (SPECHARNESS_PRELOADED_SERVER=0, then 1)
#   scripts/gpu_campaign.sh pool              baseline started twice (STARTS_ARMS to change), then two ASV classes that
#                                             share engines through the engine pool (PairedNgram, SampledDistribution;
#                                             quick profile)
#   scripts/gpu_campaign.sh reuse             the default run twice, back to back, no flags: the second takes the first's
#                                             pooled engines (SPECHARNESS_ENGINE_POOL)
#   scripts/gpu_campaign.sh queue             two runs at once on one pool that the GPU cannot hold both of: the second
#                                             queues for room until the first lets go of its engines
#   scripts/gpu_campaign.sh crosscheck        specharness vs vllm bench serve on one baseline server
#   scripts/gpu_campaign.sh pair              ReleasePair through ASV: the unpacked release against the earlier one whose
#                                             site folder scripts/gpu_release_delta.sh staged (/tmp/releases), one
#                                             run of both side by side (MACHINE names the series, default h100;
#                                             SPECHARNESS_ASV_PAIR_ARMS=baseline runs the baseline pair alone;
#                                             PAIR_BLOCKS blocks on PAIR_INSTANCES engine instances, default 12 on 6
#                                             (before engine instances: 20 blocks; the release profile's 6 were too few
#                                             for a GPU's noise, docs/gpu.md))
#   scripts/gpu_campaign.sh controls          the release review's controls: the release against itself and against
#                                             itself slowed by 1.05 and 1.10 (scripts/arms/release-controls.toml;
#                                             CONTROLS_ARGS adds options, e.g. --blocks 20; CONTROLS_RUNS
#                                             runs, default 1)
#   scripts/gpu_campaign.sh power             the power study (issue 49): the release profile with engines renewed
#                                             per instance, an architecture shape with random weights
#                                             (POWER_MODEL, default shape:llama-8b) and the controls of
#                                             scripts/arms/power-controls-gpu.toml (A/A and a 1.03 slowdown); POWER_ARGS
#                                             (default --instances 6 --blocks 12), POWER_LIMIT_S bounds
#                                             the run (a later call finishes it: RESUME=1)
#   scripts/gpu_campaign.sh aa                A/A runs for a GPU's record (specharness aa-record): AA_FROM..AA_TO
#                                             (default 1..5) runs of baseline vs baseline-b, copy, transform, free,
#                                             abstain x 1, 8 clients x 4 blocks x 8 requests, 48 tokens (AA_ARGS adds
#                                             options); each run's folder is packed under $OUT as it ends
#   scripts/gpu_campaign.sh sweep             NgramConfigSweep through ASV
#   scripts/gpu_campaign.sh load              LoadSweep through ASV
#   scripts/gpu_campaign.sh sync              baseline vs ngram vs baseline-sync (async scheduling off), transform
#   scripts/gpu_campaign.sh control           the controls: baseline vs baseline-b (A/A) and vs baseline-slow (known
#                                             1.25x slowdown), 4 workloads x 1, 8 clients, 4 blocks
#   scripts/gpu_campaign.sh standard          the standard profile (copy, transform x 1, 8 clients), no ASV
#   scripts/gpu_campaign.sh structured        the structured workload (JSON schema, forced tool calls), 1 client
#   scripts/gpu_campaign.sh starts            engine starts phase by phase: baseline twice without bytecode for the
#                                             bundle, then baseline and ngram twice each with it; then one baseline
#                                             start with vLLM's DEBUG log and a stack sample of each process every
#                                             0.5 s (scripts/diag/sitecustomize.py), to attribute the silent seconds
# No mode passes start flags: the launcher sees the arms share the GPU and sets each arm's memory share and the start
# order itself (START=--start-one-by-one, or CONTROL_EXTRA / RUN_ARGS, add flags where wanted).
set -uo pipefail
MODE="$1"
ROOT="$PWD"
[ -d /tmp/site/vllm ] || bash .stage/device-unpack.sh || exit 3
VLLM_TAG="$(PYTHONPATH=/tmp/site python3 -c 'import importlib.metadata as m; print(m.version("vllm"))')"
# One fixed interpreter path for every release: ASV names an existing environment after it, and the series of a
# metric must be one environment across releases (the release is the ledger commit, not the environment). A
# wrapper, not a symlink: the image's python3 may live in a venv whose site-packages a symlinked binary would not see.
mkdir -p /tmp/specharness-engine/bin && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/specharness-engine/bin/python
chmod +x /tmp/specharness-engine/bin/python
PY=/tmp/specharness-engine/bin/python
export PYTHONPATH="/tmp/site:$ROOT" ASV_PYTHONPATH="/tmp/site:$ROOT" VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
export SPECHARNESS_DEFAULT_GGUF=/tmp/stage/smollm2-135m-instruct-q4_1.gguf SPECHARNESS_CACHE=/tmp/shcache
export SPECHARNESS_ASV_RUNS=/tmp/asvruns SPECHARNESS_ASV_ENGINE="${SPECHARNESS_ASV_ENGINE:-}"
# The bundle is installed with --no-compile and the image sets PYTHONDONTWRITEBYTECODE: without this every Python
# process would compile vLLM's sources as it imports them. compileall writes the bytecode once, as pip does by default.
compile_site() {
  [ -f /tmp/site/.bytecode ] && return 0
  local t0; t0=$(date +%s.%N)
  python3 -m compileall -q -j 0 /tmp/site >/dev/null; touch /tmp/site/.bytecode
  echo "bytecode for /tmp/site compiled in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s: $(find /tmp/site -name '*.pyc' | wc -l) .pyc"
}
[ "$MODE" = starts ] || compile_site
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
case "$MODE" in
  asv|sweep|load)
    # ASV saves results from an existing environment only with --set-commit-hash: the ledger commit of this release.
    "$PY" -m specharness ledger >/dev/null || exit 4
    COMMIT="$(git -C .asv/ledger rev-parse "vllm-$VLLM_TAG")" || { echo "vllm $VLLM_TAG is not in the release ledger" >&2; exit 4; }
    "$PY" -m specharness machine --name "${MACHINE:-h200}" | tee "$OUT/machine.txt"
    bench='PairedNgram'; [ "$MODE" = sweep ] && bench='NgramConfigSweep'; [ "$MODE" = load ] && bench='LoadSweep'
    export SPECHARNESS_ASV_PROFILE=standard
    for k in $(seq 1 "${REPEATS:-1}"); do  # REPEATS>1: repeated runs of one release (run-to-run spread)
    start=$(date +%s)
    # ASV takes no range with an existing environment and walks every configured branch head (running the suite once
    # per branch): a copy of the config that names only the CUDA branch runs it once.
    "$PY" -c 'import json; from asv.util import load_json; c = load_json("asv.conf.json", js_comments=True); c["branches"] = ["vllm"]; json.dump(c, open("asv.gpu.json", "w"))'
    timeout "${ASV_LIMIT_S:-540}" "$PY" -m asv run --config asv.gpu.json -E "existing:$PY" --set-commit-hash "$COMMIT" --machine "${MACHINE:-h200}" --bench "$bench" --show-stderr \
      2>&1 | tee "$OUT/asv_$MODE.log"
    echo "asv $MODE wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/asv_$MODE.log"
    mkdir -p "$OUT/repeat$k" && cp results/h200/"${COMMIT:0:8}"-* "$OUT/repeat$k/"
    done
    tar -cJf "$OUT/results_$MODE.tar.xz" results/h200
    tar -C /tmp/asvruns --exclude='*.log' -cJf "$OUT/runs_$MODE.tar.xz" . ;;
  sync)
    timeout "${SYNC_LIMIT_S:-540}" "$PY" -m specharness run --profile standard --workloads transform --clients 1,8 \
      --arms baseline,ngram,baseline-sync --no-progress --out /tmp/sync 2>&1 | tee "$OUT/sync.log"
    tar -C /tmp/sync -cJf "$OUT/sync.tar.xz" . ;;
  control)
    timeout "${CONTROL_LIMIT_S:-560}" "$PY" -m specharness run --profile control --workloads copy,transform,free,abstain \
      --clients 1,8 --requests "${CONTROL_REQUESTS:-8}" --no-progress ${START:-} ${CONTROL_EXTRA:-} --out /tmp/control \
      2>&1 | tee "$OUT/control.log"
    tar -C /tmp --exclude='*.log' -cJf "$OUT/control.tar.xz" control ;;
  standard)
    timeout "${STANDARD_LIMIT_S:-560}" "$PY" -m specharness run --profile standard \
      --no-progress ${START:-} --out /tmp/standard 2>&1 | tee "$OUT/standard.log"
    tar -C /tmp --exclude='*.log' -cJf "$OUT/standard.tar.xz" standard ;;
  structured)
    timeout "${STRUCTURED_LIMIT_S:-480}" "$PY" -m specharness run --workloads structured --clients 1 --blocks 2 \
      --requests 16 --warmups 1 --max-tokens-cap 256 --engine-arg=--enable-auto-tool-choice \
      --engine-arg=--tool-call-parser --engine-arg=hermes --no-progress ${START:-} \
      --out /tmp/structured 2>&1 | tee "$OUT/structured.log"
    tar -C /tmp --exclude='*.log' -cJf "$OUT/structured.tar.xz" structured ;;
  custom)  # any run: RUN_ARGS holds the specharness run options (workload files travel with the working tree or carry)
    timeout "${CUSTOM_LIMIT_S:-560}" "$PY" -m specharness run $RUN_ARGS --no-progress \
      ${START:-} --out /tmp/custom 2>&1 | tee "$OUT/custom.log"
    tar -C /tmp --exclude='*.log' -cJf "$OUT/custom.tar.xz" custom ;;
  starts)
    # A: vLLM as the bundle leaves it: installed with --no-compile, and the image sets PYTHONDONTWRITEBYTECODE, so
    # every process compiles vLLM's sources again as it imports them. B: after compiling the bytecode once (what pip
    # does by default). C: one start with vLLM's DEBUG log and a stack sample every 0.5 s of each of its processes.
    echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}; .pyc in /tmp/site: $(find /tmp/site -name '*.pyc' | wc -l)" | tee "$OUT/starts.log"
    timeout "${STARTS_A_LIMIT_S:-240}" "$PY" -m specharness starts --out /tmp/starts-nopyc --arms baseline --repeat 2 \
      2>&1 | tee -a "$OUT/starts.log"
    compile_site 2>&1 | tee -a "$OUT/starts.log"
    timeout "${STARTS_B_LIMIT_S:-220}" "$PY" -m specharness starts --out /tmp/starts --arms baseline,ngram --repeat 2 \
      2>&1 | tee -a "$OUT/starts.log"
    SPECHARNESS_STACKS=/tmp/starts-debug/stacks PYTHONPATH="$ROOT/scripts/diag:$PYTHONPATH" VLLM_LOGGING_LEVEL=DEBUG \
      timeout "${STARTS_C_LIMIT_S:-90}" "$PY" -m specharness starts --out /tmp/starts-debug --arms baseline --repeat 1 \
      2>&1 | tee -a "$OUT/starts.log"
    tar -C /tmp -cJf "$OUT/starts.tar.xz" starts-nopyc starts starts-debug ;;
  starts-fork)  # the starts as the harness now makes them (engine core forked; on a GPU the server forked from a
    # preloaded interpreter), nothing else; starts.jsonl and starts.md are written under $OUT as each start ends
    timeout "${STARTS_LIMIT_S:-230}" "$PY" -m specharness starts --out "$OUT/starts-fork" --arms "${STARTS_ARMS:-baseline,ngram}" \
      --repeat "${STARTS_REPEAT:-2}" 2>&1 | tee "$OUT/starts.log" ;;
  starts-warm)  # warm starts: STARTS_ARMS (default baseline,ngram) started STARTS_REPEAT times (default 3) as the
    # harness starts them, then one start of STACKS_ARM (default ngram) with vLLM's DEBUG log and a stack sample of
    # each of its processes every 0.5 s (scripts/diag/sitecustomize.py), to attribute its silent seconds
    timeout "${STARTS_LIMIT_S:-400}" "$PY" -m specharness starts --out /tmp/starts-warm --arms "${STARTS_ARMS:-baseline,ngram}" \
      --repeat "${STARTS_REPEAT:-3}" 2>&1 | tee "$OUT/starts.log"
    cp /tmp/starts-warm/starts.md /tmp/starts-warm/starts.jsonl "$OUT/"
    [ "${STACKS_ARM:-ngram}" = none ] || SPECHARNESS_STACKS=/tmp/starts-stacks/stacks PYTHONPATH="$ROOT/scripts/diag:$PYTHONPATH" \
      VLLM_LOGGING_LEVEL=DEBUG timeout "${STACKS_LIMIT_S:-120}" "$PY" -m specharness starts --out /tmp/starts-stacks \
      --arms "${STACKS_ARM:-ngram}" --repeat 1 2>&1 | tee -a "$OUT/starts.log"
    mkdir -p /tmp/starts-stacks
    tar -C /tmp -cJf "$OUT/starts-logs.tar.xz" starts-warm starts-stacks ;;
  starts-preload)
    # spawned against preloaded servers on one machine: baseline spawned twice (the first on this machine's empty
    # compile cache), then baseline and ngram twice each forked from one preloader (its import in the first of them)
    SPECHARNESS_PRELOADED_SERVER=0 timeout "${STARTS_LIMIT_S:-260}" "$PY" -m specharness starts --out /tmp/starts-spawned \
      --arms baseline --repeat 2 2>&1 | tee "$OUT/starts.log"
    SPECHARNESS_PRELOADED_SERVER=1 timeout "${PRELOAD_LIMIT_S:-260}" "$PY" -m specharness starts --out /tmp/starts-preloaded \
      --arms "${STARTS_ARMS:-baseline,ngram}" --repeat "${STARTS_REPEAT:-2}" 2>&1 | tee -a "$OUT/starts.log"
    cat /tmp/starts-spawned/starts.md /tmp/starts-preloaded/starts.md
    tar -C /tmp -cJf "$OUT/starts.tar.xz" starts-spawned starts-preloaded ;;
  pool)
    # first the starts (baseline twice: the first on this machine's empty compile cache; POOL_STARTS=0 skips them),
    # then two ASV classes that share engines through the engine pool (PairedNgram, SampledDistribution; quick profile)
    [ "${POOL_STARTS:-1}" = 0 ] || timeout "${STARTS_LIMIT_S:-140}" "$PY" -m specharness starts --out /tmp/starts-fork --arms "${STARTS_ARMS:-baseline}" \
      --repeat 2 2>&1 | tee "$OUT/starts.log"
    "$PY" -m specharness ledger >/dev/null || exit 4
    COMMIT="$(git -C .asv/ledger rev-parse "vllm-$VLLM_TAG")" || { echo "vllm $VLLM_TAG is not in the release ledger" >&2; exit 4; }
    "$PY" -m specharness machine --name "${MACHINE:-h200}" | tee "$OUT/machine.txt"
    "$PY" -c 'import json; from asv.util import load_json; c = load_json("asv.conf.json", js_comments=True); c["branches"] = ["vllm"]; json.dump(c, open("asv.gpu.json", "w"))'
    start=$(date +%s)
    SPECHARNESS_ASV_PROFILE=quick timeout "${POOL_ASV_LIMIT_S:-240}" "$PY" -m asv run --config asv.gpu.json -E "existing:$PY" \
      --set-commit-hash "$COMMIT" --machine "${MACHINE:-h200}" --bench 'PairedNgram|SampledDistribution' --show-stderr 2>&1 | tee "$OUT/asv_pool.log"
    echo "asv pool wall: $(( $(date +%s) - start )) s; pooled engine starts: $(cat /tmp/asvruns/engine-pool/*.keeper.log 2>/dev/null | grep -c ': starting the server$')" | tee -a "$OUT/asv_pool.log"
    tar -C /tmp --exclude='*.log' -cJf "$OUT/pool_runs.tar.xz" asvruns
    tar -C /tmp -cJf "$OUT/pool_logs.tar.xz" asvruns/engine-pool $(cd /tmp && ls -d starts-fork 2>/dev/null) ;;
  reuse)  # both runs take their engines from one pool that lives as long as this script
    mkdir -p /tmp/reuse-pool; export SPECHARNESS_ENGINE_POOL=/tmp/reuse-pool SPECHARNESS_ENGINE_POOL_OWNER=$$
    for k in 1 2; do
      start=$(date +%s)
      timeout "${REUSE_LIMIT_S:-270}" "$PY" -m specharness run ${REUSE_ARGS:---profile quick} --out "/tmp/reuse$k" --no-progress 2>&1 \
        | grep -v 'it/s]' | tail -25 | tee -a "$OUT/reuse.log"
      echo "run $k wall: $(( $(date +%s) - start )) s; pooled engine starts so far: $(cat /tmp/reuse-pool/*.keeper.log 2>/dev/null | grep -c ': starting the server$')" | tee -a "$OUT/reuse.log"
    done
    tar -C /tmp --exclude='*.log' -cJf "$OUT/reuse_runs.tar.xz" reuse1 reuse2
    tar -C /tmp -cJf "$OUT/reuse_pool.tar.xz" reuse-pool ;;
  queue)
    # two runs at once on one pool: the first (baseline, ngram) holds two of the three pooled slots; the second,
    # started QUEUE_GAP_S later with other engines (one more engine argument: other pool keys), starts one engine in
    # the third slot, finds no room for its second while the first holds its engines, lets go of its own and queues
    # until the first run lets go of its engines (which are then idle and stopped to make room)
    mkdir -p /tmp/queue-pool; export SPECHARNESS_ENGINE_POOL=/tmp/queue-pool SPECHARNESS_ENGINE_POOL_OWNER=$$
    start=$(date +%s)
    timeout "${QUEUE_LIMIT_S:-520}" "$PY" -m specharness run ${QUEUE_ARGS:---workloads copy --clients 1 --blocks 2 --requests 4} \
      --out /tmp/queue1 --no-progress > "$OUT/queue1.log" 2>&1 &
    first=$!
    sleep "${QUEUE_GAP_S:-20}"
    timeout "${QUEUE_LIMIT_S:-520}" "$PY" -m specharness run ${QUEUE_ARGS:---workloads copy --clients 1 --blocks 2 --requests 4} \
      ${QUEUE_ARGS2:---engine-arg=--max-num-batched-tokens --engine-arg=4096} --out /tmp/queue2 --no-progress > "$OUT/queue2.log" 2>&1
    echo "run 2 ended: exit $? at $(( $(date +%s) - start )) s"
    wait "$first"; echo "run 1 ended: exit $?"
    echo "queue wall: $(( $(date +%s) - start )) s; pooled engine starts: $(cat /tmp/queue-pool/*.keeper.log 2>/dev/null | grep -c ': starting the server$')"
    grep -h -i 'waiting for room\|verdict\|wall' "$OUT/queue1.log" "$OUT/queue2.log" | grep -v 'it/s]' | tail -20
    tar -C /tmp --exclude='*.log' -cJf "$OUT/queue_runs.tar.xz" queue1 queue2
    tar -C /tmp -cJf "$OUT/queue_pool.tar.xz" queue-pool ;;
  pair)
    [ -d /tmp/releases ] || { echo "no /tmp/releases: unpack the earlier release's delta first" >&2; exit 3; }
    export SPECHARNESS_RELEASES=/tmp/releases
    for site in /tmp/releases/*/site; do  # the earlier release's bytecode too, or its starts would compile its sources
      [ -f "$site/.bytecode" ] || { python3 -m compileall -q -j 0 "$site" >/dev/null; touch "$site/.bytecode"; }
    done
    "$PY" -m specharness ledger >/dev/null || exit 4
    COMMIT="$(git -C .asv/ledger rev-parse "vllm-$VLLM_TAG")" || { echo "vllm $VLLM_TAG is not in the release ledger" >&2; exit 4; }
    "$PY" -m specharness machine --name "${MACHINE:-h100}" | tee "$OUT/machine.txt"
    "$PY" -c 'import json; from asv.util import load_json; c = load_json("asv.conf.json", js_comments=True); c["branches"] = ["vllm"]; json.dump(c, open("asv.gpu.json", "w"))'
    start=$(date +%s)
    SPECHARNESS_ASV_PROFILE="${PAIR_PROFILE:-quick}" SPECHARNESS_ASV_PAIR_BLOCKS="${PAIR_BLOCKS:-12}" SPECHARNESS_ASV_PAIR_INSTANCES="${PAIR_INSTANCES:-6}" timeout "${PAIR_LIMIT_S:-540}" "$PY" -m asv run --config asv.gpu.json \
      -E "existing:$PY" --set-commit-hash "$COMMIT" --machine "${MACHINE:-h100}" --bench ReleasePair --show-stderr \
      2>&1 | grep -v ' n/a ' | tee "$OUT/asv_pair.log"
    echo "asv pair wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/asv_pair.log"
    tar -cJf "$OUT/results_pair.tar.xz" "results/${MACHINE:-h100}"
    tar -C /tmp/asvruns --exclude='*.log' -cJf "$OUT/runs_pair.tar.xz" . ;;
  controls)  # CONTROLS_RUNS runs (default 1), each packed as it ends, then their scorecard
    runs=()
    for k in $(seq "${CONTROLS_FIRST:-1}" "${CONTROLS_RUNS:-1}"); do
      name=controls; [ "${CONTROLS_RUNS:-1}" -gt 1 ] && name="controls-run$k"
      timeout "${CONTROLS_LIMIT_S:-540}" "$PY" -m specharness run --profile release \
        --arms-file scripts/arms/release-controls.toml ${CONTROLS_ARGS:-} --no-progress --out "/tmp/$name" 2>&1 \
        | grep -v 'it/s]' | tee -a "$OUT/controls.log"
      tar -C /tmp --exclude='*.log' -cJf "$OUT/$name.tar.xz" "$name"
      runs+=("/tmp/$name")
    done
    "$PY" -m specharness aa-summary "${runs[@]}" | tee "$OUT/controls-scorecard.md" ;;
  power)
    if [ "${RESUME:-0}" = 1 ]; then
      timeout "${POWER_LIMIT_S:-540}" "$PY" -m specharness run --resume /tmp/power --no-progress 2>&1 \
        | grep -v 'it/s]' | tee -a "$OUT/power.log"
    else
      timeout "${POWER_LIMIT_S:-540}" "$PY" -m specharness run --profile release --model "${POWER_MODEL:-shape:llama-8b}" \
        --arms-file scripts/arms/power-controls-gpu.toml ${POWER_ARGS:---instances 6 --blocks 12} \
        --no-progress \
        --out /tmp/power 2>&1 | grep -v 'it/s]' | tee -a "$OUT/power.log"
    fi
    tar -C /tmp --exclude='*.log' -cJf "$OUT/power.tar.xz" power
    tar -C /tmp -cJf "$OUT/power-logs.tar.xz" power/logs 2>/dev/null ;;
  aa)
    for k in $(seq "${AA_FROM:-1}" "${AA_TO:-5}"); do
      start=$(date +%s)
      timeout "${AA_LIMIT_S:-300}" "$PY" -m specharness run --profile control --arms baseline,baseline-b \
        --workloads copy,transform,free,abstain --clients 1,8 --requests 8 ${AA_ARGS:-} --no-progress \
        --out "/tmp/aa-run$k" 2>&1 | grep -v 'it/s]' | tail -8 | tee -a "$OUT/aa.log"
      echo "aa-run$k wall: $(( $(date +%s) - start )) s" | tee -a "$OUT/aa.log"
      tar -C /tmp --exclude='*.log' -cJf "$OUT/aa-run$k.tar.xz" "aa-run$k"
    done
    # the machine's record from every run made in this call (2 or more), filed under $OUT/aa_records: copy it into
    # specharness/experiment/aa_records/ (or $SPECHARNESS_MACHINE_RECORDS) and every later run on this GPU uses it
    mkdir -p "$OUT/aa_records"
    SPECHARNESS_MACHINE_RECORDS="$OUT/aa_records" "$PY" -m specharness aa-record /tmp/aa-run* --write --replace \
      2>&1 | tee -a "$OUT/aa.log" ;;
  crosscheck)
    timeout "${CROSS_LIMIT_S:-540}" "$PY" -m specharness crosscheck --out /tmp/cross --num-prompts 16 --max-tokens 64 \
      2>&1 | tee "$OUT/crosscheck.log"
    tar -C /tmp/cross -cJf "$OUT/crosscheck.tar.xz" . ;;
esac
