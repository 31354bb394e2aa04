"""``python -m specharness.engines.pool keep SPEC``: runs the keeper (:func:`specharness.engines.pool.keeper.main`)."""

import sys

from specharness.engines.pool.keeper import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
