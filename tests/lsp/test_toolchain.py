"""The server says what its worker's torch is and what is degraded: ``onnxlens/status``
carries the toolchain, and a degraded one is told once as an information message (and
logged), while checks go on without false errors."""

from __future__ import annotations

import asyncio
import os

import pytest_lsp
import torch
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from exporter.toolchain import torch_compat
from tests.lsp.conftest import (
    SERVER,
    diagnostics_for,
    open_file,
    served,
    server_status,
    session,
    wait_for,
)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path):
    async with session(lsp_client, tmp_path):
        yield


async def _ready_status(client: LanguageClient) -> dict:
    """The status once the worker finished its warm-up (its toolchain is known then)."""
    for _ in range(1800):
        status = await server_status(client)
        if status["worker"].get("toolchain"):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError("the worker never became ready")


async def test_status_reports_the_workers_toolchain(client: LanguageClient):
    status = await _ready_status(client)
    toolchain = status["worker"]["toolchain"]
    assert toolchain["packages"]["torch"] == torch.__version__
    assert toolchain["torch_tested"] is True
    # (pytest-lsp turns the hyphenated names into attribute names: compare the states)
    assert list(toolchain["capabilities"].values()) == [""] * len(torch_compat.CAPABILITIES)
    assert toolchain["message"] is None
    assert not [m for m in client.messages if "tested with" in m.message]


DEGRADED = ClientServerConfig(
    server_command=SERVER.server_command,
    server_env={**(SERVER.server_env or {}), torch_compat.ENVIRONMENT_VARIABLE: "all"})


@pytest_lsp.fixture(config=DEGRADED)
async def degraded(lsp_client: LanguageClient, tmp_path):
    (tmp_path / "model.py").write_text(
        "import torch\n\n\n"
        "# onnx-export: args=(torch.randn(2, 3),), dynamic_shapes=({0: 'batch'},)\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.sigmoid(x) * 2\n")
    async with session(lsp_client, tmp_path):
        yield


async def test_a_degraded_toolchain_is_told_once_and_checks_stay_right(degraded: LanguageClient):
    client = degraded
    told = await wait_for(lambda: [m for m in client.messages if "degraded" in m.message])
    (message,) = told
    assert message.type == types.MessageType.Info
    assert message.message == (
        "onnxlens: degraded: " + ", ".join(torch_compat.CAPABILITIES) + " (turned off by "
        "ONNXLENS_CAPABILITIES_OFF; `onnxlens toolchain` says what each one loses).")
    assert any(m.message == message.message for m in client.log_messages)
    status = await server_status(client)
    assert status["worker"]["toolchain"]["message"] == message.message
    uri = open_file(client, client.workspace_root / "model.py")
    assert await diagnostics_for(client, uri) == []  # the clean model stays clean
    assert len([m for m in client.messages if "degraded" in m.message]) == 1


def _without_torch(root) -> dict[str, str]:
    """The server's environment with a `torch` that cannot be imported first on the path
    (the server itself never imports torch; its worker does)."""
    fake = root / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named torch (test)')\n")
    env = dict(SERVER.server_env or {})
    env["PYTHONPATH"] = os.pathsep.join([str(root / "no-torch"), env.get("PYTHONPATH", "")])
    return env


async def test_a_missing_toolchain_is_said_once_and_the_worker_not_restarted(tmp_path):
    """The worker reports the missing packages and exits; the server started it again at
    once, forever (issue "nothing lost")."""
    config = ClientServerConfig(server_command=SERVER.server_command,
                                server_env=_without_torch(tmp_path))
    async with served(tmp_path, config=config) as client:
        await wait_for(lambda: [m for m in client.messages if "cannot check models" in m.message])
        await asyncio.sleep(4)  # a restart loop shows within this time
        starts = [m for m in client.log_messages if m.message == "export worker starting"]
        assert len(starts) == 1
        (told,) = [m for m in client.messages if "cannot check models" in m.message]
        assert "the export toolchain is missing" in told.message
        status = await server_status(client)
        assert status["workerState"] == "missing" and status["worker"]["ready"] is False
