"""The aws cloud's config section, `cloud.properties.aws` of cpi.json (the job's
config), and the pieces it shares with the cloud_properties models (cpi.clouds.aws.props):
IMDS options, tags.

Every key a user can write is here, with a description and its constraints; a bad value
fails the call with an error naming the key and what is allowed (cpi.validation.parse).
docs/aws.md is generated from these models (`cpi props aws`, through cpi.operator.reference) and
a test keeps the two in step, so the docs cannot drift from what the code accepts.

No boto3/botocore here: `info` imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    Field,
    SecretStr,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from cpi import private
from cpi.models import StrictModel as _Strict

if TYPE_CHECKING:
    from cpi.transitions import History

#: The setting that chooses the lock directory, as errors name it.
LOCK_DIR_SETTING = "cloud.properties.aws.lock_dir"


def _with_scheme(url: str | None) -> str | None:
    if url and "://" not in url:
        return f"https://{url}"
    return url


# ---------------------------------------------------------------- shared pieces


class MetadataOptions(_Strict):
    """Instance metadata service (IMDS) options, as RunInstances' MetadataOptions.
    `http_tokens: required` turns off IMDSv1 (aws-cpi #156)."""

    http_tokens: Literal["required", "optional"] | None = Field(
        None, description="`required`: IMDSv2 only (session tokens); `optional`: IMDSv1 allowed too."
    )
    http_put_response_hop_limit: StrictInt | None = Field(
        None, ge=1, le=64, description="How many network hops an IMDSv2 token response may travel."
    )
    http_endpoint: Literal["enabled", "disabled"] | None = Field(
        None, description="Turn the metadata endpoint off entirely (the agent needs it: leave enabled)."
    )
    http_protocol_ipv6: Literal["enabled", "disabled"] | None = Field(
        None, description="Serve IMDS on its IPv6 address too."
    )
    instance_metadata_tags: Literal["enabled", "disabled"] | None = Field(
        None, description="Expose the instance's tags through IMDS."
    )

    def to_api(self) -> dict[str, Any]:
        names = {
            "http_tokens": "HttpTokens",
            "http_put_response_hop_limit": "HttpPutResponseHopLimit",
            "http_endpoint": "HttpEndpoint",
            "http_protocol_ipv6": "HttpProtocolIpv6",
            "instance_metadata_tags": "InstanceMetadataTags",
        }
        return {names[k]: v for k, v in self.model_dump(exclude_none=True).items()}

    def over(self, base: MetadataOptions | None) -> MetadataOptions:
        """These options with `base`'s filling the keys this one leaves unset."""
        merged = (base.model_dump(exclude_none=True) if base else {}) | self.model_dump(exclude_none=True)
        return MetadataOptions.model_validate(merged)


Tags = dict[str, str]
#: Tags as stemcell cloud_properties may write them (YAML numbers and booleans become text).
LooseTags = dict[str, str | int | float | bool]


# ---------------------------------------------------------------- cpi.json: cloud.properties.aws


class ConnectionOptions(_Strict):
    """`connection_options` as the official AWS CPI's job takes it."""

    ca_cert: str | None = Field(
        None, description="PEM text of the CA certificate(s) that sign the endpoints' TLS certificates; the CPI "
        "keeps it in a private file of its cache (~/.cache/bosh-cpi/ca/) to hand to botocore. The same as "
        "`ca_cert_file`, given as text: set one of them.")


class StemcellDefaults(_Strict):
    """`stemcell` in cpi.json, as the official AWS CPI's job writes it: keys over every
    stemcell's cloud_properties."""

    kernel_id: str | None = Field(
        None, description="The official CPI's kernel for paravirtual images. No effect: no current instance type "
        "runs paravirtual images, and a heavy stemcell asking for one is refused, saying so.")
    tags: LooseTags | None = Field(
        None, description="Tags for every stemcell, in place of the stemcell cloud_properties' `tags` (the official "
        "CPI merges this section over a stemcell's cloud_properties, so these replace its `tags` whole); "
        "create_stemcell's env tags still apply beneath them.")


class AwsProperties(_Strict):
    """`cloud.properties.aws` in cpi.json. Request `context` keys with these names override
    the file for one call (a director cpi-config)."""

    # -- where
    region: str | None = Field(
        None,
        pattern=r"^[a-z0-9-]+$",
        description="AWS region, e.g. `us-east-1`. Required unless `ec2_endpoint` is set "
        "(then it is the signing region, default `us-east-1`).",
    )
    ec2_endpoint: str | None = Field(
        None, description="EC2 API URL for an EC2-compatible cloud or a test server; "
                          "`https://` is added when no scheme is given."
    )
    elb_endpoint: str | None = Field(
        None, description="Elastic Load Balancing API URL (classic `elbs` and `lb_target_groups`).")
    sts_endpoint: str | None = Field(None, description="STS API URL, used with `role_arn`.")
    ebs_endpoint: str | None = Field(None, description="EBS direct API URL, used to upload heavy stemcells.")
    dualstack: StrictBool = Field(False, description="Use the dual-stack (IPv4 and IPv6) AWS endpoints.")
    ca_cert_file: str | None = Field(
        None, description="PEM bundle to verify the endpoints' TLS certificates with (private EC2-compatible clouds)."
    )

    # -- who
    credentials_source: Literal["static", "env_or_profile"] = Field(
        "static",
        description="`static`: the keys below. `env_or_profile`: the SDK's chain (environment, "
        "shared config, container or instance profile); the keys below must then be unset.",
    )
    access_key_id: str | None = Field(None, description="Access key ID (with `credentials_source: static`).")
    secret_access_key: SecretStr | None = Field(
        None, description="Secret access key (with `credentials_source: static`). Never logged."
    )
    session_token: SecretStr | None = Field(
        None, description="Session token of temporary credentials (optional). Never logged."
    )
    role_arn: str | None = Field(
        None,
        pattern=r"^arn:[a-z-]+:iam::\d{12}:role/.+$",
        description="Assume this IAM role (STS AssumeRole) with the credentials above.",
    )
    role_session_name: str = Field(
        "bosh-cpi", min_length=2, max_length=64, description="Session name for `role_arn` (shows in CloudTrail)."
    )
    role_external_id: str | None = Field(None, description="External ID the role's trust policy demands, if any.")

    # -- defaults for VMs and disks
    default_key_name: str | None = Field(None, description="EC2 key pair for VMs whose vm_type names none.")
    default_security_groups: list[str] = Field(
        default_factory=list,
        description="Security groups (IDs or names) for VMs when neither vm_type nor the network names any. "
        "Empty: the VPC's default group.",
    )
    default_iam_instance_profile: str | None = Field(
        None, description="IAM instance profile (name or ARN) for VMs whose vm_type names none."
    )
    default_availability_zone: str | None = Field(
        None, description="Where create_disk puts a disk that is created without a VM."
    )
    encrypted: StrictBool = Field(
        False,
        description="Encrypt persistent and ephemeral disks and copy light stemcells encrypted, unless "
        "cloud_properties say otherwise.",
    )
    kms_key_arn: str | None = Field(
        None, description="KMS key for encryption (default: the account's EBS default key)."
    )
    metadata_options: MetadataOptions | None = Field(
        None, description="IMDS options for every VM (vm_type `metadata_options` override key by key)."
    )
    instance_type_families: list[str] = Field(
        default_factory=lambda: ["m6i", "c6i", "r6i", "m5", "c5", "r5"],
        min_length=1,
        description="Families calculate_vm_cloud_properties chooses from, most preferred first; it "
        "returns the smallest type (memory, then vCPUs) that fits.",
    )
    stemcell: StemcellDefaults | None = Field(
        None, description="The official CPI's `stemcell` section: `kernel_id`, and `tags` for every stemcell.")
    connection_options: ConnectionOptions | None = Field(
        None, description="The official CPI's `connection_options.ca_cert` (PEM text): the same as `ca_cert_file`.")
    fast_path_delete: StrictBool = Field(
        False, description="delete_vm returns once EC2 has taken the TerminateInstances request, naming the instance "
        "`to be deleted`, without waiting until it is terminated (as the official CPI's key): quicker, but the "
        "persistent disks it held and its IP are freed a little later.")
    enable_describe_instance_types: StrictBool = Field(
        True, description="Ask EC2 (DescribeInstanceTypes) whether an instance type exposes EBS volumes as NVMe, "
        "for attach_disk's disk hint; false: decide from the type's family name, with no such request (an "
        "account whose policy lacks ec2:DescribeInstanceTypes). A vm_type asking for instance storage "
        "(`ephemeral_disk.use_instance_storage`, `raw_instance_storage`) is asked of EC2 either way: no name tells "
        "how many instance-store volumes a type has.")

    # -- retries and waits
    max_retries: StrictInt = Field(
        8,
        ge=0,
        le=1000,
        description="Most retries of one throttled or failed request; with `retry_budget_seconds`, whichever "
        "runs out first ends the retries. 8, the official CPI's default: while EC2 throttles, backoff of up to "
        "about two minutes in all.",
    )
    retry_budget_seconds: float = Field(
        600.0,
        gt=0,
        description="How long one request keeps being retried while AWS throttles (RequestLimitExceeded) or "
        "fails transiently; backoff is exponential with full jitter.",
    )
    connect_timeout: float = Field(10.0, gt=0, description="Seconds to open a connection to an endpoint.")
    read_timeout: float = Field(60.0, gt=0, description="Seconds to wait for a response, all of it however slowly "
                                "it trickles in, from the request being sent.")
    vm_wait_timeout: float = Field(
        900.0, gt=0, description="Seconds to wait for an instance to be running or terminated."
    )
    volume_wait_timeout: float = Field(
        600.0, gt=0, description="Seconds to wait for a volume to be created, attached, detached or resized."
    )
    volume_in_use_timeout: float = Field(
        600.0,
        gt=0,
        description="Seconds attach_disk/delete_disk keep retrying while a volume is still held by a "
        "VM that is going away (VolumeInUse).",
    )
    image_wait_timeout: float = Field(
        3600.0, gt=0, description="Seconds to wait for stemcell snapshots and images to be ready."
    )
    lock_dir: str | None = Field(
        None,
        description="Directory for the lock files that keep two CPI processes on this host from "
        "attaching or detaching disks of the same VM at once: a directory of the CPI's user, created 0700 "
        "and refused if anyone else owns it or can write to it. "
        "Default: `~/.cache/bosh-cpi/aws-locks` in the CPI user's home.",
    )
    slim_models: StrictBool = Field(
        True,
        description="Load only the part of botocore's EC2 API model the CPI uses (faster start-up of every "
        "call); false loads botocore's full model.",
    )

    @field_validator("ec2_endpoint", "elb_endpoint", "sts_endpoint", "ebs_endpoint")
    @classmethod
    def _scheme(cls, value: str | None) -> str | None:
        return _with_scheme(value)

    @model_validator(mode="after")
    def _consistent(self) -> AwsProperties:
        if self.ca_cert_file and self.connection_options and self.connection_options.ca_cert:
            raise ValueError("give the CA as ca_cert_file or as connection_options.ca_cert, not both")
        if not self.region and not self.ec2_endpoint:
            raise ValueError("region is required (or ec2_endpoint for an EC2-compatible cloud)")
        if self.credentials_source == "static":
            missing = [k for k in ("access_key_id", "secret_access_key") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"credentials_source static needs {' and '.join(missing)}")
        else:
            given = [k for k in ("access_key_id", "secret_access_key", "session_token") if getattr(self, k) is not None]
            if given:
                raise ValueError(
                    "credentials_source env_or_profile takes its credentials from the environment; "
                    f"remove {', '.join(given)}"
                )
        return self

    @property
    def signing_region(self) -> str:
        return self.region or "us-east-1"

    def history(self, kind: str) -> History:
        """How long `kind` of transition ("volume attached") took lately against this EC2
        endpoint and region (cpi.transitions): its waits look when it is about to end.
        Imported here, not at the top: `info` reads this module and needs none of it."""
        from cpi.transitions import History

        return History(f"aws {self.ec2_endpoint or '-'} {self.signing_region} {kind}")

    def lock_directory(self) -> Path:
        """The lock directory, created or checked private to the CPI's user (cpi.private):
        never a fixed name in a shared temp dir, where another local user could make it
        first and plant links in it."""
        chosen = self.lock_dir or private.cache_dir("aws-locks", LOCK_DIR_SETTING)
        return private.private_dir(chosen, LOCK_DIR_SETTING)
