"""Check a BOSH cloud-config against the selected cloud's cloud_properties models.

`cpi validate` (cpi/cli/validate.py) prints what `check` finds; this module knows the
cloud-config's shape and the models, not the terminal. What a cloud's own online check
is handed and answers (`Item`, `Finding`) is cpi.clouds.findings: the clouds build those,
and they may not import the operator.

Offline, every `azs`, `vm_types`, `vm_extensions`, `disk_types` and `networks` entry is
checked: its structure (a mapping, a name, no duplicate names, references to AZs that
exist) and its cloud_properties against the cloud's models (`Cloud.cloud_property_models`).
All problems are reported at once, each with its path in BOSH's style
(`vm_types[name=web].cloud_properties.instance_tpye`). The director merges AZ and
vm_extension cloud_properties into the vm_type's, so those are checked as *partial*
vm_types: unknown keys and wrong types, not missing required ones.

Online (`online=True`), the cloud checks that what the cloud_properties name exists
(`Cloud.check_cloud_config`), read-only.

Values under secret-looking keys are never shown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from cpi.clouds.findings import Finding, Item, suggest
from cpi.inputs import CLOUD_CONFIG_LIMIT, read_bytes
from cpi.logs import looks_secret, shown
from cpi.validation import Ignored, closest, model_at, yaml_error

if TYPE_CHECKING:
    from cpi.clouds.base import Cloud

SECTIONS = ("azs", "vm_types", "vm_extensions", "disk_types", "networks", "compilation")
NETWORK_TYPES = ("manual", "dynamic", "vip")

# pydantic's names for the alternatives of a union, which it puts in an error's location
_TAG = re.compile(
    r"^(function-[a-z-]+\[.*\]|literal\[.*\]|list\[.*\]|dict\[.*\]|tagged-union\[.*\]|is-instance\[.*\]"
    r"|constrained-[a-z]+|json-or-python\[.*\]|nullable\[.*\]|chain\[.*\]|lax-or-strict\[.*\]"
    r"|str|int|float|bool|none|list|dict|model|url|multi-host-url)$"
)

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean (true or false)",
    "bool_parsing": "a boolean (true or false)",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


#: How a finding names the type of a value it got, as YAML says it; bool before int, as a
#: bool is an int to isinstance.
_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"), (list, "a list"),
    (dict, "a mapping"),
)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for kind, name in _TYPE_NAMES if isinstance(value, kind)), type(value).__name__)


def _path(prefix: str, loc: tuple) -> str:
    text = prefix
    for item in loc:
        text += f"[{item}]" if isinstance(item, int) else f".{item}"
    return text


def model_findings(model: type[BaseModel], data: Any, prefix: str, *, partial: bool = False,
                   strict: bool = False) -> list[Finding]:
    """What is wrong with `data` as `model`, one finding per problem. `partial`: keys the
    director merges in from elsewhere may be missing (top-level required keys are not
    reported). `strict`: the config's validation.strict, which decides what a call does
    with a key no model knows."""
    if not isinstance(data, dict):
        return [Finding(prefix, f"must be a mapping, not {_type_name(data)}")]
    try:
        model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    else:
        return []
    by_path: dict[str, list[dict]] = {}
    for err in errors:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and _TAG.match(p)))
        if partial and err["type"] == "missing" and len(loc) == 1:
            continue
        by_path.setdefault(_path(prefix, loc) + "\0" + repr(loc), []).append({**err, "loc": loc})
    findings = []
    for key, errs in by_path.items():
        path = key.split("\0", 1)[0]
        loc = errs[0]["loc"]
        findings.append(Finding(path, _problem(model, loc, errs, strict)))
    return findings


def _problem(model: type[BaseModel], loc: tuple, errs: list[dict], strict: bool) -> str:
    keys = [p for p in loc if isinstance(p, str)]
    secret = any(map(looks_secret, keys))
    first = errs[0]
    if first["type"] == "extra_forbidden":
        where = model_at(model, loc)
        problem = "unknown property"
        if where is not None and loc and isinstance(loc[-1], str):
            close = closest(model, loc)
            if close:
                problem += close
            elif not where.model_fields:
                problem += " (nothing can be set here)"
            elif len(where.model_fields) <= 8:
                problem += f" (known: {', '.join(where.model_fields)})"
        return problem + what_the_call_does(strict)
    if first["type"] == "missing":
        return "required property missing"
    expected = [_EXPECTED[e["type"]] for e in errs if e["type"] in _EXPECTED]
    value = first.get("input")
    if expected and len(expected) == len(errs):
        unique = list(dict.fromkeys(expected))
        got = "a value" if secret else f"{_type_name(value)} {shown(value)}"
        if value is None:
            got = "null"
        return f"wrong type: expected {' or '.join(unique)}, got {got}"
    messages = list(dict.fromkeys(e["msg"] for e in errs))
    text = "; ".join(messages)
    if not secret and first["type"] != "missing" and loc:
        text += f" (got {shown(value)})"
    return text


# ---------------------------------------------------------------- the cloud-config


def _model_for(cloud_class: type[Cloud], kind: str, network_type: str | None = None) -> type[BaseModel] | None:
    models = cloud_class.cloud_property_models
    if kind != "network":
        return models.get(kind)
    for key, model in models.items():
        if key == "network" and network_type in ("manual", "dynamic"):
            return model
        if key.startswith("network (") and network_type and network_type in key:
            return model
    return None


def _label(entry: Any, index: int) -> str:
    if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
        return f"name={entry['name']}"
    return str(index)


class _Checker:
    def __init__(self, cloud_class: type, strict: bool):
        self.cloud_class = cloud_class
        self.strict = strict
        self.findings: list[Finding] = []
        self.items: list[Item] = []
        self.az_names: set[str] = set()

    def add(self, path: str, problem: str, severity: str = "error") -> None:
        self.findings.append(Finding(path, problem, severity))

    def entries(self, doc: dict, section: str, *, named: bool = True) -> list[tuple[str, dict]]:
        """The section's entries as (path, mapping), reporting shape, names and duplicates."""
        value = doc.get(section)
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(section, f"must be a list, not {_type_name(value)}")
            return []
        seen: dict[str, str] = {}
        out = []
        for index, entry in enumerate(value):
            path = f"{section}[{_label(entry, index)}]"
            if not isinstance(entry, dict):
                self.add(f"{section}[{index}]", f"must be a mapping, not {_type_name(entry)}")
                continue
            name = entry.get("name")
            if named:
                if name is None:
                    self.add(path, "missing name")
                elif not isinstance(name, str) or not name:
                    self.add(f"{path}.name", f"must be a non-empty string, got {_type_name(name)}")
                elif name in seen:
                    self.add(path, f"duplicate name '{name}' (first at index {seen[name]}, again at index {index})")
                    path = f"{section}[{index}]"
                else:
                    seen[name] = str(index)
            out.append((path, entry))
        return out

    def cloud_properties(self, kind: str, path: str, entry: dict, *, partial: bool = False,
                         network_type: str | None = None, model_kind: str | None = None) -> None:
        props_path = f"{path}.cloud_properties"
        props = entry.get("cloud_properties")
        if props is None:
            props = {}
        if not isinstance(props, dict):
            self.add(props_path, f"must be a mapping, not {_type_name(props)}")
            return
        model = _model_for(self.cloud_class, model_kind or kind, network_type)
        if model is not None:
            self.findings += model_findings(model, props, props_path, partial=partial, strict=self.strict)
        self.items.append(Item(kind, props_path, props, network_type))

    def az_refs(self, path: str, entry: dict) -> None:
        refs = []
        if "az" in entry:
            refs.append(("az", entry["az"]))
        if "azs" in entry:
            if isinstance(entry["azs"], list):
                refs += [(f"azs[{i}]", az) for i, az in enumerate(entry["azs"])]
            else:
                self.add(f"{path}.azs", f"must be a list, not {_type_name(entry['azs'])}")
        for where, name in refs:
            if not isinstance(name, str):
                self.add(f"{path}.{where}", f"must be a string, got {_type_name(name)}")
            elif name not in self.az_names:
                self.add(f"{path}.{where}", f"unknown AZ '{name}'" + suggest(name, self.az_names))

    def run(self, doc: dict) -> None:
        for path, entry in self.entries(doc, "azs"):
            if isinstance(entry.get("name"), str):
                self.az_names.add(entry["name"])
            model_kind = "az" if _model_for(self.cloud_class, "az") else "vm_type"
            self.cloud_properties("az", path, entry, partial=model_kind == "vm_type", model_kind=model_kind)
        vm_types = self.entries(doc, "vm_types")
        first_vm_finding = len(self.findings)
        for path, entry in vm_types:
            self.cloud_properties("vm_type", path, entry)
        vm_findings = self.findings[first_vm_finding:]
        for path, entry in self.entries(doc, "vm_extensions"):
            self.cloud_properties("vm_extension", path, entry, partial=True, model_kind="vm_type")
        self.merged_elsewhere(vm_findings)
        for path, entry in self.entries(doc, "disk_types"):
            if "disk_size" not in entry:
                self.add(path, "missing disk_size")
            elif (isinstance(entry["disk_size"], bool) or not isinstance(entry["disk_size"], int)
                  or entry["disk_size"] < 0):
                self.add(f"{path}.disk_size", f"must be a whole number of MiB, got {shown(entry['disk_size'])}")
            self.cloud_properties("disk_type", path, entry)
        network_names = set()
        for path, entry in self.entries(doc, "networks"):
            if isinstance(entry.get("name"), str):
                network_names.add(entry["name"])
            self.network(path, entry)
        self.compilation(doc, {e.get("name") for _, e in vm_types}, network_names)

    def merged_elsewhere(self, vm_findings: list[Finding]) -> None:
        """A vm_type's required key that an AZ or a vm_extension sets (the director merges
        theirs in) is a warning, not an error: it holds only where those apply."""
        givers: dict[str, list[str]] = {}
        for item in self.items:
            if item.kind in ("az", "vm_extension"):
                for key in item.properties:
                    givers.setdefault(str(key), []).append(item.path.rsplit(".cloud_properties", 1)[0])
        for finding in vm_findings:
            key = finding.path.rsplit(".", 1)[-1]
            if finding.problem == "required property missing" and key in givers and \
                    finding.path.rpartition(".cloud_properties.")[2] == key:
                finding.severity = "warning"
                finding.problem += f" (set only by {', '.join(givers[key])}: VMs elsewhere lack it)"

    def network(self, path: str, entry: dict) -> None:
        network_type = entry.get("type", "manual")
        if network_type not in NETWORK_TYPES:
            self.add(f"{path}.type", f"must be one of {', '.join(NETWORK_TYPES)}, got {shown(network_type)}")
            return
        subnets = entry.get("subnets")
        if network_type == "manual" and subnets is None:
            self.add(path, "a manual network needs subnets")
        if network_type == "manual" and "cloud_properties" in entry:
            self.add(f"{path}.cloud_properties", "a manual network takes cloud_properties in its subnets only")
        if network_type in ("dynamic", "vip") and "cloud_properties" in entry:
            self.cloud_properties("network", path, entry, network_type=network_type)
        if subnets is None:
            return
        if not isinstance(subnets, list):
            self.add(f"{path}.subnets", f"must be a list, not {_type_name(subnets)}")
            return
        # a network the director has the CPI make (create_network): a subnet may leave its
        # range to the CPI (netmask_bits), and its cloud_properties say how it is made
        managed = network_type == "manual" and entry.get("managed") is True
        for index, subnet in enumerate(subnets):
            subnet_path = f"{path}.subnets[{index}]"
            if not isinstance(subnet, dict):
                self.add(subnet_path, f"must be a mapping, not {_type_name(subnet)}")
                continue
            if network_type == "manual" and "range" not in subnet and not managed:
                self.add(subnet_path, "missing range")
            self.az_refs(subnet_path, subnet)
            self.cloud_properties("network", subnet_path, subnet, network_type="managed" if managed else network_type)

    def compilation(self, doc: dict, vm_type_names: set, network_names: set) -> None:
        comp = doc.get("compilation")
        if comp is None:
            return
        if not isinstance(comp, dict):
            self.add("compilation", f"must be a mapping, not {_type_name(comp)}")
            return
        if "network" not in comp:
            self.add("compilation", "missing network")
        elif comp["network"] not in network_names:
            self.add("compilation.network",
                     f"unknown network {shown(comp['network'])}" + suggest(comp["network"], network_names))
        if "vm_type" in comp and comp["vm_type"] not in vm_type_names:
            self.add("compilation.vm_type",
                     f"unknown vm_type {shown(comp['vm_type'])}" + suggest(comp["vm_type"], vm_type_names))
        if "az" in comp:
            self.az_refs("compilation", {"az": comp["az"]})
        if "cloud_properties" in comp:
            self.cloud_properties("vm_type", "compilation", comp)


def check(doc: Any, cloud_class: type, strict: bool = False) -> tuple[list[Finding], list[Item]]:
    """Offline findings for the cloud-config `doc`, and the cloud_properties it holds (for
    the online checks); `strict`, the config's validation.strict, as what_the_call_does."""
    if not isinstance(doc, dict):
        return [Finding("(top level)", f"a cloud-config must be a YAML mapping, not {_type_name(doc)}")], []
    checker = _Checker(cloud_class, strict)
    for key in doc:
        if key not in SECTIONS:
            checker.add(str(key), "unknown cloud-config section" + suggest(str(key), set(SECTIONS)), "warning")
    checker.run(doc)
    return checker.findings, checker.items


def what_the_call_does(strict: bool) -> str:
    """What a call does with a key no model knows, under the config's validation.strict
    (cpi.config.Config.validation): the same for every unknown key `cpi validate` reports,
    in cpi.json or in the cloud-config."""
    if strict:
        return " (every call refuses it: validation.strict is true)"
    return " (every call ignores it, with a warning in its log)"


def config_findings(ignored: list[Ignored], strict: bool) -> list[Finding]:
    """cpi.json's keys that no model knows (cpi.config.Config.ignored: the very list the
    call's warnings are made from), each an error: the setting meant is not applied. Their
    paths are the warnings', after `cpi.json: ` as the clouds' online checks name cpi.json's."""
    return [Finding(f"cpi.json: {item.path}", f"unknown property{item.hint}{what_the_call_does(strict)}")
            for item in ignored]


def check_online(cloud: Cloud, items: list[Item]) -> list[Finding]:
    """Ask the cloud whether what `items` name exists (read-only): `Cloud.check_cloud_config`,
    which raises NotImplemented for a cloud without online checks."""
    return list(cloud.check_cloud_config(items))


class YamlError(ValueError):
    """A document that is not YAML, said in one line: `FILE:LINE:COLUMN: what`."""


def load_yaml(path: str) -> Any:
    """The YAML document at `path` (`-`: stdin), a regular file of at most
    CLOUD_CONFIG_LIMIT bytes. Raises InputError, or YamlError in one line, as a compiler
    says where a file is wrong (PyYAML's own text spans four)."""
    import yaml

    name = "<stdin>" if path == "-" else path
    content = read_bytes(path, name, CLOUD_CONFIG_LIMIT)
    try:
        return yaml.safe_load(content)
    except yaml.YAMLError as exc:
        raise YamlError(yaml_error(name, exc)) from None
    except RecursionError:  # PyYAML composes nested nodes recursively
        raise YamlError(f"{name}: nested too deep to read") from None


__all__ = ["YamlError", "check", "check_online", "config_findings", "load_yaml", "model_findings"]
