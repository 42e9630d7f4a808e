"""cpi.json as read from disk, before any model sees it, and what `info` reads of it.

`info` runs before every director operation and needs no cloud (issue #12): it answers from
`cloud.plugin` and `cloud.properties.debug.cpi.api_version` and the plugin's declared
stemcell formats, and reads nothing else of the config. For a built-in plugin and the plain
shapes the job template writes, that answer comes from here, without pydantic; any other
shape goes through the models (cpi.config.info), which coerce or refuse it.
"""

from __future__ import annotations

from cpi import strict_json
from cpi.errors import CpiError
from cpi.inputs import CONFIG_LIMIT, read_bytes

#: The highest CPI API version this CPI speaks (3: create_stemcell takes env.tags).
API_VERSION = 3


def read_file(path: str | None) -> dict:
    """The raw cpi.json (or {} for none: the local cloud with its defaults), parsed as
    strictly as a request (UTF-8, no NaN, bounded nesting), from a regular file of at most
    CONFIG_LIMIT bytes (cpi.inputs)."""
    if not path:
        return {}
    content = read_bytes(path, f"config file '{path}'", CONFIG_LIMIT)
    data = strict_json.loads(content, f"config file '{path}'")
    if not isinstance(data, dict):
        raise CpiError(f"config file '{path}' must hold a JSON object, not {type(data).__name__}")
    return data


def info_result(stemcell_formats: list[str], api_version_cap: int | None) -> dict:
    """`info`'s result: the formats, and the API version, capped by debug.cpi.api_version."""
    return {"stemcell_formats": list(stemcell_formats), "api_version": min(API_VERSION, api_version_cap or API_VERSION)}


def info(raw: dict) -> dict | None:
    """`info`'s result read straight off the raw config, or None when only the models can
    tell: a third-party plugin (its formats are on its class), or a shape other than
    {"cloud": {"plugin": str, "properties": {"debug": {"cpi": {"api_version": 1..3}}}}}
    with every part optional."""
    from cpi.clouds import builtin_stemcell_formats

    cloud = raw.get("cloud", {})
    if raw.keys() - {"cloud"} or type(cloud) is not dict or cloud.keys() - {"plugin", "properties"}:
        return None
    plugin, properties = cloud.get("plugin", "local"), cloud.get("properties", {})
    if type(plugin) is not str or type(properties) is not dict:
        return None
    formats = builtin_stemcell_formats(plugin)
    debug = properties.get("debug") or {}
    if formats is None or type(debug) is not dict or debug.keys() - {"cpi"}:
        return None
    cpi = debug.get("cpi", {})
    if type(cpi) is not dict or cpi.keys() - {"api_version"}:
        return None
    cap = cpi.get("api_version")
    if cap is not None and (type(cap) is not int or not 1 <= cap <= 3):
        return None
    return info_result(formats, cap)
