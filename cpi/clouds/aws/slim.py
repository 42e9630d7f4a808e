"""The slim EC2 API model: botocore's EC2 model cut down to the operations the CPI calls.

botocore's EC2 model describes ~830 operations in 4.3 MB of JSON; parsing it is most of
the ~0.2 s a new EC2 client costs, in every CPI process. data/ec2-slim.json keeps the
operations below and the shapes they reach (~125 KB, documentation stripped), and
session.py serves it to botocore in place of the full model. An operation missing here
is not fatal (session.py falls back to the full model and logs it) and tests/aws checks
that every operation the code names is listed.

Regenerate after changing OPERATIONS or upgrading botocore:

    python -m cpi.clouds.aws.slim
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).with_name("data") / "ec2-slim.json"

OPERATIONS = (
    "AssociateAddress",
    "AttachVolume",
    "CopyImage",
    "CreateNetworkInterface",
    "CreateSnapshot",
    "CreateRoute",
    "CreateTags",
    "CreateVolume",
    "DeleteNetworkInterface",
    "DeleteSnapshot",
    "DeleteVolume",
    "DeregisterImage",
    "DescribeAddresses",
    "DescribeAvailabilityZones",
    "DescribeImages",
    "DescribeInstanceTypes",
    "DescribeInstances",
    "DescribeNetworkInterfaces",
    "DescribeSecurityGroups",
    "DescribeSnapshots",
    "DescribeSubnets",
    "DescribeVolumes",
    "DescribeVolumesModifications",
    "DetachVolume",
    "ModifyInstanceAttribute",
    "ModifyNetworkInterfaceAttribute",
    "ModifyVolume",
    "RebootInstances",
    "RegisterImage",
    "ReplaceRoute",
    "RunInstances",
    "TerminateInstances",
)


def _strip_docs(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_docs(v) for k, v in value.items() if k != "documentation"}
    if isinstance(value, list):
        return [_strip_docs(v) for v in value]
    return value


def generate(full: dict[str, Any], operations: tuple[str, ...] = OPERATIONS) -> dict[str, Any]:
    """The part of `full` (botocore's EC2 service-2 model) that `operations` reach."""
    shapes = full["shapes"]
    keep: set[str] = set()

    def reach(name: str) -> None:
        if name in keep:
            return
        keep.add(name)
        shape = shapes[name]
        for key in ("member", "key", "value"):
            if key in shape:
                reach(shape[key]["shape"])
        for member in shape.get("members", {}).values():
            reach(member["shape"])

    ops = {}
    for name in operations:
        op = full["operations"][name]
        ops[name] = op
        for key in ("input", "output"):
            if key in op:
                reach(op[key]["shape"])
        for error in op.get("errors", []):
            reach(error["shape"])
    slim = {k: v for k, v in full.items() if k not in ("operations", "shapes", "documentation")}
    slim["operations"] = ops
    slim["shapes"] = {name: shapes[name] for name in sorted(keep)}
    return _strip_docs(slim)


def full_model() -> dict[str, Any]:
    import botocore.loaders

    return botocore.loaders.Loader().load_service_model("ec2", "service-2", "2016-11-15")


def render(model: dict[str, Any]) -> str:
    return json.dumps(model, separators=(",", ":"), sort_keys=True) + "\n"


def main() -> int:
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    text = render(generate(full_model()))
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT} ({len(text)} bytes, {len(OPERATIONS)} operations)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
