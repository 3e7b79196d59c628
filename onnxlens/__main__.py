"""``python -m onnxlens``: the ``onnxlens`` command."""

import sys

from onnxlens.cli import main

sys.exit(main())
