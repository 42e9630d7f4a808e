"""The helper's process: what it preloads before it listens, then the fork server, whose
workers run the cold call's own code (cpi.rpc.serve)."""

from __future__ import annotations

from collections.abc import Sequence

#: In `preload`, beside the clouds' names: the call that started the helper was traced, so
#: the helper loads OpenTelemetry too (no entry point can be named so). Without it a helper
#: holds no OpenTelemetry module: tracing off, no call imports one, warm or cold.
TRACING = "(tracing)"


def warm_up(preload: Sequence[str] = ()) -> None:
    """What `cpi.rpc.handle` imports and builds for a call, done once, ahead of calls: the
    dependencies, every model and method's argument model, the built-in clouds and their
    SDKs, a plugin cloud's too when the call that started the helper used it (`preload`),
    OpenTelemetry when the starting call was traced (TRACING), and redis-py for a shared
    backoff. All of it costs the helper ~0.7 s of CPU once and
    ~70 MB, shared by its forked workers."""
    from cpi import site_packages

    site_packages.enable()
    import logging

    from cpi import api, config, models
    from cpi.clouds import BUILTIN, builtin_stemcell_formats, load_cloud

    in_build = [name for name in BUILTIN if builtin_stemcell_formats(name) is not None]
    if TRACING in preload:
        from cpi.tracing import otel

        otel.preload()  # a traced call's SDK and encoder (~0.1 s): only when the call that started it was traced
    for name in dict.fromkeys([*in_build, *(name for name in preload if name != TRACING)]):
        try:
            load_cloud(name).preload()
        except Exception as exc:  # noqa: BLE001 - the calls import what failed themselves, and say why
            logging.getLogger("cpi.warm").warning("preloading the %s cloud failed: %s", name, exc)
    import redis  # noqa: F401 - a call with throttle.redis_url imports it (~0.1 s)

    from cpi import backoff, logbridge, opening  # noqa: F401 - what every call imports, in the helper's memory
    for name, handler in api.METHODS.items():
        api._argument_model(name, handler)
    config.build({})  # the config models' validators, on the local cloud's defaults: nothing is made
    models.CallContext.model_validate({})
    _build_deferred_models()


def _build_deferred_models() -> None:
    """Build the validators that the CPI's models defer (`defer_build`: a cold call builds
    only those it reads) for every model the helper has loaded, so that no forked worker
    builds one per call: a local create_disk built two, about 1 ms of each warm call."""
    import sys

    from pydantic import BaseModel

    for name, module in list(sys.modules.items()):
        if name != "cpi" and not name.startswith("cpi."):
            continue
        for value in list(vars(module).values()):
            if (isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == name
                    and not value.__pydantic_complete__):
                value.model_rebuild(raise_errors=False)


def helper(idle: float, preload: list[str]) -> None:
    """The helper's process (cpi.warm.client.start spawns it)."""
    from cpi import rpc

    from . import server

    server.serve(idle, warm_up=lambda: warm_up(preload), run=rpc.serve)
