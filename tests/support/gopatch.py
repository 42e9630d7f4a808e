"""BOSH ops files (go-patch) applied in Python, for the tests of the project's ops files.

The bosh CLI is not on PyPI, so the tests apply bosh-deployment's ops files and ours with
this reading of go-patch's rules — the ones those files use: `replace` and `remove`; paths
of map keys, array indexes (negative from the end), `-` (append), `key=value` (the array
item whose key has that value); a `?` after a token makes it, and every token after it,
optional (a replace creates what is missing, a remove of what is missing does nothing);
`~1` and `~0` escape `/` and `~`. Anything else is refused, so that a file using more of
go-patch fails loudly here rather than being read wrongly. `((name))` variables are
filled by `interpolate`, a whole-value variable keeping its value's type.

The real `bosh int` checks the same files by hand (docs/migrating.md says how).
"""

from __future__ import annotations

import copy
import re
from typing import Any


class PatchError(Exception):
    pass


def apply(document: Any, ops: list[dict]) -> Any:
    """`document` with every op of an ops file applied in order (a new document)."""
    result = copy.deepcopy(document)
    for number, op in enumerate(ops):
        kind = op.get("type")
        if kind not in ("replace", "remove"):
            raise PatchError(f"op {number}: type {kind!r} is not supported here")
        try:
            result = _apply(result, _tokens(op["path"]), kind, copy.deepcopy(op.get("value")))
        except PatchError as exc:
            raise PatchError(f"op {number} ({kind} {op['path']}): {exc}") from None
    return result


class _Token:
    def __init__(self, text: str, optional: bool):
        self.text, self.optional = text, optional
        self.key, self.value = (text.split("=", 1) if "=" in text else (None, None))

    def __repr__(self) -> str:
        return self.text + ("?" if self.optional else "")


def _tokens(path: str) -> list[_Token]:
    if not path.startswith("/"):
        raise PatchError(f"path {path!r} does not start with /")
    tokens, optional = [], False
    for raw in path[1:].split("/") if path != "/" else []:
        if raw.endswith("?"):
            raw, optional = raw[:-1], True
        if raw.startswith(":") or ":" in raw.split("=", 1)[0]:
            raise PatchError(f"token {raw!r}: go-patch modifiers are not supported here")
        tokens.append(_Token(raw.replace("~1", "/").replace("~0", "~"), optional))
    return tokens


def _index(items: list, token: _Token) -> int | None:
    """The array position a token names; None when a key=value names no item."""
    if token.key is not None:
        found = [i for i, item in enumerate(items) if isinstance(item, dict) and item.get(token.key) == token.value]
        if len(found) > 1:
            raise PatchError(f"{token!r} matches {len(found)} items")
        return found[0] if found else None
    try:
        index = int(token.text)
    except ValueError:
        raise PatchError(f"{token!r} is not an index of an array") from None
    if not -len(items) <= index < len(items):
        raise PatchError(f"index {index} is out of range ({len(items)} items)")
    return index % len(items)


def _apply(node: Any, tokens: list[_Token], kind: str, value: Any) -> Any:
    if not tokens:
        if kind == "remove":
            raise PatchError("cannot remove the whole document")
        return value
    token, rest = tokens[0], tokens[1:]
    if isinstance(node, dict):
        if token.key is not None or token.text == "-":
            raise PatchError(f"{token!r} used on a map")
        if token.text not in node:
            if kind == "remove" or not token.optional:
                if token.optional:
                    return node
                raise PatchError(f"no key {token.text!r} (add ? to make it optional)")
            node[token.text] = _new(rest)
        if not rest and kind == "remove":
            del node[token.text]
            return node
        node[token.text] = _apply(node[token.text], rest, kind, value)
        return node
    if isinstance(node, list):
        if token.text == "-":
            if rest or kind == "remove":
                raise PatchError("- only appends a value")
            node.append(value)
            return node
        index = _index(node, token)
        if index is None:
            if kind == "remove" or not token.optional:
                if token.optional:
                    return node
                raise PatchError(f"no item with {token.text} (add ? to make it optional)")
            node.append({token.key: token.value})
            index = len(node) - 1
        if not rest and kind == "remove":
            del node[index]
            return node
        node[index] = _apply(node[index], rest, kind, value)
        return node
    raise PatchError(f"{token!r} goes into a {type(node).__name__}, which holds no keys")


def _new(rest: list[_Token]) -> Any:
    """What an optional missing step is created as: an array when the next token indexes
    one (`-` or key=value), else a map."""
    if rest and (rest[0].text == "-" or rest[0].key is not None):
        return []
    return {}


_VARIABLE = re.compile(r"\(\(([-\w.!/]+)\)\)")


def interpolate(document: Any, variables: dict[str, Any], default: Any = None) -> Any:
    """`((name))` replaced from `variables`, else by `default(name)` when given; a missing
    one is an error, naming it."""
    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            return {fill(k): fill(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fill(v) for v in node]
        if isinstance(node, str):
            whole = _VARIABLE.fullmatch(node)
            if whole:
                return _lookup(whole.group(1), variables, default)
            return _VARIABLE.sub(lambda m: str(_lookup(m.group(1), variables, default)), node)
        return node

    return fill(document)


def _lookup(name: str, variables: dict[str, Any], default: Any) -> Any:
    key = name.lstrip("!")
    if key in variables:
        return variables[key]
    if default is not None:
        return default(key)
    raise PatchError(f"variable (({name})) has no value")
