import sys

from specharness.cli import main

sys.exit(main())
