"""The wheel alone is a whole install, next to Debian's `watchdog` package.

One wheel is built per session (`pip wheel`) and installed into a throwaway venv (no checkout beside it: the
package data must come from the wheel). Its `llm-launch-watchdog print-unit` must pass `systemd-analyze verify`
as printed, `print-config` must pass `check-config`, and the wheel's copies must be the repository's files.
Debian's `watchdog` package (the hardware watchdog daemon) is checked from its .deb (`apt-get download
watchdog`, never installed: its postinst may start a daemon): `WATCHDOG_DEBIAN_WATCHDOG_DEB` names the .deb
or a folder holding it; without it the tests skip, unless `WATCHDOG_REQUIRE_DEBIAN_WATCHDOG=1` (CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
from conftest import require_binary, unavailable

from watchdog.cli.shipped import FORCED_COMMAND, SCRIPT, SHIPPED, TEMPLATE_EXEC, UNIT, private_home

ROOT = Path(__file__).parent.parent
PYPROJECT = ROOT / "pyproject.toml"
OPERATIONS = ROOT / "docs" / "operations.md"
LEAST_PRIVILEGE = ROOT / "docs" / "least-privilege.md"
REQUIRE_DEB = "WATCHDOG_REQUIRE_DEBIAN_WATCHDOG"
# The example config's secrets (env:NAME), as tests/test_config.py sets them.
EXAMPLE_SECRETS = {
    "WATCHDOG_TEAM_WEBHOOK": "https://hooks.example.com/services/T0/B0/team-token-1",
    "WATCHDOG_PAGERDUTY_KEY": "pd-routing-key-2",
    "WATCHDOG_MATTERMOST_WEBHOOK": "https://chat.example.com/hooks/mm-token-3",
    "WATCHDOG_TELEGRAM_BOT_URL": "https://api.telegram.org/bot123:tg-token-4",
    "WATCHDOG_APPRISE_URL": "discord://1234/apprise-token-5",
}
NVIDIA_SMI = (
    "nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,temperature.gpu,"
    "power.draw --format=csv,noheader,nounits"
)
PATH_DIRS = {"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}
# What the install docs said before the rename: the collision check must find these.
OLD_PATHS = [
    "/etc/systemd/system/watchdog.service",
    "/usr/local/bin/watchdog",
    "/etc/watchdog/config.toml",
    "/etc/watchdog/watchdog.env",
    "/var/lib/watchdog",
]


@dataclass(frozen=True)
class Install:
    """The wheel, and a venv it is installed into (its dependencies seen from this environment)."""

    wheel: Path
    venv: Path

    def script(self, name: str = SCRIPT) -> Path:
        return self.venv / "bin" / name

    def run(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.script()), *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=self.venv,  # not the checkout: nothing may come from it
            env=env,
        )


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, f"{argv}: {result.stdout}{result.stderr}"
    return result


@pytest.fixture(scope="session")
def install(tmp_path_factory: pytest.TempPathFactory) -> Install:
    """The wheel built from this checkout (once a session) and installed with `--no-deps` into a new venv."""
    work = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(ROOT)])
    (wheel,) = (work / "dist").glob("llm_launch_watchdog-*.whl")
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    # This environment's dependencies, after the venv's own site-packages (its `watchdog` comes first; the
    # .pth files of this environment, an editable install's among them, are not read).
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib.strip()) / "_deps_of_the_tests.pth").write_text("\n".join(sorted(ours)) + "\n")
    # --ignore-installed: this environment's own install of the package (the README's `pip install
    # '.[test]'`, not editable), seen through that .pth, would make pip call it installed already
    pip_install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    _run([*pip_install, "--ignore-installed", str(wheel)])
    return Install(wheel, venv)


def _force_include() -> dict[str, str]:
    wheel = tomllib.loads(PYPROJECT.read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    mapping: dict[str, str] = wheel["force-include"]
    return mapping


def _verify(unit: Path, env: dict[str, str] | None = None, *names: str) -> subprocess.CompletedProcess[str]:
    analyze = require_binary("systemd-analyze", "systemd", "WATCHDOG_REQUIRE_SSHD")
    return subprocess.run(
        [analyze, "verify", "--man=no", "--recursive-errors=no", *(names or [str(unit)])],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=env,
    )


# --- what the wheel carries ----------------------------------------------------------------------------------


def test_the_code_ships_what_pyproject_force_includes() -> None:
    """watchdog.cli.shipped names exactly the files pyproject.toml puts into the wheel, as watchdog/data/NAME."""
    assert _force_include() == {f.repo_path: f"watchdog/data/{f.name}" for f in SHIPPED}


def test_the_wheels_files_are_the_repositorys(install: Install) -> None:
    """Each file the wheel ships is byte for byte its one copy in the repository (no second copy to drift)."""
    with zipfile.ZipFile(install.wheel) as wheel:
        for source, target in _force_include().items():
            assert wheel.read(target) == (ROOT / source).read_bytes(), target


def test_installed_print_commands_write_the_shipped_files(install: Install) -> None:
    """`print-config` and `print-forced-command` of the installed wheel print the repository's files."""
    for command, file in (
        ("print-config", "deploy/config.example.toml"),
        ("print-forced-command", FORCED_COMMAND.repo_path),
    ):
        result = install.run(command)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout == (ROOT / file).read_text(), command


def test_installed_print_unit_passes_systemd_analyze_verify(install: Install, tmp_path: Path) -> None:
    """The installed `llm-launch-watchdog print-unit` names its own script in ExecStart, and verifies as printed."""
    result = install.run("print-unit")
    # Its interpreter may be one in a home directory (a pyenv Python of root's): then, and only then, a warning.
    home = private_home([str(install.script()), str(install.venv / "bin" / "python")])
    assert result.returncode == 0
    assert result.stderr == (
        ""
        if home is None
        else f"watchdog: warning: {home} is in a home directory, which "
        "the unit's user llm-launch-watchdog cannot enter: the service would not start. Install under /opt "
        "(docs/operations.md, step 1).\n"
    )
    expected = (
        (ROOT / UNIT.repo_path)
        .read_text()
        .replace(f"ExecStart={TEMPLATE_EXEC} ", f"ExecStart={install.script()} ")
    )
    assert result.stdout == expected
    unit = tmp_path / UNIT.name
    unit.write_text(result.stdout)
    verify = _verify(unit)
    print(
        f"$ systemd-analyze verify {unit.name}  ->  exit {verify.returncode}\n{verify.stdout}{verify.stderr}"
    )
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")


def test_the_repositorys_unit_does_not_verify_where_its_path_is_missing(tmp_path: Path) -> None:
    """The check is not blind: the unit as written in the repository fails verify where its ExecStart is not."""
    if Path(TEMPLATE_EXEC).exists():
        pytest.skip(f"{TEMPLATE_EXEC} exists on this machine")
    unit = tmp_path / UNIT.name
    shutil.copyfile(ROOT / UNIT.repo_path, unit)
    verify = _verify(unit)
    assert verify.returncode != 0
    assert f"Command {TEMPLATE_EXEC} is not executable" in verify.stderr


def test_print_unit_exec_path_with_space_percent_and_dollar_verifies(
    install: Install, tmp_path: Path
) -> None:
    """`print-unit --exec PATH` quotes and escapes a path systemd would split or expand, and verify finds it."""
    odd = tmp_path / "opt dir" / "100%$HOME" / SCRIPT
    odd.parent.mkdir(parents=True)
    odd.symlink_to(install.script())
    result = install.run("print-unit", "--exec", str(odd))
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("ExecStart=")]
    assert line.startswith(f'ExecStart="{tmp_path}/opt dir/100%%$HOME/{SCRIPT}" run --config ')
    unit = tmp_path / UNIT.name
    unit.write_text(result.stdout)
    verify = _verify(unit)
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")


def test_print_unit_warns_of_a_program_in_a_home_directory(install: Install) -> None:
    """A program under /home or /root (a user's pipx install) is printed, with a warning: the unit's user
    could not run it."""
    result = install.run("print-unit", "--exec", "/home/alice/.local/bin/llm-launch-watchdog")
    assert result.returncode == 0
    assert "ExecStart=/home/alice/.local/bin/llm-launch-watchdog run --config " in result.stdout
    assert (
        "watchdog: warning: /home/alice/.local/bin/llm-launch-watchdog is in a home directory, which the "
        "unit's user llm-launch-watchdog cannot enter" in result.stderr
    )


def test_installed_print_config_passes_check_config(install: Install, tmp_path: Path) -> None:
    """The example config as the installed wheel prints it is valid for the installed `check-config`."""
    config = tmp_path / "config.toml"
    printed = install.run("print-config")
    assert printed.returncode == 0, printed.stderr
    config.write_text(printed.stdout)
    check = install.run("check-config", str(config), env={**os.environ, **EXAMPLE_SECRETS})
    assert check.returncode == 0, check.stderr
    # with warnings: its identity and known_hosts files are the service's, not readable on this machine
    summary = check.stderr.splitlines()[-1]
    assert summary.startswith(f"watchdog: {config}: valid: 9 launches, 3 hosts, 9 notifiers"), check.stderr


def test_installed_forced_command_runs_as_printed(install: Install, tmp_path: Path) -> None:
    """The printed wrapper, run by /bin/sh as sshd would, allows watchdog's command and refuses another."""
    wrapper = tmp_path / FORCED_COMMAND.name
    wrapper.write_text(install.run("print-forced-command").stdout)
    allowed = subprocess.run(
        ["/bin/sh", str(wrapper), "--check"],
        capture_output=True,
        check=False,
        timeout=60,
        env={"SSH_ORIGINAL_COMMAND": NVIDIA_SMI, "PATH": os.environ["PATH"]},
    )
    assert (allowed.returncode, allowed.stdout.split(b"\0")[:-1]) == (
        0,
        [w.encode() for w in NVIDIA_SMI.split()],
    )
    refused = subprocess.run(
        ["/bin/sh", str(wrapper)],
        capture_output=True,
        check=False,
        timeout=60,
        env={"SSH_ORIGINAL_COMMAND": "id"},
    )
    assert refused.returncode == 126
    assert refused.stderr.startswith(b"llm-launch-watchdog-forced-command: refused: ")


def test_both_console_scripts_are_installed(install: Install) -> None:
    """The wheel installs `llm-launch-watchdog` (what hosts use) and `watchdog` (the documented command), and
    each one's --version says the name it was called by."""
    for name in (SCRIPT, "watchdog"):
        result = subprocess.run(
            [str(install.script(name)), "--version"], capture_output=True, text=True, check=False, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[:1] == [name], result.stdout


# --- next to Debian's `watchdog` package --------------------------------------------------------------------


@dataclass(frozen=True)
class DebPackage:
    """A .deb's paths (its files and what its maintainer scripts name) and its files extracted under `root`."""

    paths: frozenset[str]
    root: Path


@pytest.fixture(scope="session")
def debian_watchdog(tmp_path_factory: pytest.TempPathFactory) -> DebPackage:
    """Debian's `watchdog` package from the .deb `WATCHDOG_DEBIAN_WATCHDOG_DEB` names, unpacked (not installed)."""
    given = os.environ.get("WATCHDOG_DEBIAN_WATCHDOG_DEB", "")
    place = Path(given) if given else None
    debs = sorted(place.glob("watchdog_*.deb")) if place and place.is_dir() else [place] if place else []
    if not debs or not debs[-1].is_file():
        unavailable(
            "no .deb of Debian's watchdog package (`apt-get download watchdog`, then set "
            "WATCHDOG_DEBIAN_WATCHDOG_DEB to it or its folder)",
            REQUIRE_DEB,
        )
    deb = debs[-1]
    dpkg_deb = require_binary("dpkg-deb", "dpkg", REQUIRE_DEB)
    root = tmp_path_factory.mktemp("debian-watchdog")
    _run([dpkg_deb, "-x", str(deb), str(root / "files")])
    _run([dpkg_deb, "-e", str(deb), str(root / "control")])
    listing = _run([dpkg_deb, "-c", str(deb)]).stdout
    paths = {os.path.normpath(line.split()[5].removeprefix(".")) for line in listing.splitlines()}
    for script in ("preinst", "postinst", "prerm", "postrm", "conffiles"):
        if (root / "control" / script).is_file():  # e.g. /etc/default/watchdog, made by postinst
            text = (root / "control" / script).read_text()
            paths |= set(
                re.findall(r"(?<![\w.-])(/(?:etc|lib|usr|var|run|opt)/[\w.+@-]+(?:/[\w.+@-]+)*)", text)
            )
    for known in ("/lib/systemd/system/watchdog.service", "/usr/sbin/watchdog", "/etc/default/watchdog"):
        assert known in paths, f"{deb} does not list {known}: the test reads it wrongly"
    return DebPackage(frozenset(paths), root / "files")


def _unit_directives(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def _installed_paths() -> set[str]:
    """Every path the docs tell an operator to install or the unit uses, on the monitor and on the GPU hosts."""
    table = re.findall(r"^\| `(/[^`]+)` \|", OPERATIONS.read_text(), re.MULTILINE)
    assert table
    unit = _unit_directives((ROOT / UNIT.repo_path).read_text())
    exec_start = unit["ExecStart"][0].split()
    from_unit = {
        f"/etc/systemd/system/{UNIT.name}",
        exec_start[0],
        exec_start[exec_start.index("--config") + 1],
        unit["WorkingDirectory"][0],
        *(f"/var/lib/{d}" for d in unit["StateDirectory"]),
        *(p.removeprefix("-") for p in unit["EnvironmentFile"] + unit["ReadOnlyPaths"]),
    }
    table_paths = {p.rstrip("/") for p in table}
    table_paths |= {
        str(PurePosixPath(p).parent) for p in table_paths if p.startswith("/etc/llm-launch-watchdog/")
    }
    assert from_unit <= table_paths, f"operations.md's paths table lacks {from_unit - table_paths}"
    wrappers = set(re.findall(r'command="(/[^" ]+)', LEAST_PRIVILEGE.read_text()))
    assert wrappers == {f"/usr/local/lib/llm-launch-watchdog/{FORCED_COMMAND.name}"}
    return table_paths | wrappers


def _collisions(ours: set[str], theirs: frozenset[str]) -> list[str]:
    """Where a path of ours would replace, mask or shadow one of theirs: the same path, a unit of the same
    name (in any unit directory, or their SysV script's), a command of the same name on PATH, or a path
    inside a directory of theirs named for them."""

    def unit_name(path: str) -> str | None:
        p = PurePosixPath(path)
        if "systemd" in p.parts and p.suffix == ".service":
            return p.name
        return f"{p.name}.service" if str(p.parent) == "/etc/init.d" else None

    found = []
    for mine in sorted(ours):
        m = PurePosixPath(mine)
        for other in sorted(theirs):
            o = PurePosixPath(other)
            if mine == other:
                found.append(f"{mine}: the same path")
            elif unit_name(mine) and unit_name(mine) == unit_name(other):
                found.append(f"{mine}: the same unit as {other}")
            elif str(m.parent) in PATH_DIRS and str(o.parent) in PATH_DIRS and m.name == o.name:
                found.append(f"{mine}: the same command as {other}")
            elif o in m.parents and ("watchdog" in o.name or o.name.startswith("wd_")):
                found.append(f"{mine}: inside their {other}")
    return found


def test_no_installed_path_collides_with_debians_watchdog(debian_watchdog: DebPackage) -> None:
    """No path the docs install (unit, scripts, config, state, env file, wrapper) collides with the package's."""
    assert _collisions(_installed_paths(), debian_watchdog.paths) == []


def test_the_collision_check_finds_the_old_names(debian_watchdog: DebPackage) -> None:
    """The check is not blind: the names before the rename mask their unit and shadow their command."""
    found = _collisions(set(OLD_PATHS), debian_watchdog.paths)
    assert (
        "/etc/systemd/system/watchdog.service: the same unit as /lib/systemd/system/watchdog.service" in found
    )
    assert "/usr/local/bin/watchdog: the same command as /usr/sbin/watchdog" in found


def test_our_unit_verifies_next_to_debians(
    install: Install, debian_watchdog: DebPackage, tmp_path: Path
) -> None:
    """Our printed unit and their watchdog.service in one unit search path: both load, ours verifies cleanly."""
    units = tmp_path / "system"
    units.mkdir()
    for theirs in (debian_watchdog.root / "lib" / "systemd" / "system").glob("*.service"):
        shutil.copyfile(theirs, units / theirs.name)
    assert (units / "watchdog.service").is_file()
    (units / UNIT.name).write_text(install.run("print-unit").stdout)
    env = {**os.environ, "SYSTEMD_UNIT_PATH": f"{units}:"}
    verify = _verify(units / UNIT.name, env, UNIT.name, "watchdog.service")
    print(
        f"$ SYSTEMD_UNIT_PATH={units}: systemd-analyze verify {UNIT.name} watchdog.service  ->  exit "
        f"{verify.returncode}\n{verify.stdout}{verify.stderr}"
    )
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")
    assert sorted(p.name for p in units.iterdir()) == [UNIT.name, "watchdog.service", "wd_keepalive.service"]


def _unit_files(root: Path, *units: str) -> list[str]:
    """The files systemd would load for `units` under `root`, as `systemctl cat` names them (offline:
    `systemd-analyze --root=ROOT cat-config`, which applies the same /etc over /lib precedence)."""
    analyze = require_binary("systemd-analyze", "systemd", "WATCHDOG_REQUIRE_SSHD")
    result = subprocess.run(
        [analyze, f"--root={root}", "--no-pager", "cat-config", *(f"systemd/system/{u}" for u in units)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    prefix = f"# {root}"
    return [line.removeprefix(prefix) for line in result.stdout.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize(
    ("ours_as", "watchdog_service_is"),
    [
        pytest.param(UNIT.name, "/lib/systemd/system/watchdog.service", id="now-theirs-stays-theirs"),
        pytest.param(
            "watchdog.service", "/etc/systemd/system/watchdog.service", id="before-ours-masked-theirs"
        ),
    ],
)
def test_debians_watchdog_service_is_still_theirs(
    install: Install, debian_watchdog: DebPackage, tmp_path: Path, ours_as: str, watchdog_service_is: str
) -> None:
    """With their package's files in /lib and our unit installed as operations.md says, `watchdog.service`
    is still their file; installed under the old name, ours masked it (the check is not blind)."""
    root = tmp_path / "root"
    shutil.copytree(debian_watchdog.root / "lib", root / "lib")
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "systemd" / "system" / ours_as).write_text(install.run("print-unit").stdout)
    assert _unit_files(root, "watchdog.service") == [watchdog_service_is]
    if ours_as == UNIT.name:
        assert _unit_files(root, UNIT.name) == [f"/etc/systemd/system/{UNIT.name}"]
