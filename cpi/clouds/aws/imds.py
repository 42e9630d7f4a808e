"""The EC2 instance metadata service, for current_vm_id (plain urllib: no SDK needed)."""

from __future__ import annotations

import urllib.error
import urllib.request

from cpi.errors import CloudError

BASE = "http://169.254.169.254/latest"
TIMEOUT = 2.0


def instance_id(base: str = BASE, timeout: float = TIMEOUT) -> str:
    """IMDSv2: a session token first (works with `http_tokens: required`); IMDSv1 if the
    token endpoint does not answer."""
    headers = {}
    try:
        request = urllib.request.Request(
            f"{base}/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        )
        # bandit B310 waived: BASE is IMDS's fixed http:// address (tests give a loopback one)
        with urllib.request.urlopen(request, timeout=timeout) as response:  # nosec B310
            headers["X-aws-ec2-metadata-token"] = response.read(4096).decode()  # a token: a few hundred bytes
    except (urllib.error.URLError, OSError):
        pass  # no IMDSv2 here: try v1 below, which gives the real error if this is not EC2
    try:
        request = urllib.request.Request(f"{base}/meta-data/instance-id", headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:  # nosec B310  # as above
            value = response.read(4096).decode().strip()  # an instance id: ~20 bytes
    except (urllib.error.URLError, OSError) as exc:
        raise CloudError(f"current_vm_id: the instance metadata service at {base} did not answer ({exc}); "
                         "is this CPI running on EC2?") from None
    if not value.startswith("i-"):
        raise CloudError(f"current_vm_id: the metadata service answered '{value[:40]}', not an instance ID")
    return value
