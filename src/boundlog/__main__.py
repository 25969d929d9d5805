"""``python -m boundlog``."""

import sys

from ._cli import main

sys.exit(main())
