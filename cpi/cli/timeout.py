"""`--timeout SECONDS`: how long a human command waits on a cloud that does not answer.

BOSH runs bin/cpi with budgets meant for a director's deploy: AWS retries one request for
up to 600 s (50 retries), OpenStack for 300 s, and a read may take 60 to 120 s. An operator
typing `cpi list vms` against a mistyped or firewalled endpoint would sit in front of a
silent terminal for minutes. So the commands that talk to a cloud (call, plan, list, show,
avail, orphans, validate --online, certify) lower those budgets for their own calls, the
way a director's cpi-config does it for one deployment: as `context` keys the cloud class
lets a request override (`context_overrides`), applied by cpi.config.build. The wire's
defaults are untouched: a request without these keys keeps them.

What --timeout bounds is each request to the cloud, its retries included, not the command
as a whole: a listing of 10,000 VMs reads page after page, and create_vm waits minutes for
an instance to run (the config's own state-wait timeouts), both rightly. A cloud that does
not answer fails the first request, so the command ends after about --timeout seconds.

The default, 30 s, is well beyond what a healthy API takes to answer one request (EC2's
slowest describes take a few seconds) and short enough that nobody wonders whether the
command hangs; `cpi certify` keeps the config's budgets unless --timeout is given, since it
makes real VMs and disks and a throttled account must not fail it half-way."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .output import CliError

#: Seconds a human command waits on one request to a cloud, retries included.
DEFAULT = 30.0
#: Seconds to open a connection: a listening endpoint accepts at once (never above --timeout).
CONNECT = 5.0


def seconds(args: Any, default: float | None = DEFAULT) -> float | None:
    """--timeout as a number of seconds (`default` when not given; None: the config's own
    budgets); a value that is not a positive number is a usage error."""
    text = getattr(args, "timeout", None)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise CliError(f"--timeout {text}: not a number of seconds", 2) from None
    if not value > 0 or not math.isfinite(value):
        raise CliError(f"--timeout {text}: must be a positive number of seconds", 2)
    return value


def limits(timeout: float) -> dict[str, float]:
    """The settings --timeout lowers, by the name every built-in cloud gives them."""
    return {"retry_budget_seconds": timeout, "read_timeout": timeout, "connect_timeout": min(CONNECT, timeout)}


def overrides(raw: dict, timeout: float | None) -> dict[str, float]:
    """The context keys that bring `timeout` to the cloud cpi.json `raw` names: only keys its
    class lets a context override, only where they lower what the config already says (a
    config's tighter setting stays), and only keys the config then still accepts (an
    OpenStack config whose connection_options name a read_timeout refuses another one).
    {} for no timeout, a cloud without such settings (local), or a config the command's
    own opening will refuse with a better message."""
    if timeout is None:
        return {}
    from cpi import config
    from cpi.errors import BoshError

    with _quiet():  # the command's own opening warns of what these checks would, once
        try:
            cfg = config.build(raw)
        except BoshError:
            return {}
        allowed = cfg.cloud_class.context_overrides
        wanted = {}
        for key, limit in limits(timeout).items():
            current = getattr(cfg.properties, key, None)
            if key in allowed and isinstance(current, int | float) and not isinstance(current, bool) \
                    and limit < current:
                wanted[key] = limit
        accepted: dict[str, float] = {}
        for key, value in wanted.items():
            try:
                config.properties_with(cfg, {**accepted, key: value})
            except BoshError:
                continue  # e.g. connection_options.read_timeout says otherwise: that one stays
            accepted[key] = value
    return accepted


def overrides_of_file(path: str | Path | None, timeout: float | None) -> dict[str, float]:
    """`overrides` of the cpi.json at `path`, for a command that hands it to bin/cpi (which
    reads it again, and says what is wrong with it in its response: {} then)."""
    from cpi.errors import BoshError
    from cpi.raw_config import read_file

    if timeout is None:
        return {}
    try:
        raw = read_file(str(path) if path else None)
    except BoshError:
        return {}
    return overrides(raw, timeout)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No log record while the config is built only to be looked at."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)
