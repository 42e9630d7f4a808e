"""The process's entry: what bin/cpi (and so the release's job) and `python -m cpi` run.

Read the request, hand it to the warm helper if one takes it, else make the call here
with the wire's own code (cpi.rpc), then leave without the interpreter's teardown. Imported
before `site` (bin/cpi starts Python with -S), so nothing here but the standard library
and the helper's stdlib-only client.
"""

from __future__ import annotations

import os
import sys

from cpi import errors, rpc, strict_json


def main(argv: list[str] | None = None) -> int:
    """The call, through the warm helper (on unless CPI_HELPER_IDLE_TIMEOUT=0) when it takes
    it, else made here (`rpc.serve`), after which a helper is started for the next calls.
    `info` is always made here: that is quicker than handing it over, and it starts no
    helper (the director asks it before every operation; the operation's own call starts
    one)."""
    from cpi.warm import client, where

    argv = sys.argv[1:] if argv is None else argv
    idle = where.idle_timeout()
    if not idle:
        return rpc.serve(argv)
    rpc.standard_fds()
    stdin = rpc.read_all(0)
    if _is_info(stdin[0]):
        return rpc.serve(argv, stdin)
    code = client.call(argv, stdin)
    if code is not None:
        return code
    code = rpc.serve(argv, stdin)
    from cpi.clouds import LOADED

    traced = ["(tracing)"] if "cpi.tracing.otel" in sys.modules else []  # cpi.warm.boot.TRACING
    client.start(idle, [*LOADED, *traced])  # after the response is written: the caller has its answer
    return code


def _is_info(raw: bytes) -> bool:
    if len(raw) > 65536 or b'"info"' not in raw:
        return False
    try:
        request = strict_json.loads(raw, "the request")
    except errors.CpiError:
        return False
    return isinstance(request, dict) and request.get("method") == "info"


def run() -> None:
    """`main`, then an exit that skips the interpreter's teardown (~20 ms once pydantic is
    loaded, nothing of it needed): the exit handlers run and stdio is flushed first, and a
    process with other threads still alive exits the ordinary way, which waits for them."""
    code = main()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        sys.exit(code)
    os._exit(code)
