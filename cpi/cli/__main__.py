"""`python -m cpi.cli ...`"""

import sys

from cpi.cli import main

sys.exit(main())
