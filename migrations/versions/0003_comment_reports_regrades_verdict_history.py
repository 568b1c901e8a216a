"""Comment reports, regrades, and the verdict history of stored submissions.

comment_reports: one report per person and comment, open until an instructor reviews the comment.
regrades: one row per regrade of an exercise (its progress and what it changed).
submission_verdicts: every verdict a submission has had (revision 0: its run's; 1, 2, ...: regrades), so a
regrade never overwrites the verdict a learner saw. Rows for revision 0 are filled in lazily by the dashboard.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 18:46:26.960223

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('regrades',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('exercise_slug', sa.String(length=100), nullable=False),
    sa.Column('since', sa.DateTime(timezone=True), nullable=True),
    sa.Column('requested_by', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('total', sa.Integer(), nullable=False),
    sa.Column('done', sa.Integer(), nullable=False),
    sa.Column('changed', sa.Integer(), nullable=False),
    sa.Column('now_passing', sa.Integer(), nullable=False),
    sa.Column('now_failing', sa.Integer(), nullable=False),
    sa.Column('errors', sa.Integer(), nullable=False),
    sa.Column('passes_added', sa.Integer(), nullable=False),
    sa.Column('passes_kept', sa.Integer(), nullable=False),
    sa.Column('message', sa.Text(), nullable=True),
    sa.CheckConstraint("status IN ('running', 'finished', 'failed', 'interrupted')", name=op.f('ck_regrades_status')),
    sa.ForeignKeyConstraint(['requested_by'], ['users.id'], name=op.f('fk_regrades_requested_by_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_regrades'))
    )
    with op.batch_alter_table('regrades', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_regrades_exercise_slug_started_at'), ['exercise_slug', 'started_at'], unique=False)

    op.create_table('comment_reports',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('comment_id', sa.Integer(), nullable=False),
    sa.Column('reporter_id', sa.Integer(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('resolution', sa.String(length=16), nullable=True),
    sa.ForeignKeyConstraint(['comment_id'], ['comments.id'], name=op.f('fk_comment_reports_comment_id_comments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['reporter_id'], ['users.id'], name=op.f('fk_comment_reports_reporter_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_comment_reports')),
    sa.UniqueConstraint('comment_id', 'reporter_id', name=op.f('uq_comment_reports_comment_id_reporter_id'))
    )
    with op.batch_alter_table('comment_reports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_comment_reports_resolved_at_comment_id'), ['resolved_at', 'comment_id'], unique=False)

    op.create_table('submission_verdicts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('submission_id', sa.String(length=32), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('regrade_id', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('first_failed_check', sa.String(length=100), nullable=True),
    sa.Column('error_line', sa.String(length=300), nullable=True),
    sa.Column('verdict', sa.JSON(), nullable=True),
    sa.Column('graded_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("status IN ('queued', 'running', 'passed', 'failed', 'error', 'timeout', 'rejected')", name=op.f('ck_submission_verdicts_status')),
    sa.ForeignKeyConstraint(['regrade_id'], ['regrades.id'], name=op.f('fk_submission_verdicts_regrade_id_regrades'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_submission_verdicts_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_submission_verdicts')),
    sa.UniqueConstraint('submission_id', 'revision', name=op.f('uq_submission_verdicts_submission_id_revision'))
    )
    with op.batch_alter_table('submission_verdicts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_submission_verdicts_regrade_id'), ['regrade_id'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('submission_verdicts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_submission_verdicts_regrade_id'))

    op.drop_table('submission_verdicts')
    with op.batch_alter_table('comment_reports', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_comment_reports_resolved_at_comment_id'))

    op.drop_table('comment_reports')
    with op.batch_alter_table('regrades', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_regrades_exercise_slug_started_at'))

    op.drop_table('regrades')
