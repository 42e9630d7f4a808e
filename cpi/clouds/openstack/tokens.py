"""A Keystone token kept between CPI calls (`token_cache`), so a call that finds a valid one
skips the token request: the director runs one process per call, and a token request is
the slowest request of most calls (Keystone checks the password hash each time).

The token is a bearer credential, so it is kept like the password next to it: one file
per identity, mode 0600, in a directory mode 0700 owned by the CPI's user (cpi.private: a
directory another user owns or can write to, or a link, is refused with an error naming
`token_cache_dir`; files are opened without following links). The file name is an HMAC
(keyed by a random salt kept in that directory) of the identity *and its secret*: a
config with another password never finds this token, so a
wrong password still fails. An expired or revoked token is replaced as keystoneauth
re-authenticates (it does so before expiry, and once on a 401).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from cpi import private
from cpi.errors import CpiError

from .props import OpenStackProperties

log = logging.getLogger("cpi.clouds.openstack")

SALT = "salt"
#: The setting that chooses the directory, as errors name it.
SETTING = "cloud.properties.openstack.token_cache_dir"


def default_directory() -> Path:
    return private.cache_dir("openstack-tokens", SETTING)


class TokenCache:
    def __init__(self, directory: Path, properties: OpenStackProperties):
        self.directory = directory
        self.properties = properties
        self._path: Path | None = None
        self._loaded: str | None = None

    def _private_dir(self) -> bool:
        """Whether the directory can be used. One that anyone else could tamper with is an
        error naming the setting (a planted token or link is an attack, not a cache miss);
        one that cannot be created only costs a token request per call."""
        try:
            private.private_dir(self.directory, SETTING)
        except private.NotPrivate:
            raise
        except CpiError as exc:
            log.info("token cache unusable (%s): authenticating every call", exc)
            return False
        return True

    def _salt(self) -> bytes:
        path = self.directory / SALT
        try:
            return _read_private(path)
        except FileNotFoundError:
            pass
        # the first process to link its salt in wins; the others read the winner's
        tmp = self.directory / f".{SALT}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = private.open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
        return _read_private(path)

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
            try:
                salt = self._salt()
            except OSError as exc:
                log.info("token cache salt unusable (%s): authenticating every call", exc.strerror or exc)
                return None
            digest = hmac.new(salt, identity.encode(), hashlib.sha256).hexdigest()
            self._path = self.directory / f"{digest[:40]}.json"
        return self._path

    def load(self, plugin: Any) -> bool:  # a keystoneauth1 identity plugin (untyped)
        """Install a cached token in the keystoneauth plugin; True when there was one."""
        path = self.path()
        if path is None:
            return False
        try:
            state = _read_private(path).decode()
            plugin.set_auth_state(state)
        except FileNotFoundError:
            return False
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a link (ELOOP), not ours, garbage
            log.info("cached token unreadable (%s): authenticating", type(exc).__name__)
            plugin.set_auth_state(None)
            return False
        self._loaded = state
        return True

    def save(self, plugin: Any) -> None:
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
            private.replace_file(path, state.encode())
        except OSError as exc:
            log.info("could not keep the token (%s)", exc.strerror)
            return
        self._loaded = state


def _read_private(path: Path) -> bytes:
    """A file of this user's, mode 0600 or tighter, read without following a link."""
    fd = private.open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise PermissionError(errno.EPERM, f"{path} is not a private file of this user")
        return handle.read(1 << 20)
