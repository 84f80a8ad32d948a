"""Which version of each model the server loads: the newest one suited to the device."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from service.bundle import BundleError, read_manifest
from service.server import ServerError, find_bundles
from tests.committed import EN_ES_FP32_VERSION, EN_ES_INT8_VERSION


def add_version(repo: Path, name: str, version: str, precision: str | None) -> Path:
    path = repo / name / version
    path.mkdir(parents=True)
    manifest = {} if precision is None else {"precision": precision}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize(
    ("precisions", "gpu", "chosen"),
    [
        ({"1": "fp32", "2": "int8"}, False, "2"),
        ({"1": "fp32", "2": "int8"}, True, "1"),
        ({"1": "fp32", "2": "fp16"}, False, "1"),
        ({"1": "fp32", "2": "fp16"}, True, "2"),
        ({"1": "fp32", "3": "int8", "10": "fp32"}, False, "10"),  # numeric, not string order
        ({"1": None, "2": "fp16"}, False, "1"),  # no precision recorded = fp32
        ({"4": "int8"}, True, "4"),  # nothing suits the device: the newest anyway
    ],
)
def test_newest_version_suited_to_the_device(tmp_path, precisions, gpu, chosen):
    for version, precision in precisions.items():
        add_version(tmp_path, "en-es", version, precision)
    assert find_bundles(tmp_path, gpu=gpu) == {"en-es": tmp_path / "en-es" / chosen}


def test_directories_that_are_not_versions_are_ignored(tmp_path, caplog):
    add_version(tmp_path, "m", "1", "fp32")
    add_version(tmp_path, "m", "latest", "fp32")
    (tmp_path / "m" / "7").mkdir()  # no manifest: half copied, say so
    (tmp_path / "notes.txt").write_text("x")
    assert find_bundles(tmp_path) == {"m": tmp_path / "m" / "1"}
    assert "model m: version directory 7 has no manifest.json (still being copied?): " in (
        caplog.text
    )


@pytest.mark.parametrize("broken", ["directory", "dangling link"])
def test_a_newest_manifest_that_is_no_file_is_chosen_so_loading_fails_loudly(tmp_path, broken):
    """A manifest.json that is a directory or a dangling link was skipped and the older
    version served without a word (helper-89)."""
    add_version(tmp_path, "m", "1", "fp32")
    newest = tmp_path / "m" / "2"
    newest.mkdir()
    if broken == "directory":
        (newest / "manifest.json").mkdir()
    else:
        (newest / "manifest.json").symlink_to(tmp_path / "gone.json")
    assert find_bundles(tmp_path) == {"m": newest}
    with pytest.raises(BundleError):
        read_manifest(newest)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"fp32"'])
def test_unreadable_newest_manifest_is_chosen_so_loading_fails_loudly(tmp_path, text):
    add_version(tmp_path, "m", "1", "fp32")
    (add_version(tmp_path, "m", "2", "fp32") / "manifest.json").write_text(text)
    assert find_bundles(tmp_path) == {"m": tmp_path / "m" / "2"}
    with pytest.raises(BundleError, match="manifest.json is not"):
        read_manifest(tmp_path / "m" / "2")


def test_empty_repository_says_how_to_fix(tmp_path):
    with pytest.raises(ServerError, match="no model bundles in .*create one with nmt-export"):
        find_bundles(tmp_path)


@pytest.mark.parametrize(
    ("layout", "hint"),
    [
        ("", "is itself a bundle; .*: put it at REPOSITORY/NAME/1 and pass --model-repository"),
        ("m", r"m is a bundle one level too high; .*: move it to .*/m/1"),
        ("m/latest", "version 'latest' of m is not a number; expected <name>/<version>"),
    ],
)
def test_a_bundle_in_the_wrong_place_is_named(tmp_path, layout, hint):
    """Converters write wherever --out says; the server then names the mistake instead
    of suggesting to create a bundle (helper-79's audit)."""
    where = tmp_path / layout
    where.mkdir(parents=True, exist_ok=True)
    (where / "manifest.json").write_text("{}")
    with pytest.raises(ServerError, match=f"no model bundles in {tmp_path}: .*{hint}"):
        find_bundles(tmp_path)


def test_missing_repository(tmp_path):
    with pytest.raises(ServerError, match="model repository not found"):
        find_bundles(tmp_path / "absent")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ServerError, match="model repository is a file, not a directory"):
        find_bundles(tmp_path / "file")


def test_committed_repository_serves_int8_on_cpu_fp32_on_gpu():
    repo = Path(__file__).resolve().parents[2] / "model_repository"
    assert find_bundles(repo)["en-es"].name == EN_ES_INT8_VERSION
    assert find_bundles(repo, gpu=True)["en-es"].name == EN_ES_FP32_VERSION


def test_a_version_is_its_directorys_name_whatever_its_manifest_says(tiny_bundle, tmp_path):
    """A bundle exported to --out b_untied and linked as <repo>/tiny/3 is version 3: the
    number the server chose it by and logs, not the export directory's name."""
    import os

    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    exported = tmp_path / "b_untied"
    shutil.copytree(tiny_bundle.bundle_dir, exported)
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["version"] != "3"
    (tmp_path / "repo" / "tiny").mkdir(parents=True)
    os.symlink(exported, tmp_path / "repo" / "tiny" / "3")
    runtime = RuntimeConfig(providers=("cpu",), intra_op_threads=1)
    assert load_bundle(tmp_path / "repo" / "tiny" / "3", runtime).manifest["version"] == "3"
    # a bundle loaded by another path (nmt-eval --bundle DIR) keeps its own
    assert load_bundle(exported, runtime).manifest["version"] == manifest["version"]


@pytest.mark.parametrize("name", ["/etc/hostname", "../../../etc/hostname", "link"])
def test_a_manifest_naming_a_file_outside_its_bundle_is_refused(tiny_bundle, tmp_path, name):
    """A crafted manifest loaded /proc/self/environ as a vocabulary (helper-87)."""
    import os

    from service.bundle import load_bundle
    from service.sessions import RuntimeConfig

    bundle = tmp_path / "m" / "1"
    shutil.copytree(tiny_bundle.bundle_dir, bundle)
    os.symlink("/etc/hostname", bundle / "link")
    manifest = json.loads((bundle / "manifest.json").read_text())
    side = manifest["tokenizers"]["source"]
    side["file"] = name
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="is outside the bundle directory"):
        load_bundle(bundle, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    manifest["files"][name] = "0" * 64  # in the checked file list too
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="the manifest's files: .* is outside the bundle"):
        read_manifest(bundle)
