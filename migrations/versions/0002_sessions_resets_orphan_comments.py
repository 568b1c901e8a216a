"""Session versions, password reset links, comments outliving their author.

users.session_version: a password change or "log out everywhere" raises it and ends every other session.
password_resets: one-time reset links (a hash of the token only). comments.author_id: nullable, SET NULL when the
author's account is deleted, so the thread keeps its shape and shows "deleted user".

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 18:30:13.625786

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('password_resets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_password_resets_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_password_resets')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_password_resets_token_hash'))
    )
    with op.batch_alter_table('password_resets', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_password_resets_user_id'), ['user_id'], unique=False)

    with op.batch_alter_table('comments', schema=None) as batch_op:
        batch_op.alter_column('author_id',
               existing_type=sa.INTEGER(),
               nullable=True)
        batch_op.drop_constraint(batch_op.f('fk_comments_author_id_users'), type_='foreignkey')
        batch_op.create_foreign_key(batch_op.f('fk_comments_author_id_users'), 'users', ['author_id'], ['id'], ondelete='SET NULL')

    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_version', sa.Integer(), server_default='0', nullable=False))



def downgrade() -> None:
    """Downgrade schema. The old schema cannot hold a comment without an author: those of deleted accounts, and
    the replies under them, are deleted (foreign keys are off while migrating, so nothing cascades by itself)."""
    op.execute("DELETE FROM comments WHERE parent_id IN (SELECT id FROM comments WHERE author_id IS NULL)")
    op.execute("DELETE FROM comments WHERE author_id IS NULL")
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('session_version')

    with op.batch_alter_table('comments', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_comments_author_id_users'), type_='foreignkey')
        batch_op.create_foreign_key(batch_op.f('fk_comments_author_id_users'), 'users', ['author_id'], ['id'], ondelete='CASCADE')
        batch_op.alter_column('author_id',
               existing_type=sa.INTEGER(),
               nullable=False)

    with op.batch_alter_table('password_resets', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_password_resets_user_id'))

    op.drop_table('password_resets')
