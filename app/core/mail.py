"""Sending one plain-text mail through the SMTP server named by COURSE_SMTP_URL (the standard library's smtplib)."""

from __future__ import annotations

import smtplib
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

SCHEMES = ("smtp", "smtps")
DEFAULT_PORTS = {"smtp": 25, "smtps": 465}
# seconds to wait for the mail server at each step; a reset mail is not worth holding a worker thread longer
TIMEOUT_S = 10


def check_smtp_url(url: str) -> str:
    """Return the URL if it names an SMTP server (smtp://[user:password@]host[:port] or smtps://...)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ValueError(f"COURSE_SMTP_URL must look like smtp://[user:password@]host[:port] or smtps://..., "
                         f"not {parts.scheme or 'no scheme'}://{parts.hostname or '(no host)'}")
    return url


def send_mail(url: str, *, sender: str, to: str, subject: str, body: str) -> None:
    """Send one plain-text mail; STARTTLS when an smtp:// server offers it, log in when the URL has a user."""
    parts = urlsplit(check_smtp_url(url))
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message.set_content(body)
    client = smtplib.SMTP_SSL if parts.scheme == "smtps" else smtplib.SMTP
    with client(parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme], timeout=TIMEOUT_S) as smtp:
        smtp.ehlo()
        if parts.scheme == "smtp" and smtp.has_extn("starttls"):
            smtp.starttls()
            smtp.ehlo()
        if parts.username:
            smtp.login(unquote(parts.username), unquote(parts.password or ""))
        smtp.send_message(message)


__all__ = ["check_smtp_url", "send_mail", "TIMEOUT_S"]
