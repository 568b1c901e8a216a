"""Starlette's session middleware with a quicker signer: the same cookie, signed and checked the same way.

Every first visit gets a session (a learner id and a CSRF token) and so a freshly signed cookie: itsdangerous
derives the HMAC key from the secret again for every signature and builds the MAC through `hmac.new`, which was
a fifth of what a cached lesson page cost to serve. `QuickSigner` derives its key once and signs with the
one-shot `hmac.digest` (OpenSSL's HMAC): the bytes are identical, so cookies signed before it still verify.
"""

from __future__ import annotations

import hashlib
import hmac

import itsdangerous
from itsdangerous.signer import HMACAlgorithm
from starlette.middleware import sessions


class _OneShotHMAC(HMACAlgorithm):
    """HMAC-SHA1 (itsdangerous' default) through `hmac.digest`, which returns what `hmac.new(...).digest()` does."""

    def __init__(self) -> None:
        super().__init__(hashlib.sha1)

    def get_signature(self, key: bytes, value: bytes) -> bytes:
        return hmac.digest(key, value, "sha1")


class QuickSigner(itsdangerous.TimestampSigner):
    """itsdangerous' TimestampSigner with its derived key kept (one secret, no rotation: the session's case)."""

    def __init__(self, secret_key: str) -> None:
        super().__init__(secret_key, algorithm=_OneShotHMAC())
        self._key = super().derive_key()

    def derive_key(self, secret_key: str | bytes | None = None) -> bytes:
        return self._key if secret_key is None or secret_key == self.secret_keys[-1] else super().derive_key(secret_key)


class SessionMiddleware(sessions.SessionMiddleware):
    """`starlette.middleware.sessions.SessionMiddleware`, signing with QuickSigner."""

    def __init__(self, app, secret_key, **options) -> None:
        super().__init__(app, secret_key, **options)
        self.signer = QuickSigner(str(secret_key))
