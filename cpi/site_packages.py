"""`site`, run when a call first needs site-packages rather than at start-up.

bin/cpi starts the interpreter with -S: skipping `site` is what lets `info` finish before
`site` alone would have (~10 ms: .pth files, the checkout's editable finder, the pathlib
it imports). A call that needs the dependencies pays for it here, ~1-2 ms once pathlib is
loaded, which it needs anyway.
"""

from __future__ import annotations

import sys

_done = False


def enable() -> None:
    """Run `site` now, as a plain start would have (the venv's site-packages and their .pth
    files; sys.prefix the venv's); once, and only in an interpreter started with -S."""
    global _done
    if sys.flags.no_site and not _done:
        import site

        site.main()
        _done = True
