"""The release × configuration matrix on Ray: pair jobs fanned out over the GPUs or cores of one host or a cluster,
merged into one history (``specharness matrix FILE``; docs/matrix.md).

The matrix file (:mod:`~specharness.matrix.spec`) becomes pair jobs (:mod:`~specharness.matrix.plan`), each one
``specharness run`` of one pair, run by one Ray actor per slot (:mod:`~specharness.matrix.fanout`,
:mod:`~specharness.matrix.worker`) pinned to its GPU or cores, ports and caches (:mod:`~specharness.matrix.pinning`);
the run folders come back and their pair records are filed (:mod:`~specharness.matrix.merge`) when the A/A pair that
ran beside them stayed within the machine's band (:mod:`~specharness.matrix.interference`);
:mod:`~specharness.matrix.summary` writes ``matrix.md`` and ``matrix.jsonl``; :mod:`~specharness.matrix.driver` is
the recipe. This room sits above ``history``: it drives runs and files them, as the commands do.
"""
