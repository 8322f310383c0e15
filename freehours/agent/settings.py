"""The agent's settings: how it sends, typed and bounded in one class, read from the environment.

``FREEHOURS_AGENT_<NAME>`` sets ``<name>``; an option of ``freehours agent`` of the same name
overrides it, and each option's default, bounds and help are those written here (so ``--help``
shows this class). What the agent shares with the server, the Redis that holds the breaker's
state, the log level and where traces go, stays in ``freehours.settings.Settings``
(``FREEHOURS_REDIS_URL``, ``FREEHOURS_REDIS_PREFIX``, ``FREEHOURS_LOG_LEVEL``,
``FREEHOURS_TRACES``); the key is ``FREEHOURS_API_KEY`` or ``--api-key``.

The defaults, each with its reason, are those of the objects they configure (``BreakerConfig``,
``Timeouts``, the inbox's and the run's constants): ``breaker()``, ``timeouts()`` and
``agent_config()`` map the settings onto them, in this one place.
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from freehours.agent.breaker import BreakerConfig
from freehours.agent.http import Timeouts
from freehours.agent.inbox import MAX_FILE_BYTES, SETTLE_SECONDS
from freehours.agent.meter_agent import DRAIN_TIMEOUT, AgentConfig, Simulation

_BREAKER = BreakerConfig()
_TIMEOUTS = Timeouts()
#: A file is read into memory and spooled as one SQLite BLOB, whose limit is a billion bytes.
MAX_FILE_BYTES_CEILING = 512 * 1024 * 1024


class AgentSettings(BaseSettings):
    """How the meter agent sends. ``FREEHOURS_AGENT_<NAME>`` sets ``<name>``."""

    model_config = SettingsConfigDict(env_prefix="FREEHOURS_AGENT_", frozen=True)

    # --- who it is ---
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="what it calls itself in its Freehours-Agent header (unset: the host name)",
    )

    # --- the circuit breaker ---
    breaker_failures: int = Field(
        default=_BREAKER.fail_max, ge=1, description="failures in a row that open it"
    )
    breaker_reset: float = Field(
        default=_BREAKER.reset_timeout, ge=0.1, description="seconds open before a trial call"
    )
    breaker_name: str = Field(
        default=_BREAKER.name, description="agents with one name share one breaker (Redis)"
    )

    # --- one request ---
    connect_timeout: float = Field(
        default=_TIMEOUTS.connect, ge=0.01, description="seconds to connect"
    )
    read_timeout: float = Field(
        default=_TIMEOUTS.read, ge=0.01, description="seconds to wait for data"
    )
    deadline: float = Field(
        default=_TIMEOUTS.total, ge=0.01, description="seconds one request may take in all"
    )

    # --- the run and the inbox ---
    drain_timeout: float = Field(
        default=DRAIN_TIMEOUT, ge=0, description="seconds to empty the spool after the sources"
    )
    max_file_bytes: int = Field(
        default=MAX_FILE_BYTES,
        ge=1,
        le=MAX_FILE_BYTES_CEILING,
        description="larger NEM12 files go to rejected/ unread (keep it <= the API's limit)",
    )
    settle_seconds: float = Field(
        default=SETTLE_SECONDS,
        ge=0,
        description=(
            "a file modified more recently than this is still being written: left for later"
        ),
    )

    def breaker(self) -> BreakerConfig:
        return BreakerConfig(
            fail_max=self.breaker_failures, reset_timeout=self.breaker_reset, name=self.breaker_name
        )

    def timeouts(self) -> Timeouts:
        return Timeouts(connect=self.connect_timeout, read=self.read_timeout, total=self.deadline)

    def agent_config(
        self,
        *,
        api_url: str,
        api_key: str,
        spool_path: Path,
        nem12_dir: Path | None,
        once: bool,
        simulation: Simulation | None,
        redis_url: str | None,
        redis_prefix: str,
    ) -> AgentConfig:
        """A run of the agent with these settings: its sources, its API and its spool."""
        return AgentConfig(
            api_url=api_url,
            api_key=api_key,
            spool_path=spool_path,
            nem12_dir=nem12_dir,
            once=once,
            simulation=simulation,
            timeouts=self.timeouts(),
            breaker=self.breaker(),
            drain_timeout=self.drain_timeout,
            settle_seconds=self.settle_seconds,
            max_file_bytes=self.max_file_bytes,
            redis_url=redis_url,
            redis_prefix=redis_prefix,
            name=self.name or socket.gethostname(),
        )
