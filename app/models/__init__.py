"""SQLAlchemy tables. Import from here: every model is registered on `Base.metadata` for Alembic."""

from app.models.base import Base, UTCDateTime, utcnow
from app.models.classroom import MEMBER_ROLES, REVEAL_KINDS, Deadline, Reveal, Section, SectionMember
from app.models.comment import Comment, CommentReport
from app.models.lti import (
    LtiContext,
    LtiGrade,
    LtiIdentity,
    LtiKey,
    LtiLineItem,
    LtiLogin,
    LtiMember,
    LtiPlatform,
)
from app.models.password_reset import PasswordReset
from app.models.progress import ExerciseProgress, Learner, LessonRead
from app.models.regrade import REGRADE_STATUSES, Regrade, SubmissionVerdict
from app.models.session import UserSession
from app.models.submission import FINAL_STATUSES, STATUSES, Submission
from app.models.user import ROLES, User

__all__ = [
    "Base",
    "UTCDateTime",
    "utcnow",
    "User",
    "UserSession",
    "ROLES",
    "Learner",
    "LessonRead",
    "ExerciseProgress",
    "Submission",
    "STATUSES",
    "FINAL_STATUSES",
    "Comment",
    "PasswordReset",
    "CommentReport",
    "Regrade",
    "REGRADE_STATUSES",
    "SubmissionVerdict",
    "Reveal",
    "REVEAL_KINDS",
    "Section",
    "SectionMember",
    "MEMBER_ROLES",
    "Deadline",
    "LtiPlatform",
    "LtiKey",
    "LtiLogin",
    "LtiContext",
    "LtiMember",
    "LtiIdentity",
    "LtiLineItem",
    "LtiGrade",
]
