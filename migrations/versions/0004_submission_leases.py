"""Submission leases for the worker tier: attempt, worker, heartbeat_at.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 10:00:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attempt', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('worker', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f('ix_submissions_status_heartbeat_at'), ['status', 'heartbeat_at'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_submissions_status_heartbeat_at'))
        batch_op.drop_column('heartbeat_at')
        batch_op.drop_column('worker')
        batch_op.drop_column('attempt')
