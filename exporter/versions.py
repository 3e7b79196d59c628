"""The torch releases onnxlens is tested with, and how each is installed: the one place.

Read by the project's scripts before any virtualenv exists, and by the VS Code extension's
"Install" action through the interpreter it installs into, so this module uses the standard
library only and runs as a script:

    python exporter/versions.py primary          # 2.13.0
    python exporter/versions.py recommended      # 2.15.0
    python exporter/versions.py pins 2.14.1      # torch==2.14.1 torchvision==0.29.1
    python exporter/versions.py install torch onnx   # JSON: the pip commands, and what they do
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class TorchRelease:
    """A torch release the tests run on, with the packages pinned beside it."""

    version: str
    #: pinned beside torch in the project's test environments (torchvision only imports
    #: beside the torch it was built for)
    companions: tuple[str, ...] = ()

    @property
    def series(self) -> str:
        """``2.13`` of ``2.13.0``: patch releases of a tested series are tested."""
        return ".".join(self.version.split(".")[:2])

    def pins(self) -> list[str]:
        return [f"torch=={self.version}", *self.companions]


#: Oldest first. The first is the primary one: the development environment (``.venv``) and the
#: whole test suite run on it (a CPU build, small and quick to install, also where the tests
#: install torch into fresh environments); every other one runs the tests that depend on torch
#: (docs/torch-versions.md says why these).
TESTED_TORCH: tuple[TorchRelease, ...] = (
    TorchRelease("2.13.0"),
    TorchRelease("2.14.1", companions=("torchvision==0.29.1",)),
    TorchRelease("2.15.0"),
)
PRIMARY_TORCH = TESTED_TORCH[0]
#: The newest tested release, what a new user gets: the README's install, the "Install"
#: action, the GitHub Action's default and the install commands of messages.
RECOMMENDED_TORCH = TESTED_TORCH[-1]

#: The export packages beside torch (the ``export`` extra of pyproject.toml).
EXPORT_PACKAGES = ("onnx", "onnxscript", "onnxruntime")

#: PyTorch's CPU-only wheels. On Linux, PyPI's torch is a CUDA build that pulls gigabytes of
#: CUDA packages; macOS and Windows wheels on PyPI are CPU builds already
#: (https://pytorch.org/get-started/locally/).
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"


def tested_series() -> tuple[str, ...]:
    return tuple(release.series for release in TESTED_TORCH)


def is_tested(torch_version: str) -> bool:
    """Whether ``torch.__version__`` (``2.13.0+cpu``) is of a tested series."""
    plain = torch_version.split("+")[0]
    return any(plain == series or plain.startswith(series + ".") for series in tested_series())


def release(version: str) -> TorchRelease:
    for candidate in TESTED_TORCH:
        if candidate.version == version:
            return candidate
    known = ", ".join(candidate.version for candidate in TESTED_TORCH)
    raise SystemExit(f"versions: torch {version} is not one onnxlens is tested with ({known})")


@dataclass(frozen=True)
class InstallPlan:
    """What the "Install" action runs (``python -m pip`` + each argument list) and says."""

    commands: list[list[str]]
    description: str


def install_plan(missing: list[str], system: str | None = None) -> InstallPlan:
    """pip commands that install the ``missing`` export packages: torch pinned to the
    recommended release, from PyTorch's CPU index on Linux; the others from the usual index."""
    system = system or platform.system()
    commands: list[list[str]] = []
    said: list[str] = []
    if "torch" in missing:
        command = ["install", f"torch=={RECOMMENDED_TORCH.version}"]
        if system == "Linux":
            command += ["--index-url", CPU_INDEX_URL]
            said.append(f"torch {RECOMMENDED_TORCH.version} (CPU build, from {CPU_INDEX_URL})")
        else:
            said.append(f"torch {RECOMMENDED_TORCH.version}")
        commands.append(command)
    others = [name for name in missing if name != "torch"]
    if others:
        # torch pinned again, so that pip never replaces the torch just installed
        commands.append(["install", *others, f"torch=={RECOMMENDED_TORCH.version}"]
                        if "torch" in missing else ["install", *others])
        said.append(", ".join(others))
    return InstallPlan(commands, "pip will install " + " and ".join(said) if said else "")


def install_hint() -> str:
    """The export toolchain's install, as one shell line for messages."""
    plan = install_plan(["torch", *EXPORT_PACKAGES])
    return " && ".join("pip " + " ".join(command) for command in plan.commands)



#: reported by ``onnxlens --version`` and the toolchain status (the last two only when
#: installed)
REPORTED_PACKAGES = ("torch", "onnx", "onnxscript", "onnxruntime", "transformers",
                     "torchvision")


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def installed_packages() -> str:
    """``onnxlens --version``'s lines after its own: what is installed, from the packages'
    metadata, so that it answers at once (importing torch takes seconds; ``onnxlens
    toolchain`` says what works)."""
    found = {name: installed_version(name) for name in REPORTED_PACKAGES}
    lines = [f"{name} {version or '(not installed)'}" for name, version in found.items()
             if version is not None or name in REPORTED_PACKAGES[:4]]
    torch = found["torch"]
    tested = [release.version for release in TESTED_TORCH]
    lines.append("torch tested: " + ("yes" if torch and is_tested(torch) else "no")
                 + f" (tested: {', '.join(tested)})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["primary"]:
        print(PRIMARY_TORCH.version)
    elif argv[:1] == ["recommended"]:
        print(RECOMMENDED_TORCH.version)
    elif argv[:1] == ["pins"] and len(argv) == 2:
        print(" ".join(release(argv[1]).pins()))
    elif argv[:1] == ["tested"]:
        print(" ".join(candidate.version for candidate in TESTED_TORCH))
    elif argv[:1] == ["install"]:
        plan = install_plan(argv[1:])
        print(json.dumps({"commands": plan.commands, "description": plan.description}))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
