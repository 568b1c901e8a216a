"""A forgotten password: `/forgot` (mails a reset link when COURSE_SMTP_URL is set) and `/reset/{token}`.

/forgot answers every address the same way, known or not, and does the lookup and the mailing after the answer
has gone (a background task), so neither the words nor the time tell whether an account exists.
"""

from __future__ import annotations

import logging
import smtplib
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Request
from fastapi.responses import RedirectResponse
from limits import parse
from limits.strategies import FixedWindowRateLimiter
from pydantic import TypeAdapter, ValidationError

from app.accounts import password_reset
from app.accounts import users as accounts
from app.core.config import Settings
from app.core.db import Database
from app.core.errors import Refusal
from app.web.deps import SessionDep, rate_limit
from app.web.middleware.identity import sign_in
from app.web.routes.auth import NewPassword, form_errors
from app.web.templating import render

log = logging.getLogger(__name__)
router = APIRouter()
NEW_PASSWORD = TypeAdapter(NewPassword)
EMAIL_MAX = 254  # characters, as at sign-up
ForgotLimit = Depends(rate_limit("forgot_rate_limit", "forgot", what="password reset requests from your address"))


def _mail_link(limiter: FixedWindowRateLimiter, db: Database, settings: Settings, email: str) -> None:
    """Mail a reset link if the account exists and has not had too many mails lately; log, never raise."""
    if not limiter.hit(parse(settings.forgot_mail_rate_limit), "forgot-mail", accounts.normalize_email(email)):
        log.info("password reset mail not sent: COURSE_FORGOT_MAIL_RATE_LIMIT reached for one address")
        return
    try:
        password_reset.mail_reset_link(db, settings, email)
    except (OSError, smtplib.SMTPException) as exc:  # the mail server is down or refused: the operator must know
        log.warning("password reset mail could not be sent through COURSE_SMTP_URL: %s", exc)


@router.get("/forgot", include_in_schema=False)
def forgot_page(request: Request):
    settings: Settings = request.app.state.settings
    if not settings.smtp_url:  # the learner is told to ask a person; that person finds the command here
        log.info("someone opened /forgot, and COURSE_SMTP_URL is empty, so it asks them to request a link from you: "
                 "make one with `course users reset-link EMAIL` (or set COURSE_SMTP_URL to mail it)")
    return render(request, "auth/forgot.html", sent=False, mail_enabled=bool(settings.smtp_url),
                  minutes=max(1, settings.reset_link_ttl_s // 60))  # fmt: skip


@router.post("/forgot", include_in_schema=False, dependencies=[ForgotLimit])
def forgot_form(request: Request, tasks: BackgroundTasks, email: Annotated[str, Form()] = ""):
    settings: Settings = request.app.state.settings
    # an address that cannot be an account's gets the same page, and nothing is looked up
    if settings.smtp_url and len(email) <= EMAIL_MAX and accounts.EMAIL_RE.match(email.strip()):
        tasks.add_task(_mail_link, request.app.state.limiter, request.app.state.db, settings, email)
    return render(request, "auth/forgot.html", sent=True, mail_enabled=bool(settings.smtp_url),
                  minutes=max(1, settings.reset_link_ttl_s // 60))  # fmt: skip


def _reset_page(request: Request, token: str, status: int = 200, errors: list[str] | None = None):
    return render(request, "auth/reset.html", status_code=status, token=token, errors=errors or [],
                  usable=status != 410)  # fmt: skip


@router.get("/reset/{token}", include_in_schema=False)
def reset_page(token: str, request: Request, session: SessionDep):
    try:
        password_reset.valid_reset(session, token=token)
    except password_reset.ResetLinkInvalid as exc:
        return _reset_page(request, token, exc.status_code, form_errors(exc))
    return _reset_page(request, token)


@router.post("/reset/{token}", include_in_schema=False)
def reset_form(token: str, request: Request, session: SessionDep, new_password: Annotated[str, Form()] = ""):
    try:
        user = password_reset.redeem(session, token=token, new_password=NEW_PASSWORD.validate_python(new_password))
    except (Refusal, ValidationError) as exc:
        return _reset_page(request, token, getattr(exc, "status_code", 400), form_errors(exc))
    sign_in(request, user, session=session)  # the link proved the mailbox; every other session has ended
    session.commit()
    return RedirectResponse("/account?done=reset", status_code=303)


