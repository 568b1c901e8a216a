"""The account page (`/account`, plain forms) and its JSON API (`/api/account...`): name, password, sessions,
export and deletion. The work is in app/accounts/users.py and app/accounts/data.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session

from app.accounts import data as account_data
from app.accounts import users as accounts
from app.core.errors import Refusal
from app.models import User
from app.web.deps import CurrentUser, OptionalUser, SessionDep, rate_limit
from app.web.middleware import page_cache
from app.web.middleware.identity import keep_signed_in, sign_out
from app.web.routes.auth import DisplayName, NewPassword, Password, UserOut, form_errors
from app.web.templating import render

router = APIRouter()
ACCOUNT_PAGE = "/account"
# what the page says after a form worked (`/account?done=...`)
NOTICES = {
    "profile": "Your display name is changed.",
    "password": "Your password is changed. Every other browser signed in to this account is logged out.",
    "logout-all": "Every other browser signed in to this account is logged out; this one stays in.",
    "reset": "Your new password is set, and you are logged in. Every other session of this account has ended.",
}


def account_in_session(user: CurrentUser, session: SessionDep) -> User:
    """Return the signed-in user loaded in this request's database session (so changes to it are saved)."""
    return session.get(User, user.id)


Account = Annotated[User, Depends(account_in_session)]
FormText = Annotated[str, Form()]
# the routes that check a password are limited like log-in: a stolen session must not become a password oracle
PasswordLimit = Depends(rate_limit("login_rate_limit", "account-password", what="password checks from your address"))


class ProfileIn(BaseModel):
    display_name: DisplayName


class PasswordIn(BaseModel):
    current_password: Password
    new_password: NewPassword


class DeleteIn(BaseModel):
    password: Password


class AccountOut(BaseModel):
    user: UserOut


class ExportOut(BaseModel):
    format: int
    exported_at: str
    user_id: int
    learner_id: str
    tables: dict[str, list[dict[str, Any]]]
    omitted: dict[str, str]


# --- the work, shared by the API and the forms --------------------------------------------------------------


def _rename(session: Session, me: User, data: ProfileIn) -> User:
    accounts.rename(session, user=me, display_name=data.display_name)
    session.commit()
    page_cache.invalidate()  # cached lesson pages show comment authors' names
    return me


def _change_password(request: Request, session: Session, me: User, data: PasswordIn) -> User:
    accounts.change_password(session, user=me, current_password=data.current_password,
                             new_password=data.new_password)  # fmt: skip
    session.commit()
    keep_signed_in(request, me)
    return me


def _logout_elsewhere(request: Request, session: Session, me: User) -> User:
    accounts.end_sessions(session, user=me)
    session.commit()
    keep_signed_in(request, me)
    return me


def _delete(request: Request, session: Session, me: User, data: DeleteIn) -> None:
    account_data.delete_account(session, user=me, password=data.password)
    session.commit()
    page_cache.invalidate()  # the account's comments now show "deleted user"
    sign_out(request, session=None)  # its server-side sessions went with the account (ON DELETE CASCADE)


# --- JSON API -----------------------------------------------------------------------------------------------

REFUSALS = {401: {"description": "Not signed in"}, 403: {"description": "The password is wrong"},
            429: {"description": "Too many password checks"}}  # fmt: skip


@router.post("/api/account/profile", response_model=AccountOut, tags=["account"], responses={401: REFUSALS[401]})
def api_profile(data: ProfileIn, session: SessionDep, me: Account) -> AccountOut:
    """Change the display name shown beside your comments."""
    return AccountOut(user=UserOut.of(_rename(session, me, data)))


@router.post("/api/account/password", response_model=AccountOut, tags=["account"], responses=REFUSALS,
             dependencies=[PasswordLimit])  # fmt: skip
def api_password(data: PasswordIn, request: Request, session: SessionDep, me: Account) -> AccountOut:
    """Change your password (the current one is asked again); every other session of the account ends."""
    return AccountOut(user=UserOut.of(_change_password(request, session, me, data)))


@router.post("/api/account/logout-all", response_model=AccountOut, tags=["account"], responses={401: REFUSALS[401]})
def api_logout_all(request: Request, session: SessionDep, me: Account) -> AccountOut:
    """Log out every other browser signed in to your account; this one stays signed in."""
    return AccountOut(user=UserOut.of(_logout_elsewhere(request, session, me)))


@router.get("/api/account/export", response_model=ExportOut, tags=["account"], responses={401: REFUSALS[401]})
def api_export(session: SessionDep, me: Account) -> JSONResponse:
    """Download everything stored about you (account, progress, submissions, comments, reset links) as JSON."""
    data = ExportOut(**account_data.export_account(session, user=me)).model_dump(mode="json")
    headers = {"Content-Disposition": f'attachment; filename="course-account-{me.id}.json"'}
    return JSONResponse(data, headers=headers)


@router.delete("/api/account", status_code=204, tags=["account"], responses=REFUSALS, dependencies=[PasswordLimit])
def api_delete(data: DeleteIn, request: Request, session: SessionDep, me: Account) -> Response:
    """Delete your account, progress and submissions (the password is asked again); your comments stay, shown
    as "deleted user". This browser continues as a new anonymous learner."""
    _delete(request, session, me, data)
    return Response(status_code=204)


# --- the page and its forms (work without JavaScript) -------------------------------------------------------


def _to_login() -> RedirectResponse:
    return RedirectResponse(f"/login?next={ACCOUNT_PAGE}", status_code=303)


def _account_page(request: Request, user: User, status: int = 200, errors: list[str] | None = None,
                  form: str | None = None):  # fmt: skip
    notice = NOTICES.get(request.query_params.get("done", "")) if not errors else None
    return render(request, "account/account.html", status_code=status, user=user, errors=errors or [], form=form,
                  notice=notice, mail_enabled=bool(request.app.state.settings.smtp_url))  # fmt: skip


def _form_result(request: Request, user: User, form: str, work):
    """Run one form's work: 303 back to the page with a notice, or the page again saying what went wrong."""
    try:
        work()
    except (Refusal, HTTPException, ValidationError) as exc:
        status = getattr(exc, "status_code", 400)
        return _account_page(request, user, status, errors=form_errors(exc), form=form)
    return RedirectResponse(f"{ACCOUNT_PAGE}?done={form}", status_code=303)


@router.get(ACCOUNT_PAGE, include_in_schema=False)
def account_page(request: Request, user: OptionalUser):
    if user is None:
        return _to_login()
    return _account_page(request, user)


@router.post("/account/profile", include_in_schema=False)
def profile_form(request: Request, session: SessionDep, user: OptionalUser,
                 display_name: FormText = ""):  # fmt: skip
    if user is None:
        return _to_login()
    me = session.get(User, user.id)
    return _form_result(request, me, "profile", lambda: _rename(session, me, ProfileIn(display_name=display_name)))


@router.post("/account/password", include_in_schema=False, dependencies=[PasswordLimit])
def password_form(request: Request, session: SessionDep, user: OptionalUser, current_password: FormText = "",
                  new_password: FormText = ""):  # fmt: skip
    if user is None:
        return _to_login()
    me = session.get(User, user.id)
    data = lambda: PasswordIn(current_password=current_password, new_password=new_password)  # noqa: E731
    return _form_result(request, me, "password", lambda: _change_password(request, session, me, data()))


@router.post("/account/logout-all", include_in_schema=False)
def logout_all_form(request: Request, session: SessionDep, user: OptionalUser):
    if user is None:
        return _to_login()
    me = session.get(User, user.id)
    return _form_result(request, me, "logout-all", lambda: _logout_elsewhere(request, session, me))


@router.post("/account/delete", include_in_schema=False, dependencies=[PasswordLimit])
def delete_form(request: Request, session: SessionDep, user: OptionalUser, password: FormText = ""):
    if user is None:
        return _to_login()
    me = session.get(User, user.id)
    result = _form_result(request, me, "delete", lambda: _delete(request, session, me, DeleteIn(password=password)))
    if isinstance(result, RedirectResponse):  # deleted: there is no account page to go back to
        return render(request, "account/deleted.html")
    return result
