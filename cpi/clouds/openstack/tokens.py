"""A Keystone token kept between CPI calls (`token_cache`), so a call that finds a valid one
skips the token request: the director runs one process per call, and a token request is
the slowest request of most calls (Keystone checks the password hash each time).

The token is a bearer credential, so it is kept like the password next to it: one file
per identity, mode 0600, in a directory mode 0700 owned by the CPI's user, and refused
otherwise. The file name is an HMAC (keyed by a random salt kept in that directory) of the
identity *and its secret*: a config with another password never finds this token, so a
wrong password still fails. An expired or revoked token is replaced as keystoneauth
re-authenticates (it does so before expiry, and once on a 401).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
from pathlib import Path

from .props import OpenStackProperties

log = logging.getLogger("cpi.clouds.openstack")

SALT = "salt"


def default_directory() -> Path:
    return Path.home() / ".cache" / "bosh-cpi" / "openstack-tokens"


class TokenCache:
    def __init__(self, directory: Path, properties: OpenStackProperties):
        self.directory = directory
        self.properties = properties
        self._path: Path | None = None
        self._loaded: str | None = None

    def _private_dir(self) -> bool:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.directory.stat()
        except OSError as exc:
            log.info("token cache %s unusable (%s): authenticating every call", self.directory, exc.strerror)
            return False
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            log.warning("token cache %s is not private to this user (owner %d, mode %o): not using it",
                        self.directory, info.st_uid, stat.S_IMODE(info.st_mode))
            return False
        return True

    def _salt(self) -> bytes:
        path = self.directory / SALT
        try:
            return path.read_bytes()
        except FileNotFoundError:
            salt = secrets.token_bytes(32)
            _write_private(path, salt)
            return path.read_bytes()  # another process may have won the race: use what is there

    def path(self) -> Path | None:
        if self._path is None:
            if not self._private_dir():
                return None
            p = self.properties
            secret = p.api_key or p.application_credential_secret
            identity = json.dumps([
                p.auth_url, p.username, p.user_domain_name or p.domain, p.project, p.project_id,
                p.project_domain_name or p.domain, p.application_credential_id,
                secret.get_secret_value() if secret else None,
            ])
            digest = hmac.new(self._salt(), identity.encode(), hashlib.sha256).hexdigest()
            self._path = self.directory / f"{digest[:40]}.json"
        return self._path

    def load(self, plugin) -> bool:
        """Install a cached token in the keystoneauth plugin; True when there was one."""
        path = self.path()
        if path is None:
            return False
        try:
            info = path.stat()
            if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
                return False
            state = path.read_text()
            plugin.set_auth_state(state)
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.info("cached token unreadable (%s): authenticating", type(exc).__name__)
            plugin.set_auth_state(None)
            return False
        self._loaded = state
        return True

    def save(self, plugin) -> None:
        """Keep the plugin's token if it is not the one loaded."""
        path = self.path()
        if path is None:
            return
        try:
            state = plugin.get_auth_state()
        except (ValueError, TypeError, KeyError):
            return
        if not state or state == self._loaded:
            return
        try:
            _write_private(path, state.encode())
        except OSError as exc:
            log.info("could not keep the token (%s)", exc.strerror)
            return
        self._loaded = state


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass  # never created or already renamed
        raise
