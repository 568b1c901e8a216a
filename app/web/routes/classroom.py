"""A class, for instructors and teaching assistants: find a learner, their page (progress, attempts with code and
checks, late flags, hints and solution looks), and learners' last code as a zip for a similarity check. Thin
routes over `app.learning.learners`.

Every route here needs an instructor or a teaching assistant (the router's dependency: a visitor 401, a learner
403), and a TA sees and acts for the learners of their sections only: `visible_learners` narrows every list and
export, and a TA asking for another section's learner gets 403, checked before anything of that learner is read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response

from app.learning import learners, sections
from app.models import User
from app.web.deps import CourseDep, SessionDep, StaffUser, staff
from app.web.templating import render

router = APIRouter(dependencies=[Depends(staff)], tags=["classroom"])

LearnerIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{1,32}$")]
SearchQuery = Annotated[str, Query(max_length=100)]
ACCESS = {401: {"description": "Not signed in"},
          403: {"description": "Not an instructor or teaching assistant, or a learner outside the TA's sections"}}


def allowed_learner(learner_id: LearnerIdPath, session: SessionDep, user: StaffUser) -> str:
    """Return the learner id in the path if this instructor or TA may see that learner; 403 for a TA otherwise."""
    if not sections.may_see(session, user, learner_id):
        raise HTTPException(403, "This learner is not in a section you assist; ask an instructor to add them "
                                 "(`course users import roster.csv`) if they should be.")
    return learner_id


AllowedLearner = Annotated[str, Depends(allowed_learner)]


def _visible(user: User):
    return sections.visible_learners(user)


@router.get("/instructor/learners", include_in_schema=False)
def learners_page(request: Request, session: SessionDep, user: StaffUser, q: SearchQuery = ""):
    """Find a learner by name, email or id (a TA: among their sections' learners)."""
    return render(request, "instructor/learners.html", q=q,
                  found=learners.search(session, query=q, visible=_visible(user)),
                  sections=sections.all_sections(session) if user.is_instructor else None)  # fmt: skip


@router.get("/api/instructor/learners", responses=ACCESS)
def api_learners(session: SessionDep, user: StaffUser, q: SearchQuery = "") -> list[dict]:
    """Return the learners whose name or email contains `q` or whose id starts with it (50 at most)."""
    return [{"learner_id": r.learner_id, "name": r.name, "email": r.email, "sections": r.sections}
            for r in learners.search(session, query=q, visible=_visible(user))]


def _view(session, learner_id: str, course, q: str):
    view = learners.learner_view(session, learner_id=learner_id, course=course, code_query=q)
    if view is None:
        raise HTTPException(404, f"There is no learner {learner_id}.")
    return view


@router.get("/instructor/learners/{learner_id}", include_in_schema=False)
def learner_page(request: Request, learner_id: AllowedLearner, session: SessionDep, course: CourseDep,
                 q: SearchQuery = ""):  # fmt: skip
    """One learner: progress per exercise, every attempt with its code and checks, late flags, hints and looks."""
    return render(request, "instructor/learner.html", view=_view(session, learner_id, course, q), q=q,
                  reasons=learners.REASONS)


@router.get("/api/instructor/learners/{learner_id}", responses={**ACCESS, 404: {"description": "No such learner"}})
def api_learner(learner_id: AllowedLearner, session: SessionDep, course: CourseDep, q: SearchQuery = "") -> dict:
    """Return one learner's page as JSON; with `q`, only attempts whose code contains it."""
    return _view(session, learner_id, course, q).as_json()


@router.get("/api/instructor/code.zip", response_class=Response,
            responses={**ACCESS, 200: {"content": {"application/zip": {}},
                                       "description": "EXERCISE/LEARNER/main.py per learner, base/EXERCISE/main.py"},
                       404: {"description": "No such exercise"}})  # fmt: skip
def api_code_zip(session: SessionDep, user: StaffUser, course: CourseDep,
                 exercise: Annotated[str | None, Query(max_length=100)] = None) -> Response:  # fmt: skip
    """Export each learner's last submission per exercise (or of one exercise) as a zip for a similarity checker."""
    if exercise is not None and exercise not in course.exercises:
        raise HTTPException(404, f"There is no exercise {exercise!r}; the course has: "
                                 f"{', '.join(sorted(course.exercises))}.")
    body = learners.code_zip(session, course=course, exercise_slug=exercise, visible=_visible(user))
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    return Response(body, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="code-{exercise or "all"}-{stamp}.zip"'})
