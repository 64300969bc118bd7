"""Deployment files: the systemd unit (verified, exposure <= 2.5), the Dockerfile and its build context.

The unit and the Dockerfile name `run --config /etc/llm-launch-watchdog/config.toml` as their contract with the
daemon; the unit runs the `llm-launch-watchdog` console script (never a `watchdog` on PATH: Debian's). systemd-analyze checks the unit where it is installed (CI installs it); `docker build` runs only where
a Docker daemon answers. The unit's MemoryDenyWriteExecute=yes is checked for real: the CLI runs under the
kernel's equivalent (prctl PR_SET_MDWE, Linux >= 6.3), which refuses writable-and-executable memory.
"""

from __future__ import annotations

import ctypes
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require_binary
from sshd_server import SSHDServer

ROOT = Path(__file__).parent.parent
UNIT = ROOT / "systemd" / "llm-launch-watchdog.service"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = ROOT / "pyproject.toml"
READY_LOG = ROOT / "tests" / "fixtures" / "corpus" / "sglang" / "ready-llama31-8b-single-gpu-docs-v041.log"

EXEC_START = "/usr/local/bin/llm-launch-watchdog run --config /etc/llm-launch-watchdog/config.toml"
MAX_EXPOSURE = 2.5
LISTEN_PORT = 9469
NON_ROOT = re.compile(
    r"^(?!root\b)(?!0\b)[a-z_][a-z0-9_-]*(:[a-z_][a-z0-9_-]*)?$|^[1-9][0-9]*(:[1-9][0-9]*)?$"
)
SECRET_NAME = re.compile(
    r"(?i)(secret|token|passw|webhook|api[_-]?key|private|credential|id_(rsa|ed25519|ecdsa))"
)

# Run argv[1:] with writable-and-executable memory refused, as systemd's MemoryDenyWriteExecute=yes does
# (mmap with PROT_WRITE|PROT_EXEC, and mprotect gaining PROT_EXEC). The flag is kept across execve.
MDWE_EXEC = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(65, 1, 0, 0, 0) != 0:  # PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN
    sys.exit(f"PR_SET_MDWE: {os.strerror(ctypes.get_errno())}")
os.execv(sys.argv[1], sys.argv[1:])
"""


# --- the systemd unit ---------------------------------------------------------------------------------------


def _systemd_analyze() -> str:
    return require_binary("systemd-analyze", "systemd", "WATCHDOG_REQUIRE_SSHD")


def _watchdog_script() -> Path:
    """The console script installed next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "watchdog"
    if beside.is_file():
        return beside
    found = shutil.which("watchdog")
    assert found is not None, "the `watchdog` console script is not installed"
    return Path(found)


def _directives(text: str) -> dict[str, list[str]]:
    """Every `Key=value` of a unit file, per key in order (systemd allows a key more than once)."""
    found: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found


@pytest.fixture
def unit_copy(tmp_path: Path) -> Path:
    """The unit as `llm-launch-watchdog print-unit` of this environment prints it: ExecStart on its script."""
    text = UNIT.read_text()
    assert f"ExecStart={EXEC_START}\n" in text
    script = _watchdog_script().with_name("llm-launch-watchdog")
    printed = subprocess.run(
        [str(script), "print-unit"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert printed == text.replace("ExecStart=/usr/local/bin/llm-launch-watchdog ", f"ExecStart={script} ")
    copy = tmp_path / UNIT.name
    copy.write_text(printed)
    return copy


def _verify(analyze: str, unit: Path) -> list[str]:
    """What `systemd-analyze verify` says about this unit: the lines naming it, and a failure exit."""
    result = subprocess.run(
        [analyze, "verify", "--man=no", "--recursive-errors=no", str(unit)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    said = [line for line in (result.stdout + result.stderr).splitlines() if unit.name in line]
    if result.returncode != 0:
        said.append(f"exit {result.returncode}: {result.stderr.strip()}")
    return said


def test_unit_passes_systemd_analyze_verify(unit_copy: Path) -> None:
    """`systemd-analyze verify` accepts the unit without a single warning about it."""
    assert _verify(_systemd_analyze(), unit_copy) == []


def test_verify_check_catches_a_misspelt_directive(unit_copy: Path) -> None:
    """The verify check is not blind: an unknown key, which verify only warns about, fails it."""
    analyze = _systemd_analyze()
    unit_copy.write_text(unit_copy.read_text().replace("UMask=0077", "UMask=0077\nProtectSytem=strict"))
    assert any("ProtectSytem" in line for line in _verify(analyze, unit_copy))


def test_unit_exposure_is_at_most_2_5(unit_copy: Path) -> None:
    """`systemd-analyze security --offline=yes` rates the unit's overall exposure 2.5 or lower."""
    result = subprocess.run(
        [_systemd_analyze(), "security", "--offline=yes", "--no-pager", str(unit_copy)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, "SYSTEMD_COLORS": "0"},
    )
    match = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", result.stdout)
    assert match is not None, result.stdout + result.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("Type", "notify", id="sd_notify"),
        pytest.param("NotifyAccess", "main", id="notify-main-only"),
        pytest.param("ExecStart", EXEC_START, id="exec-start"),
        pytest.param("ExecReload", "/bin/kill -HUP $MAINPID", id="reload-is-sighup"),
        pytest.param("WatchdogSec", "30", id="watchdog"),
        pytest.param("Restart", "on-failure", id="restart"),
        pytest.param("RestartSec", "5", id="restart-sec"),
        pytest.param("RestartPreventExitStatus", "78", id="config-error-no-restart-loop"),
        pytest.param("DynamicUser", "no", id="static-user"),
        pytest.param("User", "llm-launch-watchdog", id="user"),
        pytest.param("Group", "llm-launch-watchdog", id="group"),
        pytest.param("StateDirectory", "llm-launch-watchdog", id="state-dir"),
        pytest.param("WorkingDirectory", "/var/lib/llm-launch-watchdog", id="working-dir"),
        pytest.param("ReadOnlyPaths", "-/etc/llm-launch-watchdog", id="config-dir-read-only"),
        pytest.param(
            "EnvironmentFile", "-/etc/llm-launch-watchdog/llm-launch-watchdog.env", id="environment-file"
        ),
        pytest.param("UMask", "0077", id="umask"),
        pytest.param("ProtectSystem", "strict", id="protect-system"),
        pytest.param("ProtectHome", "read-only", id="protect-home"),
        pytest.param("PrivateTmp", "yes", id="private-tmp"),
        pytest.param("PrivateDevices", "yes", id="private-devices"),
        pytest.param("NoNewPrivileges", "yes", id="no-new-privileges"),
        pytest.param("CapabilityBoundingSet", "", id="no-capabilities"),
        pytest.param("AmbientCapabilities", "", id="no-ambient-capabilities"),
        pytest.param("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX", id="address-families"),
        pytest.param("SystemCallFilter", "@system-service", id="syscall-filter"),
        pytest.param("SystemCallArchitectures", "native", id="native-abi"),
        pytest.param("ProtectProc", "invisible", id="protect-proc"),
        pytest.param("ProcSubset", "pid", id="proc-subset"),
        pytest.param("MemoryDenyWriteExecute", "yes", id="mdwe"),
        pytest.param("RestrictNamespaces", "yes", id="namespaces"),
        pytest.param("RemoveIPC", "yes", id="remove-ipc"),
    ],
)
def test_unit_sets(key: str, value: str) -> None:
    """The unit keeps each directive the daemon's contract and the hardening depend on."""
    assert value in _directives(UNIT.read_text()).get(key, [])


# --- MemoryDenyWriteExecute=yes: the CLI under the kernel's equivalent --------------------------------------


def _mdwe_argv(*argv: str) -> list[str]:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(66, 0, 0, 0, 0) < 0:  # PR_GET_MDWE: EINVAL before Linux 6.3
        pytest.skip(f"the kernel has no PR_SET_MDWE ({os.strerror(ctypes.get_errno())}): Linux >= 6.3 needed")
    return [sys.executable, "-c", MDWE_EXEC, *argv]


def test_mdwe_wrapper_refuses_writable_executable_memory() -> None:
    """The wrapper the next tests run under does refuse a W+X mapping (so their passing means something)."""
    probe = "import mmap; mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)"
    result = subprocess.run(
        _mdwe_argv(sys.executable, "-c", probe), capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode != 0
    assert "PermissionError" in result.stderr


def test_cli_and_the_daemon_libraries_run_without_writable_executable_memory() -> None:
    """`watchdog replay` gives its verdict, and the daemon's libraries load and sign, with W+X memory refused."""
    result = subprocess.run(
        _mdwe_argv(str(_watchdog_script()), "replay", str(READY_LOG), "--json"),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["state"] == "ready"
    libraries = (
        "import aiohttp.web, anyio, asyncssh, prometheus_client, pydantic, sqlite3, ssl; "
        "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey; "
        "ssl.create_default_context(); sqlite3.connect(':memory:').execute('select 1'); "
        "asyncssh.generate_private_key('ssh-ed25519').export_public_key(); "
        "Ed25519PrivateKey.generate().sign(b'x'); print('ok')"
    )
    result = subprocess.run(
        _mdwe_argv(sys.executable, "-c", libraries), capture_output=True, text=True, check=False, timeout=120
    )
    assert (result.returncode, result.stdout.strip()) == (0, "ok"), result.stderr


@pytest.mark.sshd
def test_watch_over_ssh_runs_without_writable_executable_memory(sshd: SSHDServer, tmp_path: Path) -> None:
    """`watchdog watch` over a real sshd (key exchange, signatures, channels) works with W+X memory refused."""
    log = tmp_path / "server.log"
    shutil.copyfile(READY_LOG, log)
    target = f"ssh://{sshd.user}@{sshd.host}:{sshd.port}{log}"
    argv = ["watch", target, "--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]
    result = subprocess.run(
        _mdwe_argv(str(_watchdog_script()), *argv, "--timeout", "60", "--json"),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["state"] == "ready"


# --- the Dockerfile and its build context -------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments), continuation lines joined and comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return [(word.upper(), rest.strip()) for word, _, rest in (line.partition(" ") for line in joined)]


def _all(name: str) -> list[str]:
    return [args for instruction, args in _instructions() if instruction == name]


def _healthcheck_command() -> list[str]:
    (healthcheck,) = _all("HEALTHCHECK")
    _, _, command = healthcheck.partition(" CMD ")
    argv = json.loads(command)
    assert isinstance(argv, list)
    return [str(arg) for arg in argv]


def test_dockerfile_base_entrypoint_and_port() -> None:
    """Slim Python 3.11 base pinned by patch version and Debian release, the `watchdog` console script as
    entrypoint running the daemon, port 9469."""
    (base,) = _all("FROM")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    assert json.loads(_all("ENTRYPOINT")[-1]) == ["watchdog"]
    assert "watchdog" in scripts
    assert json.loads(_all("CMD")[-1]) == ["run", "--config", "/etc/llm-launch-watchdog/config.toml"]
    assert _all("EXPOSE") == [str(LISTEN_PORT)]
    assert json.loads(_all("VOLUME")[-1]) == ["/var/lib/llm-launch-watchdog"]


def test_dockerfile_runs_as_a_non_root_user() -> None:
    """The last USER is a named or numeric non-root user, set after every RUN (so nothing runs as root after)."""
    instructions = _instructions()
    users = [i for i, (name, _) in enumerate(instructions) if name == "USER"]
    assert users, "no USER: the container would run as root"
    last = users[-1]
    assert NON_ROOT.match(instructions[last][1]), instructions[last][1]
    assert all(name != "RUN" for name, _ in instructions[last + 1 :])


def test_dockerfile_installs_with_pip_without_cache() -> None:
    """The project is installed from the build context with pip at the versions of constraints.txt (which CI
    tests), and pip keeps no cache in the image."""
    installs = [run for run in _all("RUN") if "pip install" in run]
    assert installs
    assert all("--no-cache-dir" in run for run in installs)
    assert all("--constraint /src/constraints.txt " in run for run in installs)
    assert any(run.rstrip().endswith("/src") and "--mount=type=bind,target=/src" in run for run in installs)


def test_dockerfile_bakes_in_no_secret() -> None:
    """No ENV or ARG names a secret, nothing is COPY'd or ADDed (the context is mounted), no key is generated."""
    for name in ("ENV", "ARG", "LABEL"):
        for args in _all(name):
            assert not SECRET_NAME.search(args), f"{name} {args}"
    assert _all("COPY") == []
    assert _all("ADD") == []
    assert not any("ssh-keygen" in run or "ssh-keyscan" in run for run in _all("RUN"))


def test_dockerignore_admits_only_what_the_wheel_is_built_from() -> None:
    """The build context is an allow-list: everything is excluded, then only the files pyproject.toml builds from."""
    lines = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    assert patterns[0] == "*"
    admitted = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    project = tomllib.loads(PYPROJECT.read_text())
    needed = {"pyproject.toml", project["project"]["readme"], "constraints.txt"}
    needed |= set(project["project"].get("license-files", []))
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed |= set(wheel["packages"]) | set(wheel["force-include"])
    assert admitted == needed


class _Healthz(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/healthz" else 404
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the test output clean


@pytest.fixture
def healthz_server() -> Iterator[http.server.HTTPServer]:
    """A /healthz endpoint on 127.0.0.1 whose answer the test sets."""
    handler = type("Healthz", (_Healthz,), {"status": 200})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("status", "healthy"), [pytest.param(200, True, id="200"), pytest.param(503, False, id="503")]
)
def test_healthcheck_command_reports_healthz(
    healthz_server: http.server.HTTPServer, status: int, healthy: bool
) -> None:
    """The HEALTHCHECK command exits 0 when /healthz answers 200 and 1 otherwise (run here against a real server)."""
    argv = _healthcheck_command()
    assert argv[:2] == ["python", "-c"]
    assert f"http://127.0.0.1:{LISTEN_PORT}/healthz" in argv[2]
    healthz_server.RequestHandlerClass.status = status  # type: ignore[attr-defined]
    port = healthz_server.server_address[1]
    code = argv[2].replace(f":{LISTEN_PORT}/", f":{port}/")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, timeout=30)
    assert result.returncode == (0 if healthy else 1)


def test_healthcheck_command_fails_when_nothing_listens() -> None:
    """The HEALTHCHECK command exits 1 when the daemon does not answer at all."""
    probe = http.server.HTTPServer(("127.0.0.1", 0), _Healthz)
    port = probe.server_address[1]
    probe.server_close()  # the port is now closed: a connection is refused
    code = _healthcheck_command()[2].replace(f":{LISTEN_PORT}/", f":{port}/")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False, timeout=30)
    assert result.returncode == 1


def _docker() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed")
    info = subprocess.run([docker, "info"], capture_output=True, text=True, check=False, timeout=60)
    if info.returncode != 0:
        last = (info.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"no Docker daemon answers `docker info` ({last})")
    return docker


def test_docker_image_builds_and_runs_as_non_root() -> None:
    """Where Docker works, the image builds, runs `watchdog --version`, and its user is not root."""
    docker = _docker()
    tag = f"watchdog-test:{uuid.uuid4().hex[:12]}"
    build = subprocess.run(
        [docker, "build", "--quiet", "--tag", tag, str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )
    assert build.returncode == 0, build.stderr
    try:
        version = subprocess.run(
            [docker, "run", "--rm", tag, "--version"],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert version.returncode == 0, version.stderr
        uid = subprocess.run(
            [docker, "run", "--rm", "--entrypoint", "id", tag, "-u"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert uid.stdout.strip() not in ("", "0")
        config = subprocess.run(
            [docker, "image", "inspect", "--format", "{{json .Config}}", tag],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        image = json.loads(config.stdout)
        assert image["Healthcheck"]["Test"][0] == "CMD"
        assert not any(SECRET_NAME.search(env.partition("=")[0]) for env in image["Env"] or [])
    finally:
        subprocess.run([docker, "image", "rm", "--force", tag], capture_output=True, check=False, timeout=120)


def test_docs_show_the_commands_the_files_expect() -> None:
    """docs/operations.md installs what the unit and the image expect: the user, the unit path, the run command."""
    text = (ROOT / "docs" / "operations.md").read_text()
    for needed in (
        "useradd --system",
        "systemctl enable --now llm-launch-watchdog",
        "systemctl reload llm-launch-watchdog",
        "journalctl -u llm-launch-watchdog",
        EXEC_START.split(" ", 1)[0],
        "/etc/llm-launch-watchdog/config.toml",
        "docker run",
        "0.0.0.0:9469",
    ):
        assert needed in text, needed
