"""`python -m cpi [CONFIG_PATH]`: serve one CPI request from stdin."""

import sys

from cpi.rpc import main

sys.exit(main())
