"""botocore errors → retry verdicts and cpi.errors, at the aws cloud's boundary.

Throttling surfaced as type `Unknown` in the Ruby CPI (aws-cpi #59); here it is retried
by cpi.retry and, if the budget runs out, reported as a CloudError that says so. Auth
failures say which credential AWS refused (the key ID and its source), never a secret.

botocore is imported inside functions: this module is imported by `info`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cpi import retry
from cpi.errors import CloudError

#: Error codes AWS services use for "slow down".
THROTTLE_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "ThrottledException",
    "RequestThrottled", "RequestThrottledException", "TooManyRequestsException",
    "SlowDown", "EC2ThrottledException", "BandwidthLimitExceeded", "PriorRequestNotComplete",
    "ProvisionedThroughputExceededException", "RequestLimitExceededException",
})
#: Server-side failures worth another try.
TRANSIENT_CODES = frozenset({
    "InternalError", "InternalFailure", "InternalServerError", "InternalServerException",
    "ServiceUnavailable", "ServiceUnavailableException", "Unavailable", "RequestTimeout",
    "RequestTimeoutException", "IDPCommunicationError",
})
#: The caller's credentials were refused (as opposed to: not allowed to do this).
AUTH_CODES = frozenset({
    "AuthFailure", "InvalidClientTokenId", "SignatureDoesNotMatch", "IncompleteSignature",
    "MissingAuthenticationToken", "ExpiredToken", "ExpiredTokenException", "RequestExpired",
    "InvalidAccessKeyId", "UnrecognizedClientException", "InvalidToken",
})
#: Authenticated, but the IAM policy does not allow it.
PERMISSION_CODES = frozenset({"UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "OptInRequired"})


def code(exc: BaseException) -> str | None:
    """The AWS error code of a botocore ClientError (None for anything else)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        value = (response.get("Error") or {}).get("Code")
        return str(value) if value is not None else None
    return None


def message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Message") or "")
    return str(exc)


def status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return None


def summary(exc: BaseException) -> str:
    """`Code: message` for an AWS error, `Type: text` for anything else."""
    error_code = code(exc)
    if error_code:
        text = message(exc)
        return f"{error_code}: {text}" if text else error_code
    return f"{type(exc).__name__}: {exc}"


def is_not_found(exc: BaseException) -> bool:
    error_code = code(exc) or ""
    return error_code.endswith((".NotFound", ".Malformed"))


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from AWS; the backoff covers it


def classifier(*, idempotent: bool = True, also: Callable[[str], bool] | None = None) -> retry.Classifier:
    """How cpi.retry should treat an exception from one request.

    Connection failures before the request left (could not connect) are always safe to
    retry; a timeout or dropped connection after sending only for idempotent requests
    (reads, deletes, and creates that carry a ClientToken)."""
    from botocore import exceptions as bexc

    def classify(exc: BaseException) -> retry.Verdict:
        error_code = code(exc)
        if error_code is not None:
            if error_code in THROTTLE_CODES or status(exc) == 429:
                return retry.Verdict(retry.Kind.THROTTLED, error_code, _retry_after(exc))
            if also is not None and also(error_code):
                return retry.Verdict(retry.Kind.TRANSIENT, error_code, _retry_after(exc))
            if error_code in TRANSIENT_CODES or (status(exc) or 0) >= 500:
                return retry.Verdict(retry.Kind.TRANSIENT, error_code, _retry_after(exc))
            return retry.PERMANENT
        connecting = unreached(exc)
        if connecting is not None:
            return connecting
        if isinstance(exc, (bexc.ReadTimeoutError, bexc.ConnectionClosedError)):
            return retry.Verdict(retry.Kind.TRANSIENT, type(exc).__name__) if idempotent else retry.PERMANENT
        return retry.PERMANENT

    return classify


def unreached(exc: BaseException) -> retry.Verdict | None:
    """The verdict on a request that could not open its connection (nothing was sent):
    retry.unreached's, for what botocore raises when connecting."""
    from botocore import exceptions as bexc

    if isinstance(exc, bexc.ReadTimeoutError):  # a TLS handshake never answered is one too
        return retry.unreached(exc)
    if not isinstance(exc, bexc.ConnectionError):  # EndpointConnectionError, ConnectTimeoutError, SSLError, proxy
        return None
    kind = retry.Kind.PERMANENT if isinstance(exc, bexc.SSLError) else retry.Kind.UNREACHABLE
    return retry.unreached(exc) or retry.Verdict(kind, type(exc).__name__, unopened=True)


def to_cloud_error(exc: BaseException, what: str, credentials: str | None = None) -> CloudError:
    """The CloudError for a botocore exception no caller expected: names the request and
    the AWS code; for auth errors, which credentials were refused."""
    from botocore import exceptions as bexc

    error_code = code(exc)
    if error_code in AUTH_CODES:
        return CloudError(
            f"{what}: AWS refused the credentials ({summary(exc)}); credentials used: {credentials or 'unknown'}. "
            "Check access_key_id/secret_access_key/session_token (or the environment/profile) and the region."
        )
    if error_code in PERMISSION_CODES:
        return CloudError(
            f"{what}: not allowed ({error_code}) for {credentials or 'these credentials'}: {message(exc)}"
        )
    if error_code in THROTTLE_CODES:
        return CloudError(
            f"{what}: AWS kept throttling ({error_code}) beyond retry_budget_seconds/max_retries; "
            "raise them or run fewer parallel calls",
            ok_to_retry=True,
        )
    if error_code is not None:
        return CloudError(f"{what} failed: {summary(exc)}")
    if isinstance(exc, bexc.NoCredentialsError):
        return CloudError(
            f"{what}: no AWS credentials found ({credentials or 'credentials_source env_or_profile'}): set "
            "credentials_source static with access_key_id and secret_access_key, or provide an instance profile"
        )
    if isinstance(exc, bexc.EndpointConnectionError):
        # (requests go through Aws.retrying, which names the endpoint's own setting; this is
        # for what botocore sends elsewhere.) An endpoint written with user:password@ shows neither.
        text = re.sub(r"//[^/@\s\"']*@", "//",
                      f"cannot reach {getattr(exc, 'kwargs', {}).get('endpoint_url', 'the endpoint')}: {exc}")
        return CloudError(f"{what}: {text}; check region and the *_endpoint properties")
    if isinstance(exc, bexc.BotoCoreError):
        return CloudError(f"{what}: {type(exc).__name__}: {exc}")
    return CloudError(f"{what}: unexpected {type(exc).__name__}: {exc}")
