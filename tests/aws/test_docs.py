"""docs/aws.md is generated from the models the CPI validates with."""

from __future__ import annotations

from cpi.clouds.aws.cloud import AwsCloud
from cpi.operator.reference import markdown
from tests.support.runner import ROOT


def test_committed_reference_matches_the_models():
    committed = ROOT / "docs" / "aws.md"
    assert committed.read_text() == markdown(AwsCloud), (
        "docs/aws.md is stale: .venv/bin/python -m cpi.cli props aws > docs/aws.md"
    )


def test_every_property_is_described():
    models = [AwsCloud.Properties, *AwsCloud.cloud_property_models.values()]
    seen = set()
    while models:
        model = models.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            assert field.description and len(field.description) > 10, f"{model.__name__}.{name} has no description"
            for arg in getattr(field.annotation, "__args__", ()) or (field.annotation,):
                if isinstance(arg, type) and hasattr(arg, "model_fields"):
                    models.append(arg)
    assert {"VMCloudProperties", "EphemeralDisk", "RootDisk", "MetadataOptions"} <= {m.__name__ for m in seen}
