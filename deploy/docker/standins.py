"""Local stand-ins for the deployment's base images, built from the Debian mirror.

Where Docker Hub cannot be reached (CI, this machine) python:3.11-slim, prom/prometheus
and nginx cannot be pulled; the Debian mirror and the package index can. This builds

  nmt-standin/debian:bookworm       `debootstrap --variant=minbase` rootfs, `docker import`ed,
                                    carrying this host's apt sources and proxy, its CA
                                    certificates and its pip index settings, so containers
                                    reach the mirror and the index the way the host does
  nmt-standin/python:3.11-bookworm  Debian's Python 3.11 + venv + `python` (PYTHON_IMAGE)
  nmt-standin/prometheus:bookworm   Debian's prometheus, laid out like prom/prometheus
  nmt-standin/nginx:bookworm        Debian's nginx, run like the nginx image

They are named as stand-ins and never tagged as the images they replace. Each carries a
label with the hash of its inputs (this recipe, the Dockerfiles, the host's settings,
the base image); an image whose label matches is not rebuilt, so only the first run pays
(1 to 1.5 minutes on 2 cores with BuildKit). Packages are as the mirror had them then: --force
brings in later Debian updates. Needs root, debootstrap and a running Docker engine:

    python3 deploy/docker/standins.py            # build what is missing or stale
    python3 deploy/docker/standins.py --force    # rebuild everything
    docker build --target cpu --build-arg PYTHON_IMAGE=nmt-standin/python:3.11-bookworm .
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = "bookworm"
BASE = "nmt-standin/debian:bookworm"
# name -> (Dockerfile under deploy/docker/, image it stands in for)
DERIVED = {
    "python": ("nmt-standin/python:3.11-bookworm", "python.Dockerfile", "python:3.11-slim"),
    "prometheus": ("nmt-standin/prometheus:bookworm", "prometheus.Dockerfile", "prom/prometheus"),
    "nginx": ("nmt-standin/nginx:bookworm", "nginx.Dockerfile", "nginx"),
}
LABEL = "org.rnn-nmt-serving.standin.inputs"
# Bump when the rootfs recipe below changes: the base's hash must change with it.
RECIPE_VERSION = "3"
# Like the official slim images: no docs, man pages or translations (fewer bytes for vfs
# to copy into every layer above).
DPKG_EXCLUDES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
"""
# No recommends, and no package caches (77 MB after an `apt-get update`) left in layers.
APT_CONF = """\
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
"""

log = logging.getLogger("nmt-standins")


class StandinError(RuntimeError):
    """A build step failed; the message names the step and ends with its output."""


def _run(cmd: Sequence[str], what: str, **kwargs) -> str:
    result = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise StandinError(
            f"{what} failed ({' '.join(cmd[:4])} ...: exit {result.returncode}):\n{tail}"
        )
    return result.stdout


def image_label(docker: str, ref: str) -> str | None:
    """The inputs label of image ``ref``; None when the image does not exist."""
    result = subprocess.run(
        [docker, "image", "inspect", "--format", f'{{{{ index .Config.Labels "{LABEL}" }}}}', ref],
        capture_output=True,
        text=True,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def image_id(docker: str, ref: str) -> str:
    return _run([docker, "image", "inspect", "--format", "{{.Id}}", ref], f"inspect {ref}").strip()


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:24]


# -- this host's package-index settings --------------------------------------------------

# pip settings that say where and how to reach the index; local paths (file:// indexes,
# find-links, constraint files) do not exist in a container and are left out.
PIP_KEYS = {"index-url", "extra-index-url", "trusted-host", "proxy", "retries", "timeout"}
PIP_ALIASES = {"default-timeout": "timeout"}
CONTAINER_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass(frozen=True)
class HostConfig:
    mirror: str  # Debian mirror URI debootstrap uses
    sources: str  # deb822 sources for the image: the host's Debian entries
    apt_proxy: str  # apt.conf lines of the host's Acquire::*::Proxy settings
    pip_conf: str  # /etc/pip.conf for the image
    ca_pems: tuple[str, ...]  # every certificate the host trusts

    def digest(self) -> str:
        pems = sorted("".join(pem.split()) for pem in self.ca_pems)
        return _digest(self.mirror, self.sources, self.apt_proxy, self.pip_conf, *pems)


def _source_entries(etc: Path) -> list[dict[str, list[str]]]:
    """Every enabled `deb` entry of sources.list(.d) as {"uris", "suites", "components",
    "signed-by"}, from one-line and deb822 files alike."""
    entries: list[dict[str, list[str]]] = []
    files = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]
    for path in filter(Path.is_file, files):
        for line in path.read_text().splitlines():
            m = re.match(r"\s*deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)", line)
            if m:
                signed = re.findall(r"signed-by=(\S+)", m.group(1) or "")
                entries.append(
                    {"uris": [m.group(2)], "suites": [m.group(3)], "components": m.group(4).split()}
                    | {"signed-by": signed}
                )
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text()):
            fields: dict[str, list[str]] = {}
            for line in stanza.splitlines():
                m = re.match(r"([A-Za-z-]+):\s*(.*)", line)
                if m and not line.startswith("#"):
                    fields[m.group(1).lower()] = m.group(2).split()
            if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"]) != ["no"]:
                entries.append(fields)
    return entries


def debian_sources(suite: str, etc: Path = Path("/etc/apt")) -> tuple[str, str]:
    """``(mirror, deb822 text)``: the host's entries for Debian ``suite`` and its -updates,
    -security and -backports suites, signed by Debian's keyring (third-party repositories
    are left out: their keys are not in the image)."""
    stanzas, mirror = [], None
    for entry in _source_entries(etc):
        suites = [s for s in entry.get("suites", []) if s == suite or s.startswith(suite + "-")]
        if not suites or any(k != DEBIAN_KEYRING for k in entry.get("signed-by", [])):
            continue
        for uri in entry.get("uris", []):
            if suite in suites and mirror is None:
                mirror = uri
            stanzas.append(
                f"Types: deb\nURIs: {uri}\nSuites: {' '.join(suites)}\n"
                f"Components: {' '.join(entry.get('components', ['main']))}\n"
                f"Signed-By: {DEBIAN_KEYRING}\n"
            )
    if mirror is None:
        raise StandinError(f"no Debian {suite} entry in {etc}/sources.list or sources.list.d/")
    return mirror, "\n".join(stanzas)


def pip_settings(python: str = sys.executable) -> dict[str, str]:
    """The host's effective pip settings of PIP_KEYS (environment over files)."""
    out = _run([python, "-m", "pip", "config", "list"], "pip config list")
    files: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"(:env:|[\w-]+)\.([\w-]+)=(.*)", line.strip())
        if not m:
            continue
        key = PIP_ALIASES.get(m.group(2), m.group(2))
        value = m.group(3).strip().strip("'\"")
        if key in PIP_KEYS:
            (env if m.group(1) == ":env:" else files)[key] = value
    settings = {**files, **env}
    for key in ("index-url", "extra-index-url"):
        remote = [u for u in settings.get(key, "").split() if re.match(r"https?://", u)]
        if remote:
            settings[key] = " ".join(remote)
        else:
            settings.pop(key, None)
    return settings


def host_config(suite: str = "bookworm") -> HostConfig:
    mirror, sources = debian_sources(suite)
    dump = _run(["apt-config", "dump"], "apt-config dump")
    apt_proxy = "".join(
        line + "\n" for line in dump.splitlines() if re.match(r"Acquire::\w+::Proxy", line)
    )
    settings = pip_settings()
    pip_conf = "[global]\n# This host's pip index settings (deploy/docker/standins.py)\n" + "".join(
        f"{k} = {v}\n" for k, v in sorted(settings.items())
    )
    pip_conf += f"cert = {CONTAINER_CA_BUNDLE}\ndisable-pip-version-check = true\n"
    bundles = {Path(CONTAINER_CA_BUNDLE)}
    for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        if os.environ.get(var):
            bundles.add(Path(os.environ[var]))
    pems = tuple(pem for b in sorted(bundles) if b.is_file() for pem in _pem_blocks(b.read_text()))
    return HostConfig(mirror, sources, apt_proxy, pip_conf, pems)


# -- nmt-standin/debian:bookworm ---------------------------------------------------------


def base_inputs(cfg: HostConfig) -> str:
    return _digest(RECIPE_VERSION, SUITE, cfg.mirror, DPKG_EXCLUDES, APT_CONF, cfg.digest())


def _pem_blocks(text: str) -> list[str]:
    return re.findall(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", text, re.S)


def _customize_rootfs(root: Path, cfg: HostConfig) -> None:
    """This host's apt/pip/CA settings into a fresh rootfs, and the image clean-ups."""
    (root / "etc/dpkg/dpkg.cfg.d/01-nmt-standin-slim").write_text(DPKG_EXCLUDES)
    # What debootstrap installed before those rules existed: the same paths, by hand.
    # (Some doc directories are symlinks to another package's: walk only real ones.)
    docs = [d for d in (root / "usr/share/doc").iterdir() if not d.is_symlink()]
    doomed = [p for d in docs for p in d.iterdir() if p.name != "copyright"]
    for sub in ("man", "info", "lintian", "locale"):
        doomed += [p for p in (root / "usr/share" / sub).glob("*") if p.name != "locale.alias"]
    for path in doomed:
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    # Package scripts must not try to start services in an image build (as Debian's own
    # images did): invoke-rc.d asks policy-rc.d, 101 = "not allowed".
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    (root / "etc/apt/apt.conf.d/90nmt-standin").write_text(APT_CONF + cfg.apt_proxy)
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d/debian.sources").write_text(cfg.sources)
    (root / "etc/pip.conf").write_text(cfg.pip_conf)
    # CA certificates the host trusts and Debian's bundle lacks (a TLS-inspecting proxy's
    # CA, a company CA): without them pip inside a build fails certificate verification.
    bundle = (root / CONTAINER_CA_BUNDLE.lstrip("/")).read_text()
    debian = {"".join(pem.split()) for pem in _pem_blocks(bundle)}
    extra = list(
        {"".join(p.split()): p for p in cfg.ca_pems if "".join(p.split()) not in debian}.values()
    )
    local = root / "usr/local/share/ca-certificates"
    for i, pem in enumerate(extra):
        (local / f"nmt-standin-host-{i:03d}.crt").write_text(pem + "\n")
    if extra:
        _run(["chroot", str(root), "update-ca-certificates"], "update-ca-certificates")
    log.info("rootfs: %d CA certificate(s) of this host added", len(extra))
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (root / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
    # Docker bind-mounts its own; debootstrap left the host's copies.
    for name in ("etc/resolv.conf", "etc/hostname"):
        (root / name).unlink(missing_ok=True)


def build_base(docker: str, cfg: HostConfig, force: bool = False) -> str:
    inputs = base_inputs(cfg)
    if not force and image_label(docker, BASE) == inputs:
        log.info("%s is up to date", BASE)
        return BASE
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise StandinError("debootstrap is not installed (apt-get install debootstrap)")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nmt-standin-") as tmp:
        root = Path(tmp) / "rootfs"
        log.info("debootstrap %s from %s", SUITE, cfg.mirror)
        _run(
            [
                debootstrap,
                "--variant=minbase",
                "--include=ca-certificates",
                SUITE,
                str(root),
                cfg.mirror,
            ],
            "debootstrap",
        )
        _customize_rootfs(root, cfg)
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            'CMD ["bash"]',
            f"LABEL {LABEL}={inputs}",
        ]
        cmd = [docker, "import", *(f"--change={c}" for c in changes), "-", BASE]
        tar = subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(root), "-c", "."], stdout=subprocess.PIPE
        )
        try:
            _run(cmd, "docker import", stdin=tar.stdout)
        finally:
            tar.stdout.close()
            if tar.wait() != 0:
                raise StandinError(f"tar of the rootfs exited {tar.returncode}")
    log.info("built %s in %.0f s", BASE, time.monotonic() - start)
    return BASE


# -- images FROM the base ----------------------------------------------------------------


def _cli_major(cli: str) -> int | None:
    """Major version of a docker CLI (`Docker version 20.10.24+dfsg1, build ...`)."""
    result = subprocess.run([cli, "--version"], capture_output=True, text=True)
    m = re.search(r"version (\d+)\.", result.stdout)
    return int(m.group(1)) if result.returncode == 0 and m else None


def build_cli(docker: str = "docker") -> tuple[str, dict[str, str]]:
    """``(cli, environment)`` to run `docker build` with: BuildKit where a CLI here can
    drive it, else the legacy builder.

    The legacy builder commits a container for every instruction, ENV and LABEL included,
    and on the vfs storage driver each one copies the whole image: the serving image took
    140 s that way and 28 s with BuildKit. CLIs from 23 on build with BuildKit only
    through the buildx plugin; older ones (Debian 12's docker.io CLI, 20.10, which a
    newer CLI earlier on PATH may hide) drive the engine's built-in BuildKit themselves."""
    if subprocess.run([docker, "buildx", "version"], capture_output=True).returncode == 0:
        return docker, {**os.environ, "DOCKER_BUILDKIT": "1"}
    first = shutil.which(docker)
    on_path = [str(Path(d) / "docker") for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for cli in dict.fromkeys([first, *on_path]):  # in order, once each
        if cli and os.access(cli, os.X_OK) and (_cli_major(cli) or 99) < 23:
            return cli, {**os.environ, "DOCKER_BUILDKIT": "1"}
    log.warning("no docker CLI here builds with BuildKit (no buildx): legacy builder, slower")
    return docker, {**os.environ, "DOCKER_BUILDKIT": "0"}


def proxy_build_args() -> list[str]:
    """This host's proxy variables as build args (Docker knows HTTP(S)_PROXY/NO_PROXY
    without an ARG and keeps them out of the image)."""
    names = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
    return [f"--build-arg={k}={os.environ[k]}" for k in names if os.environ.get(k)]


def build_derived(docker: str, which: str, force: bool = False) -> str:
    name, dockerfile, _ = DERIVED[which]
    path = HERE / dockerfile
    base = image_id(docker, BASE)
    inputs = _digest(path.read_bytes(), base)
    if not force and image_label(docker, name) == inputs:
        log.info("%s is up to date", name)
        return name
    log.info("building %s", name)
    start = time.monotonic()
    cli, env = build_cli(docker)
    _run(
        [cli, "build", "--quiet", "--build-arg", f"BASE_IMAGE={BASE}", *proxy_build_args()]
        + ["--label", f"{LABEL}={inputs}", "-t", name, "-f", str(path), str(HERE)],
        f"docker build {name}",
        env=env,
    )
    log.info("built %s in %.0f s", name, time.monotonic() - start)
    return name


def build_all(
    docker: str = "docker", force: bool = False, only: Sequence[str] = ()
) -> dict[str, str]:
    """Build (or keep) the base and the stand-ins named in ``only`` (all when empty):
    ``{"python": "nmt-standin/python:3.11-bookworm", ...}``."""
    build_base(docker, host_config(SUITE), force)
    built = {which: build_derived(docker, which, force) for which in (only or DERIVED)}
    # Stand-ins a rebuild replaced stay on disk untagged (on vfs, a full copy per layer):
    # remove them, and only them.
    _run([docker, "image", "prune", "--force", "--filter", f"label={LABEL}"], "image prune")
    return built


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="standins", description=__doc__.splitlines()[0])
    p.add_argument("--force", action="store_true", help="rebuild even when up to date")
    p.add_argument("--docker", default="docker", help="docker CLI (default: docker)")
    p.add_argument(
        "only", nargs="*", metavar="NAME", help=f"any of {', '.join(DERIVED)} (default: all)"
    )
    args = p.parse_args(argv)
    unknown = set(args.only) - set(DERIVED)
    if unknown:
        p.error(
            f"unknown stand-in(s) {', '.join(sorted(unknown))}: choose from {', '.join(DERIVED)}"
        )
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if os.geteuid() != 0:
        p.error("must run as root (debootstrap, chroot)")
    try:
        built = build_all(args.docker, args.force, args.only)
    except StandinError as exc:
        log.error("%s", exc)
        return 1
    for which, name in built.items():
        print(f"{name}\t(stands in for {DERIVED[which][2]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
