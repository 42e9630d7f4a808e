"""`python -m cpi.release build|vendor`: the builder without the project CLI."""

import sys

from cpi.release.cli import main

sys.exit(main())
