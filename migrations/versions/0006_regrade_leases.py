"""Regrade leases: regrades.holder and regrades.heartbeat_at, so a regrade whose process died can be taken over.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 12:50:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('regrades', schema=None) as batch_op:
        batch_op.add_column(sa.Column('holder', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('regrades', schema=None) as batch_op:
        batch_op.drop_column('heartbeat_at')
        batch_op.drop_column('holder')
