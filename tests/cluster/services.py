"""What runs on the hosts of ``tests.cluster.hosts``: a PostgreSQL and a Redis of their own on the
database host, and freehours' own commands (``serve``, ``worker``, ``agent``) on the others.

PostgreSQL refuses to run as root: its data directory (initdb, trust authentication) belongs to
the ``postgres`` user, and it runs as that user (``runuser``), listening on the host's address.
"""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from glob import glob
from pathlib import Path

import httpx
import redis

from tests.cluster.hosts import Host
from tests.servers import FREEHOURS, freehours  # run here, in the root namespace
from tests.support import eventually

PG_PORT = 5432
REDIS_PORT = 6379
API_PORT = 8000

#: The server side of a connection whose client went away mid-transaction: a backend idle in its
#: transaction (holding the quota's row lock) is ended after this long, and one whose peer
#: stopped acknowledging after tcp_user_timeout. What a deployment's PostgreSQL should say too
#: (docs/deployment.md).
PG_SETTINGS = {
    "idle_in_transaction_session_timeout": "5s",
    "tcp_user_timeout": "5000",
    "tcp_keepalives_idle": "2",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "3",
    "fsync": "off",  # a test's database: nothing to keep after a crash of the machine
    "max_connections": "200",
}


def postgres_bin() -> Path | None:
    """The newest PostgreSQL server binaries installed (Debian's layout), or None."""
    found = sorted(glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def missing_tools() -> str | None:
    """What the database host needs and this machine lacks, or None."""
    if postgres_bin() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin)"
    if shutil.which("redis-server") is None:
        return "no redis-server"
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres user"
    return None


def wait_for(check: Callable[[], object], what: str, within: float = 30.0) -> None:
    """``eventually``, for a service coming up: whatever it raises meanwhile is not up yet."""
    eventually(check, within=within, what=f"{what} coming up", every=0.1, ignoring=(Exception,))


@contextmanager
def database_host(host: Host, subnet: str) -> Iterator[tuple[str, str]]:
    """PostgreSQL and Redis on ``host``, reachable from ``subnet``; yields their URLs (a
    database ``freehours`` and Redis db 0), and removes the data directory afterwards."""
    bin_dir = postgres_bin()
    assert bin_dir is not None
    data = Path(tempfile.mkdtemp(prefix="freehours-cluster-pg-"))
    postgres = pwd.getpwnam("postgres")
    try:
        shutil.chown(data, postgres.pw_uid, postgres.pw_gid)
        as_postgres = ("runuser", "-u", "postgres", "--")
        pgdata = data / "data"
        subprocess.run(
            [
                *as_postgres,
                str(bin_dir / "initdb"),
                "-D",
                str(pgdata),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
        )
        with open(pgdata / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {subnet} trust\n")
        options = [arg for name, value in PG_SETTINGS.items() for arg in ("-c", f"{name}={value}")]
        host.start(
            "postgres",
            *as_postgres,
            str(bin_dir / "postgres"),
            *("-D", str(pgdata), "-p", str(PG_PORT), "-k", str(data)),
            *("-c", f"listen_addresses={host.address}", *options),
        )
        host.start(
            "redis",
            "redis-server",
            *("--bind", host.address, "--port", str(REDIS_PORT), "--save", ""),
            *("--appendonly", "no", "--protected-mode", "no", "--dir", str(data)),
        )
        isready = str(bin_dir / "pg_isready")
        wait_for(
            lambda: (
                subprocess.run(
                    [isready, "-q", "-h", host.address, "-p", str(PG_PORT)], check=False
                ).returncode
                == 0
            ),
            "PostgreSQL",
        )
        subprocess.run(
            [
                str(bin_dir / "createdb"),
                "-h",
                host.address,
                "-p",
                str(PG_PORT),
                "-U",
                "postgres",
                "freehours",
            ],
            check=True,
            capture_output=True,
        )
        redis_url = f"redis://{host.address}:{REDIS_PORT}/0"
        wait_for(lambda: redis.Redis.from_url(redis_url, socket_timeout=1).ping(), "Redis")
        yield f"postgresql+psycopg://postgres@{host.address}:{PG_PORT}/freehours", redis_url
    finally:
        host.stop()
        shutil.rmtree(data, ignore_errors=True)


@dataclass(frozen=True)
class Cluster:
    """The nodes' settings over the database host's services, and the keys made for the test."""

    env: dict[str, str]
    admin: str
    ingest: str


def cluster_of(
    network_id: str, database_url: str, redis_url: str, settings: dict[str, str]
) -> Cluster:
    """``settings`` with the database host's PostgreSQL and Redis (a Redis prefix of the
    network's own), the schema upgraded, and an admin and an ingest key made."""
    env = {
        **settings,
        "FREEHOURS_DATABASE_URL": database_url,
        "FREEHOURS_REDIS_URL": redis_url,
        "FREEHOURS_REDIS_PREFIX": f"cluster:{network_id}:",
    }
    freehours("db", "upgrade", env=env)
    admin = freehours("keys", "create", "--scope", "admin", env=env)
    ingest = freehours("keys", "create", "--scope", "ingest", env=env)
    return Cluster(env, admin, ingest)


@dataclass
class ApiNode:
    host: Host
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host.address}:{API_PORT}"

    def start(self) -> None:
        self.process = self.host.start(
            "serve",
            FREEHOURS,
            *("serve", "--host", self.host.address, "--port", str(API_PORT)),
            env=self.env,
        )
        self.wait_up()

    def wait_up(self, within: float = 60.0) -> None:
        def up() -> bool:
            assert self.process is not None
            assert self.process.poll() is None, (
                f"{self.host.name}'s API exited:\n{self.host.log('serve')[-3000:]}"
            )
            return httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200

        wait_for(up, f"the API on {self.host.name}", within)

    def kill(self) -> None:
        """SIGKILL the node's API (its supervisor and its API process)."""
        self.host.kill()
        self.host.processes.clear()
        self.process = None


def put_customers(client: httpx.Client, nmis: list[str], plan: str = "sso-seq") -> None:
    """Through the API ``client`` (an admin's): the built-in ``plan`` stored, and each of
    ``nmis`` a customer on it, in its region."""
    from freehours.plans import builtin_document  # noqa: PLC0415 - imported where used

    document = builtin_document(plan)
    client.put(f"/v1/plans/{plan}", json=document).raise_for_status()
    for nmi in nmis:
        body = {"plan_id": plan, "region": document["region"]}
        client.put(f"/v1/customers/{nmi}", json=body).raise_for_status()
