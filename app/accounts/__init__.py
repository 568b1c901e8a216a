"""Accounts: users and sessions, a learner's own data, password resets."""
