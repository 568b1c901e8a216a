"""Accounts, learners and progress, submissions, comments.

Revision ID: 0001
Revises:
Create Date: 2026-12-02 09:56:04.649567

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0001'
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('learners',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_activity_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_learners'))
    )
    op.create_table('exercise_progress',
    sa.Column('learner_id', sa.String(length=32), nullable=False),
    sa.Column('exercise_slug', sa.String(length=100), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('first_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('passed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['learner_id'], ['learners.id'], name=op.f('fk_exercise_progress_learner_id_learners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('learner_id', 'exercise_slug', name=op.f('pk_exercise_progress'))
    )
    op.create_table('lesson_reads',
    sa.Column('learner_id', sa.String(length=32), nullable=False),
    sa.Column('lesson_slug', sa.String(length=100), nullable=False),
    sa.Column('read_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['learner_id'], ['learners.id'], name=op.f('fk_lesson_reads_learner_id_learners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('learner_id', 'lesson_slug', name=op.f('pk_lesson_reads'))
    )
    op.create_table('submissions',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('learner_id', sa.String(length=32), nullable=False),
    sa.Column('exercise_slug', sa.String(length=100), nullable=False),
    sa.Column('code', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('verdict', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('duration_ms', sa.Integer(), nullable=True),
    sa.CheckConstraint("status IN ('queued', 'running', 'passed', 'failed', 'error', 'timeout', 'rejected')", name=op.f('ck_submissions_status')),
    sa.ForeignKeyConstraint(['learner_id'], ['learners.id'], name=op.f('fk_submissions_learner_id_learners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_submissions'))
    )
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_submissions_exercise_slug_created_at'), ['exercise_slug', 'created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_submissions_learner_id_exercise_slug_created_at'), ['learner_id', 'exercise_slug', 'created_at'], unique=False)

    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('display_name', sa.String(length=80), nullable=False),
    sa.Column('email', sa.String(length=254), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('learner_id', sa.String(length=32), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("role IN ('learner', 'instructor')", name=op.f('ck_users_role')),
    sa.ForeignKeyConstraint(['learner_id'], ['learners.id'], name=op.f('fk_users_learner_id_learners')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users')),
    sa.UniqueConstraint('email', name=op.f('uq_users_email')),
    sa.UniqueConstraint('learner_id', name=op.f('uq_users_learner_id'))
    )
    op.create_table('comments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('lesson_slug', sa.String(length=100), nullable=False),
    sa.Column('author_id', sa.Integer(), nullable=False),
    sa.Column('parent_id', sa.Integer(), nullable=True),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('edited_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('hidden', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('deleted', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.ForeignKeyConstraint(['author_id'], ['users.id'], name=op.f('fk_comments_author_id_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['parent_id'], ['comments.id'], name=op.f('fk_comments_parent_id_comments'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_comments'))
    )
    with op.batch_alter_table('comments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_comments_lesson_slug_parent_id_created_at'), ['lesson_slug', 'parent_id', 'created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_comments_parent_id'), ['parent_id'], unique=False)



def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('comments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_comments_parent_id'))
        batch_op.drop_index(batch_op.f('ix_comments_lesson_slug_parent_id_created_at'))

    op.drop_table('comments')
    op.drop_table('users')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_submissions_learner_id_exercise_slug_created_at'))
        batch_op.drop_index(batch_op.f('ix_submissions_exercise_slug_created_at'))

    op.drop_table('submissions')
    op.drop_table('lesson_reads')
    op.drop_table('exercise_progress')
    op.drop_table('learners')
