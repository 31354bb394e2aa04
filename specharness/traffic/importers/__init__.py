"""Importers: a user's dataset file becomes a :class:`~specharness.traffic.workloads.Workload`, with counts.

:func:`import_workload` reads a file in one of the :data:`FORMATS` (or a packaged dataset) under
:class:`ImportOptions` and returns an :class:`ImportResult`. Fields per format: docs/workloads.md#fields-per-format.
Submodules, each one job:

- :mod:`~specharness.traffic.importers.options`: :class:`ImportOptions` (checked when made) and :class:`ImportResult`
- :mod:`~specharness.traffic.importers.records`: reading JSONL, JSON-array and CSV records; :func:`detect_format`
- :mod:`~specharness.traffic.importers.fields`: the fields every format shares (id, group, max_tokens, reference)
- :mod:`~specharness.traffic.importers.native`, ``openai``, ``sharegpt``, ``mtbench``, ``plain``: one converter each
- :mod:`~specharness.traffic.importers.formats`: the format table (name -> converter) and :data:`FORMATS`
- :mod:`~specharness.traffic.importers.importing`: :func:`import_workload` and :func:`stratified_sample`
- :mod:`~specharness.traffic.importers.packaged`: datasets shipped inside pip packages
"""

from __future__ import annotations

from specharness.traffic.importers.fields import ID_FIELDS
from specharness.traffic.importers.formats import FORMATS
from specharness.traffic.importers.importing import import_workload, stratified_sample
from specharness.traffic.importers.options import KEPT_REJECTIONS, TURNS, ImportOptions, ImportResult
from specharness.traffic.importers.packaged import PACKAGED_DATASETS, PackagedDataset, packaged_dataset_path
from specharness.traffic.importers.records import detect_format

__all__ = [
    "FORMATS",
    "ID_FIELDS",
    "KEPT_REJECTIONS",
    "PACKAGED_DATASETS",
    "TURNS",
    "ImportOptions",
    "ImportResult",
    "PackagedDataset",
    "detect_format",
    "import_workload",
    "packaged_dataset_path",
    "stratified_sample",
]
