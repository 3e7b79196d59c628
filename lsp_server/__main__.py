"""``python -m lsp_server [--tcp HOST:PORT]``: the onnxlens language server."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="onnxlens-lsp", description=__doc__)
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    parser.add_argument("--log-file", help="write the server's debug log here")
    args = parser.parse_args(argv)
    log_file = args.log_file or os.environ.get("ONNXLENS_LSP_LOG")
    if log_file:
        logging.basicConfig(filename=log_file, level=logging.DEBUG,
                            format="%(asctime)s %(name)s %(message)s")
    from lsp_server.app import create_server

    server = create_server()
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not host or not port.isdigit():
            parser.error(f"--tcp takes HOST:PORT, not {args.tcp!r}")
        server.start_tcp(host, int(port))
    else:
        server.start_io()
    server.graphs.close_now()  # however the session ended, no viewer outlives the server
    # pygls raises SystemExit(0 or 1) inside its event loop and start_io swallows it
    return 0 if server.shut_down else 1


if __name__ == "__main__":
    sys.exit(main())
