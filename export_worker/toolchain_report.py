"""``onnxlens toolchain``'s process: the versions, and which capabilities and speed patches
work with this torch, found by the probes a worker runs when it starts. A process of its
own, so that the command line never imports torch (``python -m
export_worker.toolchain_report``)."""

from __future__ import annotations

import sys


def main() -> int:
    from exporter import __version__
    from exporter.pipeline.session import ExportSession
    from exporter.toolchain import status

    ExportSession().probe_toolchain()
    print(f"onnxlens {__version__}")
    print(status.current().describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
