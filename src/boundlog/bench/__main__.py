"""``python -m boundlog.bench``."""

import sys

from ._cli import main

sys.exit(main())
