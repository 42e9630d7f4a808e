"""Reading the operator-written config files the real-cloud lifecycle targets take."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path | str, where: str, error: type[Exception]) -> Any:
    """The file's JSON, or `error` naming `where` and what is wrong with it."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise error(f"{where}: cannot read it: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not JSON: {exc}") from None
