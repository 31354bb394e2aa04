"""The format table: each format's name and the converter that turns one of its records into a case.

:func:`~specharness.traffic.importers.importing.import_workload` reads :data:`CONVERTERS`; :data:`FORMATS` is
``"auto"`` then the table's names, in its order. A new format is a module with a ``convert`` function and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from specharness.traffic.importers import mtbench, native, openai, plain, sharegpt
from specharness.traffic.importers.fields import Tally
from specharness.traffic.workloads import Case

if TYPE_CHECKING:  # options imports this table to check a format's name: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = ["CONVERTERS", "FORMATS"]

CONVERTERS: dict[str, Callable[[dict[str, Any], str, str, ImportOptions, Tally], Case]] = {
    "specharness": native.convert,
    "openai": openai.convert,
    "sharegpt": sharegpt.convert,
    "mtbench": mtbench.convert,
    "prompt": plain.convert,
    "csv": plain.convert,
}
FORMATS = ("auto", *CONVERTERS)
