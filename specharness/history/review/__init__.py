"""Release review: one release against another (the change verdict per value) and the run-to-run spread measured
from repeated runs of one release."""
