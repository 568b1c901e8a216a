"""The machine picker: learners.machine (the learner's last "Run on" choice) and submissions.machine (where it ran).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 11:40:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('learners', schema=None) as batch_op:
        batch_op.add_column(sa.Column('machine', sa.String(length=32), nullable=True))
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('machine', sa.String(length=32), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('machine')
    with op.batch_alter_table('learners', schema=None) as batch_op:
        batch_op.drop_column('machine')
