"""Issue 38, item 6: the target's call fails, and the script's own code swallows the failure
(a bare ``except``, ``except BaseException``, ``except Exception``, ``contextlib.suppress``, a
thread, a pool's future, a helper): the call's failure is the target's verdict all the same."""

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn


class Branching(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # decided by the values: torch.export cannot trace it
            return x
        return -x


EXAMPLE = (torch.randn(2, 3),)


def export_or_none(model, example, path):
    try:
        return torch.onnx.export(model, example, path)
    except:  # noqa: E722
        return None


# onnx-export:
def bare_except():
    try:
        torch.onnx.export(Branching(), EXAMPLE, "bare.onnx")
    except:  # noqa: E722
        pass


# onnx-export:
def base_exception():
    try:
        torch.onnx.export(Branching(), EXAMPLE, "base.onnx")
    except BaseException as error:
        print("export failed:", error)


# onnx-export:
def plain_exception():
    try:
        torch.onnx.export(Branching(), EXAMPLE, "plain.onnx")
    except Exception as error:
        print("export failed:", error)


# onnx-export:
def suppressed():
    with contextlib.suppress(BaseException):
        torch.onnx.export(Branching(), EXAMPLE, "suppressed.onnx")


# onnx-export:
def in_a_thread():
    worker = threading.Thread(target=lambda: torch.onnx.export(Branching(), EXAMPLE, "thread.onnx"))
    worker.start()
    worker.join()


# onnx-export:
def in_a_pool():
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(lambda: torch.onnx.export(Branching(), EXAMPLE, "pool.onnx"))
    print("export failed:", future.exception())


# onnx-export:
def through_a_helper():
    program = export_or_none(Branching(), EXAMPLE, "helper.onnx")
    print("exported:", program is not None)


# onnx-export:
def local_worker():
    def work():
        try:
            torch.onnx.export(Branching(), EXAMPLE, "local.onnx")
        except BaseException:
            pass

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


if __name__ == "__main__":
    for function in (bare_except, base_exception, plain_exception, suppressed, in_a_thread,
                     in_a_pool, through_a_helper, local_worker):
        function()
