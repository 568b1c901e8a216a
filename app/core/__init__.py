"""Core services every part of the site builds on: settings, database, security, mail, errors."""
