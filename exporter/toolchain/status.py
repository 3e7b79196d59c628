"""What onnxlens runs on: package versions, and which capabilities and speed patches are on.

``onnxlens toolchain``, the JSON report, the server's ``onnxlens/status`` and the one-line
message a user on an untested or degraded torch gets all come from ``ToolchainStatus``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from exporter import versions
from exporter.toolchain.report import ToolchainFacts, ToolchainReport
from exporter.toolchain.shortcuts import IN_TORCH

PACKAGES = versions.REPORTED_PACKAGES


@dataclass(frozen=True)
class ToolchainStatus(ToolchainFacts):
    """The facts (capabilities: torch_compat.CAPABILITIES; speed patches:
    speedups.SPEEDUPS) and what they mean for a user."""

    def degraded_capabilities(self) -> dict[str, str]:
        return {name: why for name, why in self.capabilities.items() if why}

    def speedups_lost(self) -> dict[str, str]:
        """Patches off for a reason other than the user's own off switch."""
        return {name: why for name, why in self.speedups.items()
                if why and "turned off by" not in why and why != IN_TORCH}

    def message(self) -> str | None:
        """One line for a user whose torch is untested or whose checks are degraded."""
        from exporter.toolchain import torch_compat

        parts = []
        torch_version = self.packages.get("torch")
        if not self.torch_tested:
            parts.append(f"torch {torch_version} is not a version onnxlens is tested with "
                         f"({', '.join(self.tested_torch)})")
        degraded = self.degraded_capabilities()
        if len(degraded) == 1:
            ((name, why),) = degraded.items()
            parts.append(f"degraded: {torch_compat.CAPABILITIES[name].without} [{name}: {why}]")
        elif degraded:
            reasons = sorted(set(degraded.values()))
            parts.append(f"degraded: {', '.join(degraded)} ({'; '.join(reasons)}; "
                         "`onnxlens toolchain` says what each one loses)")
        lost = self.speedups_lost()
        if lost:
            parts.append(f"slower: {len(lost)} of {len(self.speedups)} speed patches are off "
                         f"({', '.join(lost)})")
        if not parts:
            return None
        if not degraded:
            parts.append("every capability passed its probe")
        return "onnxlens: " + "; ".join(parts) + "."

    def report(self) -> ToolchainReport:
        """As the front ends receive it (``Ready``), with its message."""
        return ToolchainReport(**asdict(self), message=self.message())

    def describe(self) -> str:
        """Several lines, for ``onnxlens toolchain``."""
        lines = [f"{name} {version}" for name, version in self.packages.items()
                 if version is not None or name in PACKAGES[:4]]
        lines = [line.replace(" None", " (not installed)") for line in lines]
        lines.append("torch tested: " + ("yes" if self.torch_tested else "no") +
                     f" (tested: {', '.join(self.tested_torch)})")
        from exporter.toolchain import torch_compat

        for title, states in (("capabilities", self.capabilities),
                              ("speed patches", self.speedups)):
            on = [name for name, why in states.items() if not why]
            lines.append(f"{title} on: {', '.join(on) or 'none'}")
            built_in = [name for name, why in states.items() if why == IN_TORCH]
            if built_in:
                lines.append(f"{title} done by torch itself: {', '.join(built_in)}")
            for name, why in states.items():
                if why and why != IN_TORCH:
                    loses = torch_compat.CAPABILITIES.get(name)
                    lines.append(f"{title} off: {name} ({why})"
                                 + (f": {loses.without}" if loses else ""))
        return "\n".join(lines)


def current() -> ToolchainStatus:
    """The status now (imports torch)."""
    from exporter.toolchain import speedups, torch_compat

    return ToolchainStatus(
        packages={name: torch_compat.TORCH_VERSION if name == "torch"
                  else versions.installed_version(name) for name in PACKAGES},
        torch_tested=torch_compat.TORCH_TESTED,
        tested_torch=[release.version for release in versions.TESTED_TORCH],
        capabilities={name: result.reason if not result.ok else ""
                      for name, result in torch_compat.probe_results().items()},
        speedups={speedup.name: speedups.why_off(speedup) or "" for speedup in speedups.SPEEDUPS},
    )
