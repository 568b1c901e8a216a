"""Sign up, log in, log out: the JSON API (`/api/auth/...`, `/api/me`) and the plain HTML forms beside it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse
from pydantic import AfterValidator, BaseModel, Field, field_validator
from sqlalchemy.orm import Session

from app.accounts import users as accounts
from app.core.errors import Refusal
from app.learning.progress import merge_learners
from app.models import User
from app.web.deps import LearnerId, OptionalUser, SessionDep, rate_limit
from app.web.middleware.identity import sign_in, sign_out
from app.web.templating import render

router = APIRouter()

LoginLimit = Depends(rate_limit("login_rate_limit", "login", what="log-in attempts from your address"))
SignupLimit = Depends(rate_limit("signup_rate_limit", "signup", what="sign-ups from your address"))
BAD_LOGIN = "Email or password is incorrect."
# characters; argon2 hashes any length, but a megabyte "password" is only a way to burn our CPU
PASSWORD_MIN, PASSWORD_MAX = 8, 1024


def _display_name(value: str) -> str:
    if not value.strip():
        raise ValueError("the display name is empty")
    if any(ord(c) < 32 for c in value):
        raise ValueError("the display name contains control characters")
    return value


# what _display_name accepts, documented in the schema so API clients (and the fuzzer) know it; the validator
# enforces it, with messages a person can act on
DISPLAY_NAME_PATTERN = r"^[^\x00-\x1f]*[^\x00-\x1f\s][^\x00-\x1f]*$"
DisplayName = Annotated[str, Field(min_length=1, max_length=80, description="Shown beside your comments.",
                                   json_schema_extra={"pattern": DISPLAY_NAME_PATTERN}),
                        AfterValidator(_display_name)]  # fmt: skip
NewPassword = Annotated[str, Field(min_length=PASSWORD_MIN, max_length=PASSWORD_MAX)]
Password = Annotated[str, Field(max_length=PASSWORD_MAX)]


class SignupIn(BaseModel):
    display_name: DisplayName
    email: str = Field(max_length=254)
    password: NewPassword

    @field_validator("email")
    @classmethod
    def email_shape(cls, value: str) -> str:
        if not accounts.EMAIL_RE.match(value.strip()):
            raise ValueError("this does not look like an email address (name@example.org)")
        return value


class LoginIn(BaseModel):
    email: str = Field(max_length=254)
    password: Password


class UserOut(BaseModel):
    id: int
    display_name: str
    email: str
    role: str
    learner_id: str

    @classmethod
    def of(cls, user: User) -> "UserOut":
        return cls(
            id=user.id, display_name=user.display_name, email=user.email, role=user.role, learner_id=user.learner_id
        )


class SignedIn(BaseModel):
    user: UserOut
    csrf_token: str = Field(description="The session's new CSRF token (it changes on log-in and log-out).")


class CsrfOut(BaseModel):
    csrf_token: str


class MeOut(BaseModel):
    user: UserOut | None
    learner_id: str


# --- the work, shared by the API and the forms --------------------------------------------------------------


def _signup(request: Request, session: Session, data: SignupIn, anonymous_id: str) -> User:
    try:
        user = accounts.create_user(
            session, email=data.email, password=data.password, display_name=data.display_name
        )
    except accounts.EmailTaken:
        raise HTTPException(409, "An account with this email already exists; log in instead.") from None
    merge_learners(session, source_id=anonymous_id, target_id=user.learner_id)
    sign_in(request, user, session=session)
    session.commit()
    return user


def _login(request: Request, session: Session, data: LoginIn, learner: str) -> User:
    user = accounts.authenticate(session, email=data.email, password=data.password)
    if user is None:
        raise HTTPException(401, BAD_LOGIN)
    if request.state.user is None:  # only an anonymous visitor's progress moves into the account
        merge_learners(session, source_id=learner, target_id=user.learner_id)
    sign_in(request, user, session=session)
    session.commit()
    return user


# --- JSON API -----------------------------------------------------------------------------------------------


@router.post("/api/auth/signup", status_code=201, response_model=SignedIn, tags=["auth"],
             responses={409: {"description": "Email taken"}, 429: {"description": "Too many sign-ups"}},
             dependencies=[SignupLimit])  # fmt: skip
def api_signup(data: SignupIn, request: Request, session: SessionDep, learner: LearnerId) -> SignedIn:
    """Create an account, sign in, and move this visitor's anonymous progress into it."""
    user = _signup(request, session, data, learner)
    return SignedIn(user=UserOut.of(user), csrf_token=request.session["csrf"])


@router.post("/api/auth/login", response_model=SignedIn, tags=["auth"],
             responses={401: {"description": "Wrong email or password"}, 429: {"description": "Too many tries"}},
             dependencies=[LoginLimit])  # fmt: skip
def api_login(data: LoginIn, request: Request, session: SessionDep, learner: LearnerId) -> SignedIn:
    """Sign in; an anonymous visitor's progress merges into the account."""
    user = _login(request, session, data, learner)
    return SignedIn(user=UserOut.of(user), csrf_token=request.session["csrf"])


@router.post("/api/auth/logout", response_model=CsrfOut, tags=["auth"])
def api_logout(request: Request, session: SessionDep) -> CsrfOut:
    """Sign out, ending the session on the server too; the browser continues as a new anonymous learner."""
    sign_out(request, session=session)
    session.commit()
    return CsrfOut(csrf_token=request.session["csrf"])


@router.get("/api/auth/csrf", response_model=CsrfOut, tags=["auth"])
async def api_csrf(request: Request) -> CsrfOut:
    """Return this session's CSRF token, to send as the X-CSRF-Token header on POST, PATCH and DELETE.

    async: it reads the session the middleware loaded; as a plain `def`, FastAPI ran it and then its response
    model's check in the thread pool, two hops out of the event loop and back for nothing that waits."""
    return CsrfOut(csrf_token=request.session["csrf"])


@router.get("/api/me", response_model=MeOut, tags=["auth"])
def api_me(user: OptionalUser, learner: LearnerId) -> MeOut:
    """Say who is signed in (user is null for an anonymous visitor) and this visitor's learner id."""
    return MeOut(user=UserOut.of(user) if user else None, learner_id=learner)


# --- HTML forms (work without JavaScript) -------------------------------------------------------------------


def _safe_next(target: str | None) -> str:
    """Return a local path to go to after the form; never another site."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def _page(request: Request, name: str, status: int = 200, **ctx):
    return render(request, name, status_code=status, **ctx)


def form_errors(exc: Exception) -> list[str]:
    """Turn a refusal or a pydantic ValidationError into lines a person can act on."""
    if isinstance(exc, HTTPException):
        return [str(exc.detail)]
    if isinstance(exc, Refusal):
        return [exc.message]
    errors = exc.errors()  # type: ignore[attr-defined]
    return [_field_error(e) for e in errors]


def _field_error(error: dict) -> str:
    """'Email: this does not look like an email address.' for pydantic's 'email: Value error, this does not ...'."""
    field = str(error["loc"][-1]) if error.get("loc") else "form"
    message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    label = field.replace("_", " ").capitalize()
    return f"{label}: {message}{'' if message.endswith(('.', '!', '?')) else '.'}"


@router.get("/login", include_in_schema=False)
def login_page(request: Request, next: str | None = None):
    return _page(request, "auth/login.html", next=_safe_next(next), errors=[], email="")


@router.post("/login", include_in_schema=False, dependencies=[LoginLimit])
def login_form(
    request: Request,
    session: SessionDep,
    learner: LearnerId,
    email: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
):
    try:
        _login(request, session, LoginIn(email=email, password=password), learner)
    except (HTTPException, ValueError) as exc:
        status = exc.status_code if isinstance(exc, HTTPException) else 400
        return _page(request, "auth/login.html", status, next=_safe_next(next), errors=form_errors(exc), email=email)
    return RedirectResponse(_safe_next(next), status_code=303)


@router.get("/signup", include_in_schema=False)
def signup_page(request: Request, next: str | None = None):
    return _page(request, "auth/signup.html", next=_safe_next(next), errors=[], email="", display_name="")


@router.post("/signup", include_in_schema=False, dependencies=[SignupLimit])
def signup_form(
    request: Request,
    session: SessionDep,
    learner: LearnerId,
    display_name: Annotated[str, Form()] = "",
    email: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
):
    try:
        data = SignupIn(display_name=display_name, email=email, password=password)
        _signup(request, session, data, learner)
    except (HTTPException, ValueError) as exc:
        status = exc.status_code if isinstance(exc, HTTPException) else 400
        ctx = {"next": _safe_next(next), "errors": form_errors(exc), "email": email, "display_name": display_name}
        return _page(request, "auth/signup.html", status, **ctx)
    return RedirectResponse(_safe_next(next), status_code=303)


@router.post("/logout", include_in_schema=False)
def logout_form(request: Request, session: SessionDep):
    sign_out(request, session=session)
    session.commit()
    return RedirectResponse("/", status_code=303)
