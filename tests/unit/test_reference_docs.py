"""The committed cloud references are generated from the models: regenerate with
`.venv/bin/python -m cpi.cli props <cloud> > docs/<cloud>.md`."""

from __future__ import annotations

import pytest

from cpi.clouds import BUILTIN, load_cloud
from cpi.errors import CpiError
from cpi.operator.reference import markdown
from tests.support.runner import ROOT


@pytest.mark.parametrize("cloud", sorted(BUILTIN))
def test_docs_match_models(cloud):
    try:
        cloud_class = load_cloud(cloud)
    except CpiError:
        pytest.skip(f"the {cloud} cloud is not in this build yet")
    committed = ROOT / "docs" / f"{cloud}.md"
    assert committed.exists(), f"docs/{cloud}.md is missing"
    assert committed.read_text() == markdown(cloud_class), f"docs/{cloud}.md is stale: regenerate it"
