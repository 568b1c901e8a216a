"""Password hashing (argon2) and CSRF synchronizer tokens. No HTTP here: the web layer calls these."""

from __future__ import annotations

import hmac
import secrets
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()  # argon2id with the library's defaults (RFC 9106 low-memory profile)

# bytes of randomness in a CSRF token and in an anonymous learner id
TOKEN_BYTES = 32
LEARNER_ID_BYTES = 16


def hash_password(password: str) -> str:
    """Hash a password for storage."""
    return _hasher.hash(password)


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    # A real hash of a random password: checking an unknown email against it costs what a real check costs.
    return _hasher.hash(secrets.token_urlsafe(16))


def verify_password(password_hash: str | None, password: str) -> bool:
    """Check a password against a stored hash; with no hash (unknown email), burn the same time and say no."""
    if password_hash is None:
        try:
            _hasher.verify(_dummy_hash(), password)
        except VerificationError:
            pass
        return False
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """Say whether a stored hash uses weaker parameters than today's and should be replaced on log-in."""
    return _hasher.check_needs_rehash(password_hash)


def new_csrf_token() -> str:
    """Return a fresh random CSRF token."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def tokens_match(expected: str | None, given: str | None) -> bool:
    """Compare a session's token with a submitted one in constant time."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def new_learner_id() -> str:
    """Return a random learner id (32 hex characters) for an anonymous visitor or a new account."""
    return secrets.token_hex(LEARNER_ID_BYTES)
