#!/usr/bin/env bash
# Build, here, a *delta* bundle that lets a second vLLM release run on the GPU machine beside the base bundle's
# (../shared/gpu/build-bundle.sh, default vLLM 0.26.0, unpacked there into /tmp/site). vLLM 0.20.x .. 0.26.0 all pin
# torch 2.11.0, so the second release needs only its own wheel plus the distributions whose name==version is not
# in the base site. The package set is computed exactly as the base script computes it (pip --dry-run --report for
# the GPU platform, less what the GPU image has), then the base site's dist-info names are subtracted.
# On the device the delta unpacks into /tmp/releases/vllm-$VLLM/site, to put *before* the base site:
#   PYTHONPATH=/tmp/releases/vllm-$VLLM/site:/tmp/site   (the delta's older/newer pins shadow the base's)
# Output: DEST/part0.. (PART_MB MiB, default 32: a device call carries the checkout, ~23 MiB, beside its part, 64 MiB
#         in all, so build-bundle.sh's 48 no longer fits: PART_MB=32 there too), DEST/SHA256, DEST/VERSION,
#         DEST/DELTA (the distributions in it), DEST/device-unpack-delta.sh (carry it with SHA256 and VERSION).
# Usage: VLLM=0.24.0 BASE=.stage bash scripts/gpu_release_delta.sh [DEST=.stage-$VLLM]
set -euo pipefail
VLLM="${VLLM:-0.24.0}"
BASE="$(realpath "${BASE:-.stage}")"
DEST="$(realpath -m "${1:-.stage-$VLLM}")"
HERE="$(cd "$(dirname "$0")" && pwd)"
SHARED="$(realpath "${SHARED:-$HERE/../../shared/gpu}")"   # build-bundle.sh's folder: device-python-packages.txt
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64)
for n in 5 12 17 24 26 27 28 31 34 35 36 38 39; do PLAT+=(--platform "manylinux_2_${n}_x86_64"); done

# 1. The base site's distributions, read from the base bundle itself (what is really on the device).
[ "$(cat "$BASE"/part* | sha256sum | cut -d' ' -f1)" = "$(cat "$BASE/SHA256")" ] || { echo "base bundle $BASE: parts do not match SHA256" >&2; exit 3; }
cat "$BASE"/part* | tar -xOf - site.tar.xz | xz -T0 -dc | tar -tf - | sed -n 's#^\./\([^/]*\)\.dist-info/$#\1#p' > "$WORK/base.txt"
echo "[delta] base $(cat "$BASE/VERSION"): $(wc -l < "$WORK/base.txt") distributions"

# 2. vLLM $VLLM and its requirements, filtered as in build-bundle.sh (same exclusions, same harness extras).
echo "[delta] vllm==$VLLM"
pip download -q --no-deps -d "$WORK/vllm" "vllm==$VLLM"
WHL=$(ls "$WORK"/vllm/vllm-*.whl)
unzip -p "$WHL" '*/METADATA' | sed -n 's/^Requires-Dist: //p' | grep -v 'extra ==' \
  | grep -v -E '^(torch|torchaudio|torchvision|torchcodec|PyNvVideoCodec|flashinfer|apache-tvm|tilelang|nvidia-|nvtx|fastsafetensors|quack|tokenspeed|humming|numba|cuda-)' > "$WORK/req.txt"
printf '%s\n' gguf asv asv-runner orjson sacrebleu absl-py nltk six ${EXTRA:-} >> "$WORK/req.txt"
pip install -q --dry-run --ignore-installed "${PLAT[@]}" --target "$WORK/dummy" --report "$WORK/report.json" -r "$WORK/req.txt"

# 3. What the image lacks (as the base script) and the base site does not hold at the same version.
python3 - "$WORK/report.json" "$SHARED/device-python-packages.txt" "$WORK/base.txt" > "$WORK/missing.txt" <<'PY'
import json, re, sys
from pip._vendor.packaging.version import Version
norm = lambda n: re.sub(r'[-_.]+', '-', n.lower())
have = set(open(sys.argv[2]).read().split())
base = {(norm(d.rsplit('-', 1)[0]), Version(d.rsplit('-', 1)[1])) for d in open(sys.argv[3]).read().split()}
skip = re.compile(r'^(nvidia-|torch|triton|cuda-|numpy$|setuptools$|packaging$|sympy$|mpmath$|networkx$)')
for item in json.load(open(sys.argv[1]))["install"]:
    name, ver = norm(item["metadata"]["name"]), item["metadata"]["version"]
    if name not in have and not skip.match(name) and (name, Version(ver)) not in base:
        print(f'{name}=={ver}')
PY
echo "[delta] $(wc -l < "$WORK/missing.txt") distributions beside vllm: $(tr '\n' ' ' < "$WORK/missing.txt")"
mkdir -p "$WORK/deps"
if grep -q '^rouge-score==' "$WORK/missing.txt"; then   # sdist only: built as in the base script
  grep -v '^rouge-score==' "$WORK/missing.txt" > "$WORK/m2"; mv "$WORK/m2" "$WORK/missing.txt"
  pip wheel -q --no-deps -w "$WORK/deps" "rouge-score==0.1.2"
fi
if [ -s "$WORK/missing.txt" ]; then pip download -q --no-deps "${PLAT[@]}" -d "$WORK/deps" -r "$WORK/missing.txt"; fi
shopt -s nullglob   # deps/ may be empty
pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$WORK/site" "$WORK"/deps/*.whl "$WHL"
rm -rf "$WORK/site/bin"
rm -f "$WORK/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"   # FA2 is unused on Hopper (see build-bundle.sh)
ls "$WORK/site" | sed -n 's/\.dist-info$//p' > "$WORK/DELTA"
echo "[delta] compressing $(du -sh "$WORK/site" | cut -f1)"
tar -C "$WORK/site" -cf - . | xz -T0 -6 > "$WORK/site.tar.xz"

# 4. The unpack script for the device: joins DIR/part* (default /tmp/stage-vllm-$VLLM), checks SHA256 carried
#    beside it, unpacks into /tmp/releases/vllm-$VLLM/site.
cat > "$WORK/device-unpack-delta.sh" <<'SH'
#!/usr/bin/env bash
# On the GPU machine, after the base bundle (device-unpack.sh -> /tmp/site): join the delta's parts, check them
# against the SHA256 carried beside this script, unpack into /tmp/releases/vllm-VER/site (VER from VERSION there).
# Usage: bash .stage-0.24.0/device-unpack-delta.sh [PARTS_DIR=/tmp/stage-vllm-VER]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ver="$(sed 's/^vllm==//' "$here/VERSION")"
cd "${1:-/tmp/stage-vllm-$ver}"
got="$(cat $(ls part* | sort) | sha256sum | cut -d' ' -f1)"
[ "$got" = "$(cat "$here/SHA256")" ] || { echo "delta parts incomplete or corrupt: have $(ls part* | tr '\n' ' '); carry the missing ones again" >&2; exit 3; }
site="/tmp/releases/vllm-$ver/site"
rm -rf "$site" && mkdir -p "$site"
cat $(ls part* | sort) | tar -xOf - site.tar.xz | xz -T0 -dc | tar -C "$site" -xf -
[ -d /tmp/site ] || echo "warning: no base site at /tmp/site (run the base device-unpack.sh too)" >&2
echo "unpacked: $(du -sh "$site" | cut -f1) in $site; use PYTHONPATH=$site:/tmp/site"
SH
chmod +x "$WORK/device-unpack-delta.sh"
tar -C "$WORK" -cf "$WORK/bundle.tar" site.tar.xz DELTA device-unpack-delta.sh
mkdir -p "$DEST" && rm -f "$DEST"/part*
split -b "${PART_MB:-32}M" -d -a 1 "$WORK/bundle.tar" "$DEST/part"
(cd "$WORK" && sha256sum bundle.tar | cut -d' ' -f1) > "$DEST/SHA256"
echo "vllm==$VLLM" > "$DEST/VERSION"
echo "base $(cat "$BASE/VERSION") $(cat "$BASE/SHA256")" > "$DEST/BASE"
cp "$WORK/DELTA" "$WORK/device-unpack-delta.sh" "$DEST/"
ls -la "$DEST"
