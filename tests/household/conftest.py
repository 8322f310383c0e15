"""The mail tests' SMTP server, for the page's email test."""

from tests.mail.conftest import smtp

__all__ = ["smtp"]
