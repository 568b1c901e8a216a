"""The one refusal type the layers below the web share, so the web answers each the same way."""

from __future__ import annotations


class Refusal(Exception):
    """A request the app will not carry out: the HTTP status it stands for and a message a person can act on.

    Raised by plain functions that know nothing of HTTP (comments, submissions); `create_app` registers one
    handler per subclass that answers it as the HTTPException with that status would be answered.
    """

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
