"""deploy/: the systemd units are valid (``systemd-analyze verify`` where it is installed) and each
ExecStart is a command line the real CLI parses; the example environment files set only real
settings, to valid values, and show the defaults as they are; the Prometheus configuration
parses, loads the alert rules, and scrapes the ports the units listen on and the deployment
guide names."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from freehours.agent.settings import AgentSettings
from freehours.cli import load
from freehours.observability.exposition import MULTIPROC_DIR
from freehours.settings import Settings
from tests.deploy.units import (
    DEPLOY,
    FOREIGN,
    GUIDE,
    INSTALLED,
    UNITS,
    WORKER_PORTS,
    environment_file,
    exec_start,
    option,
    unit,
)
from tests.servers import FREEHOURS

UNIT_FILES = sorted(path.name for path in UNITS.glob("*.service"))


def test_there_are_units_for_the_api_the_workers_and_the_agent() -> None:
    assert UNIT_FILES == [
        "freehours-agent.service",
        "freehours-api.service",
        "freehours-worker@.service",
    ]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_finds_nothing_wrong_with_the_units(tmp_path: Path) -> None:
    # The units as installed, with freehours where this checkout has it (verify checks that the
    # command exists) and the template's instance beside it.
    for name in UNIT_FILES:
        text = (UNITS / name).read_text().replace(INSTALLED, FREEHOURS)
        (tmp_path / name).write_text(text)
    instances = ["freehours-api.service", "freehours-agent.service"]
    instances += [f"freehours-worker@{port}.service" for port in WORKER_PORTS]
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *(str(tmp_path / name) for name in instances)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Unknown keys and values it cannot parse are warnings on stderr: none is allowed.
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize(
    ("name", "instance", "command", "environment"),
    [
        ("freehours-api.service", "", "serve", "freehours.env.example"),
        ("freehours-worker@.service", "9465", "worker", "freehours.env.example"),
        ("freehours-agent.service", "", "agent", "agent.env.example"),
    ],
)
def test_each_exec_start_is_a_command_line_freehours_parses(
    name: str, instance: str, command: str, environment: str, clean_env: pytest.MonkeyPatch
) -> None:
    service = unit(UNITS / name)["Service"]
    assert service["EnvironmentFile"] == [f"/etc/freehours/{environment.removesuffix('.example')}"]
    argv = exec_start(name, instance)
    assert argv[:2] == [INSTALLED, command]
    # As systemd starts it: the environment file's variables set (the agent's key among them).
    for variable, value in environment_file(DEPLOY / environment)[0].items():
        clean_env.setenv(variable, value)
    cli = load(command)
    parsed = cli.make_context(command, argv[2:])  # refuses what the CLI would refuse
    given = dict(zip(argv[2::2], argv[3::2], strict=True))  # every option here takes a value
    for flag, value in given.items():
        (name,) = [p.name for p in cli.params if flag in p.opts]
        assert str(parsed.params[name]) == value, flag
    with pytest.raises(Exception, match="No such option"):  # the check can fail
        cli.make_context(command, [*argv[2:], "--no-such-option"])


def test_the_api_merges_its_processes_metrics_in_a_directory_of_its_own() -> None:
    service = unit(UNITS / "freehours-api.service")["Service"]
    argv = exec_start("freehours-api.service")
    assert int(option(argv, "--processes")) > 1
    assert service["RuntimeDirectory"] == ["freehours-api"]  # new and empty at each start
    assert f"{MULTIPROC_DIR}=%t/freehours-api" in service["Environment"]
    assert service["KillMode"] == ["mixed"]  # SIGTERM to serve, which stops its processes
    # Stopping waits for the requests' 30 s and the job threads' grace, with room to spare.
    assert int(service["TimeoutStopSec"][0]) >= 30 + Settings().worker_grace_seconds
    for name in ("freehours-worker@.service", "freehours-agent.service"):
        assert not any(
            MULTIPROC_DIR in value for value in unit(UNITS / name)["Service"].get("Environment", [])
        ), f"{name} is scraped on its own port: its metrics must not be merged"


@pytest.mark.parametrize("name", ["freehours.env.example", "agent.env.example"])
def test_the_environment_examples_set_only_real_settings_to_valid_values(
    name: str, clean_env: pytest.MonkeyPatch
) -> None:
    set_here, shown = environment_file(DEPLOY / name)
    server = {f"FREEHOURS_{field.upper()}": field for field in Settings.model_fields}
    agent = {f"FREEHOURS_AGENT_{field.upper()}": field for field in AgentSettings.model_fields}
    options = {"FREEHOURS_API_KEY"}  # freehours agent --api-key's variable
    for variable in [*set_here, *shown]:
        assert (
            variable in server
            or variable in agent
            or variable in options
            or variable == MULTIPROC_DIR
            or FOREIGN.fullmatch(variable)
        ), f"{name}: {variable} is no setting freehours reads"
    assert MULTIPROC_DIR not in set_here, f"{name}: it would apply to every unit"
    for variable, value in set_here.items():
        clean_env.setenv(variable, value)
    settings, agent_settings = Settings(), AgentSettings()  # valid, or ValidationError here
    for variable, value in shown.items():  # each the default, or an example of an unset one
        if variable in server and Settings.model_fields[server[variable]].default is not None:
            field = server[variable]
            assert (
                getattr(Settings(**{field: value}), field) == Settings.model_fields[field].default
            ), f"{name}: #{variable}={value} is not the default"
        elif variable in agent:
            field = agent[variable]
            assert getattr(AgentSettings(**{field: value}), field) == getattr(
                AgentSettings.model_construct(), field
            ), f"{name}: #{variable}={value} is not the default"
    if name == "freehours.env.example":
        assert settings.database_url.startswith("postgresql")
        assert settings.redis_url is not None
        assert settings.forwarded_allow_ips is not None  # behind the proxy
    else:
        assert "FREEHOURS_API_KEY" in set_here
        assert "FREEHOURS_DATABASE_URL" not in set_here  # the agent needs none
        assert agent_settings == AgentSettings.model_construct()


def test_prometheus_scrapes_the_ports_the_units_listen_on_and_loads_the_alerts() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    for rules in config["rule_files"]:
        loaded = yaml.safe_load((DEPLOY / rules).read_text())  # relative to the configuration
        assert loaded["groups"]
    jobs = {
        job["job_name"]: [
            target for static in job["static_configs"] for target in static["targets"]
        ]
        for job in config["scrape_configs"]
    }
    api = exec_start("freehours-api.service")
    agent = exec_start("freehours-agent.service")
    assert jobs == {
        "freehours-api": [f"{option(api, '--host')}:{option(api, '--port')}"],
        "freehours-worker": [f"127.0.0.1:{port}" for port in WORKER_PORTS],
        "freehours-agent": [f"127.0.0.1:{option(agent, '--metrics-port')}"],
    }
    assert exec_start("freehours-worker@.service", "9465")[-2:] == ["--metrics-port", "9465"]
    guide = GUIDE.read_text()
    for port in [option(api, "--port"), *map(str, WORKER_PORTS), option(agent, "--metrics-port")]:
        assert port in guide, f"docs/deployment.md does not name port {port}"
    enable = " ".join(f"freehours-worker@{port}" for port in WORKER_PORTS)
    assert enable in guide


@pytest.mark.skipif(
    shutil.which("nginx") is None or shutil.which("openssl") is None, reason="no nginx here"
)
def test_the_nginx_example_is_valid(tmp_path: Path) -> None:
    certificate, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=freehours.example.com", "-keyout", str(key), "-out", str(certificate)),
        ],
        capture_output=True,
        check=True,
        timeout=60,
    )
    text = (DEPLOY / "proxy" / "nginx.conf").read_text()
    text = re.sub(r"ssl_certificate .*;", f"ssl_certificate {certificate};", text)
    text = re.sub(r"ssl_certificate_key .*;", f"ssl_certificate_key {key};", text)
    (tmp_path / "freehours.conf").write_text(text)
    main = tmp_path / "nginx.conf"
    main.write_text(f"events {{}}\nhttp {{\n    include {tmp_path / 'freehours.conf'};\n}}\n")
    result = subprocess.run(
        ["nginx", "-t", "-q", "-e", "stderr", "-p", str(tmp_path), "-c", str(main)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.skipif(shutil.which("caddy") is None, reason="no caddy here")
def test_the_caddy_example_is_valid_and_formatted() -> None:
    caddyfile = DEPLOY / "proxy" / "Caddyfile"
    result = subprocess.run(
        ["caddy", "validate", "--adapter", "caddyfile", "--config", str(caddyfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    formatted = subprocess.run(
        ["caddy", "fmt", str(caddyfile)], capture_output=True, text=True, timeout=60, check=True
    )
    assert formatted.stdout == caddyfile.read_text()


def test_the_proxy_examples_hide_metrics_and_pass_the_clients_address() -> None:
    nginx = (DEPLOY / "proxy" / "nginx.conf").read_text()
    assert "location = /metrics" in nginx
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in nginx  # replaced, not appended
    assert "proxy_pass http://freehours_api;" in nginx
    assert "server 127.0.0.1:8000;" in nginx
    caddy = (DEPLOY / "proxy" / "Caddyfile").read_text()
    assert "respond /metrics 404" in caddy
    assert "reverse_proxy 127.0.0.1:8000" in caddy
    api = exec_start("freehours-api.service")
    assert (option(api, "--host"), option(api, "--port")) == ("127.0.0.1", "8000")
    set_here, _ = environment_file(DEPLOY / "freehours.env.example")
    assert set_here["FREEHOURS_FORWARDED_ALLOW_IPS"] == "127.0.0.1"  # the proxy on this host
