"""Settings: read once at start-up from ``FREEHOURS_*`` variables, typed, defaults beside each field."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every setting freehours reads. ``FREEHOURS_<NAME>`` sets ``<name>``."""

    model_config = SettingsConfigDict(env_prefix="FREEHOURS_", frozen=True)

    database_url: str = Field(
        default="sqlite:///./freehours.db",
        description="SQLAlchemy URL of the database; SQLite (embedded) or postgresql+psycopg://",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL for the quota cache, rate limits and breaker state; unset = in-process",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment once."""
    return Settings()
