"""Hosts of a test's own on this machine: Linux network namespaces on a bridge of their own.

``Network`` makes a bridge (``fhb`` and the run's id) in the root namespace with the first address
of a private /24 picked for the run (10.218.X.0/24, X one no interface or route here uses), and a
host per ``add``: a namespace (``fh`` + id + name) with loopback up and one veth onto the bridge,
``eth0`` inside with its own address. The root namespace (the test) reaches every host through the
bridge; hosts reach each other and the root namespace's address, nothing else (no route out).

A host runs processes with ``ip netns exec`` (each in a process group of its own, its output in a
log file), and fails as a network does, with the kernel's own tools: ``partition`` drops its
packets to and from an address (one port, or all) with nftables; ``lossy`` drops a share of every
packet at random (nftables ``numgen``); ``netem`` adds delay and loss with ``tc netem`` where the
kernel has it (``NETEM``). Everything made is taken away at ``close``, also after a failure: the
processes (their groups, then whatever is left in the namespace), the namespaces, the bridge.

Names carry a random id of the run, so that parallel test workers, or what a killed run left
behind, never meet.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

#: The range the hosts' subnets come from: a /24 of it per run.
SUPERNET = ipaddress.ip_network("10.218.0.0/16")


class NamespacesUnavailable(Exception):
    """Network namespaces cannot be made here (not root, no ``ip``, or the kernel refuses)."""


def run(
    *argv: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, input=stdin)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def why_not() -> str | None:
    """Why namespaces with veths on a bridge and nftables rules cannot be made here, or None."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"no {tool!r} command"
    probe = f"fhprobe{secrets.token_hex(3)}"
    made = run("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add: {made.stderr.strip()}"
    try:
        table = "table inet probe {\n chain c {\n type filter hook output priority 0;\n }\n}\n"
        for argv, stdin in (
            (("ip", "link", "add", f"{probe[:8]}b", "type", "bridge"), None),
            (("ip", "link", "del", f"{probe[:8]}b"), None),
            (("ip", "netns", "exec", probe, "nft", "-f", "-"), table),
        ):
            done = run(*argv, check=False, stdin=stdin)
            if done.returncode != 0:
                return f"{' '.join(argv)}: {done.stderr.strip()}"
    finally:
        run("ip", "netns", "del", probe, check=False)
    return None


def netem_available() -> bool:
    """Whether this kernel has ``tc netem`` (sch_netem), tried on a scratch namespace's loopback."""
    probe = f"fhnetem{secrets.token_hex(3)}"
    run("ip", "netns", "add", probe)
    try:
        added = run(
            "ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
            "delay", "1ms", check=False,
        )  # fmt: skip
        return added.returncode == 0
    finally:
        run("ip", "netns", "del", probe, check=False)


@dataclass
class Host:
    """A namespace with one address on the run's bridge."""

    name: str
    namespace: str
    address: str
    veth: str  # the root namespace's end, on the bridge
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def exec(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]

    def run(
        self, *argv: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run(*self.exec(*argv), check=check, stdin=stdin)

    def start(
        self, label: str, *argv: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """``argv`` in this host's namespace, in a process group of its own; its stdout and
        stderr appended to ``logs/HOST-LABEL.log``. Its environment is this process's without
        any FREEHOURS_* (the developer's settings stay out), and ``env``."""
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("FREEHOURS_")}
        with open(self.logs / f"{self.name}-{label}.log", "ab") as log:
            process = subprocess.Popen(
                self.exec(*argv),
                env={**inherited, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def log(self, label: str) -> str:
        path = self.logs / f"{self.name}-{label}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def partition(self, address: str, port: int | None = None) -> None:
        """Drop every packet between this host and ``address`` (only those of TCP ``port``, to
        or from it, when given): a black hole, nothing answers, as a partition looks."""
        match = f"tcp dport {port} " if port else ""
        back = f"tcp sport {port} " if port else ""
        self._table(
            "partition",
            [
                "chain out {\n type filter hook output priority 0;\n"
                f" ip daddr {address} {match}drop\n}}",
                "chain in {\n type filter hook input priority 0;\n"
                f" ip saddr {address} {back}drop\n}}",
            ],
        )

    def lossy(self, percent: int) -> None:
        """Drop ``percent`` % of the packets this host sends or receives on eth0, at random
        (counted: ``dropped``)."""
        rule = f"numgen random mod 100 < {percent} counter drop"
        self._table(
            "loss",
            [
                f'chain out {{\n type filter hook output priority 0;\n oifname "eth0" {rule}\n}}',
                f'chain in {{\n type filter hook input priority 0;\n iifname "eth0" {rule}\n}}',
            ],
        )

    def dropped(self) -> int:
        """The packets ``lossy`` has dropped so far, both ways."""
        listed = json.loads(self.run("nft", "-j", "list", "table", "inet", "loss").stdout)
        return sum(
            expr["counter"]["packets"]
            for item in listed["nftables"]
            for expr in item.get("rule", {}).get("expr", [])
            if "counter" in expr
        )

    def netem(self, delay_ms: int, loss_percent: int) -> None:
        """``tc netem`` on eth0 (needs sch_netem: ``netem_available``)."""
        self.run(
            "tc", "qdisc", "add", "dev", "eth0", "root", "netem",
            "delay", f"{delay_ms}ms", "loss", f"{loss_percent}%",
        )  # fmt: skip

    def heal(self) -> None:
        """Take away every fault of this host's: its nftables tables and its qdisc."""
        for table in ("partition", "loss"):
            self.run("nft", "delete", "table", "inet", table, check=False)
        self.run("tc", "qdisc", "del", "dev", "eth0", "root", check=False)

    def _table(self, name: str, chains: list[str]) -> None:
        self.run("nft", "delete", "table", "inet", name, check=False)
        body = "\n".join(chains)
        self.run("nft", "-f", "-", stdin=f"table inet {name} {{\n{body}\n}}\n")

    def kill(self) -> None:
        """SIGKILL every process this host started (their whole process groups)."""
        for process in self.processes:
            _kill_group(process, signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM every process (group) of this host's, SIGKILL after ``grace``; then whatever
        is left in the namespace."""
        for process in self.processes:
            if process.poll() is None:
                _kill_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        self.kill()
        left = run("ip", "netns", "pids", self.namespace, check=False).stdout.split()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)


def _kill_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


class Network:
    """A bridge with hosts on it; ``close`` takes all of it away. Raises
    ``NamespacesUnavailable`` where namespaces cannot be made."""

    def __init__(self, logs: Path) -> None:
        reason = why_not()
        if reason is not None:
            raise NamespacesUnavailable(reason)
        self.id = secrets.token_hex(3)
        self.logs = logs
        self.bridge = f"fhb{self.id}"
        self.hosts: dict[str, Host] = {}
        self.subnet = _free_subnet()
        addresses = self.subnet.hosts()
        self.gateway = str(next(addresses))
        self._addresses = addresses
        try:
            run("ip", "link", "add", self.bridge, "type", "bridge")
            run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            run("ip", "link", "set", self.bridge, "up")
        except Exception:
            self.close()
            raise

    def add(self, name: str) -> Host:
        index = len(self.hosts)
        host = Host(
            name=name,
            namespace=f"fh{self.id}{name}",
            address=str(next(self._addresses)),
            veth=f"fh{self.id}v{index}",
            logs=self.logs,
        )
        self.hosts[name] = host
        inside = f"fh{self.id}i{index}"
        run("ip", "netns", "add", host.namespace)
        run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", inside)
        run("ip", "link", "set", host.veth, "master", self.bridge, "up")
        run("ip", "link", "set", inside, "netns", host.namespace)
        host.run("ip", "link", "set", "lo", "up")
        host.run("ip", "link", "set", inside, "name", "eth0")
        host.run("ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        host.run("ip", "link", "set", "eth0", "up")
        return host

    def close(self) -> None:
        for host in self.hosts.values():
            host.stop()
        for host in self.hosts.values():
            run("ip", "netns", "del", host.namespace, check=False)
            run("ip", "link", "del", host.veth, check=False)  # gone with its peer, normally
        run("ip", "link", "del", self.bridge, check=False)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of ``SUPERNET`` that no address or route of the root namespace is in."""
    taken = run("ip", "-4", "addr", "show").stdout + run("ip", "-4", "route", "show").stdout
    candidates = list(SUPERNET.subnets(new_prefix=24))[1:-1]
    random.SystemRandom().shuffle(candidates)
    for subnet in candidates:
        prefix = str(subnet.network_address).rsplit(".", 1)[0] + "."
        if prefix not in taken:
            return subnet
    raise NamespacesUnavailable(f"every /24 of {SUPERNET} is in use here")
