"""The tool's own RSA keys: the newest signs what the course sends a platform (the client assertion of the token
request, the deep-linking response); /lti/jwks publishes it and the one before it.

`course lti rotate-key` makes a new key: from then on it signs, while the previous one stays published for what
a platform checks late (a deep-linking response still in a browser) until the next rotation drops it. A platform
that fetches /lti/jwks (Canvas and Moodle do, given its URL) needs nothing else.
"""

from __future__ import annotations

import secrets

from joserfc.jwk import RSAKey
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models.lti import LtiKey

# published keys: the signing one and the one it replaced
PUBLISHED = 2
# bits; RSA 2048 is what LTI 1.3's security framework requires at least (RS256)
KEY_BITS = 2048


def _newest(session: Session, limit: int) -> list[LtiKey]:
    return list(session.scalars(select(LtiKey).order_by(LtiKey.created_at.desc(), LtiKey.kid).limit(limit)))


def rotate(session: Session) -> LtiKey:
    """Make a new signing key (the caller commits); the one before it stays published, older ones are dropped."""
    kid = secrets.token_hex(8)
    key = RSAKey.generate_key(KEY_BITS, parameters={"kid": kid, "use": "sig", "alg": "RS256"})
    row = LtiKey(kid=kid, private_jwk=key.as_dict(private=True))
    session.add(row)
    session.flush()
    for old in _newest(session, 100)[PUBLISHED:]:
        session.delete(old)
    return row


def signing_key(session: Session) -> RSAKey:
    """Return the key that signs now, making the first one if there is none (the caller commits)."""
    newest = _newest(session, 1)
    row = newest[0] if newest else rotate(session)
    return RSAKey.import_key(row.private_jwk)


def public_jwks(session: Session) -> dict:
    """Return the published keys as a JWK Set (public halves only)."""
    rows = _newest(session, PUBLISHED)
    return {"keys": [RSAKey.import_key(row.private_jwk).as_dict(private=False) for row in rows]}
