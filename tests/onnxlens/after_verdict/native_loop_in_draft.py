"""Models whose export fails at capture, and whose draft export (which onnxlens runs after
that, to list every problem) then blocks where the job's own timer cannot stop it: native
code that never returns to Python, or a wait with the timer's signal blocked. Only the worker
can stop them, at the time limit, and the verdict known before must survive that."""

import functools
import signal
import time

import torch


def _block_forever() -> None:
    """Wait with SIGALRM blocked: the job's timer never interrupts it (costs no CPU)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(10**6)


# onnx-export: args=(torch.ones(2, 4),)
class BranchThenNativeLoop(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            if torch.compiler.is_exporting():  # only the draft export gets past the branch
                x = x + sum(range(10**15))  # native: no signal handler runs until it returns
            return x * 2
        return x - 1


# onnx-export: args=(torch.tensor([3.0, 1.0]),)
class SizeFromValueThenBlocked(torch.nn.Module):
    def forward(self, counts: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(int(counts.sum().item()))
        if torch.compiler.is_exporting():
            _block_forever()
        return total + 1


def _logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


class Router(torch.nn.Module):
    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.route(x)

    @_logged
    def route(self, x: torch.Tensor) -> torch.Tensor:
        if x.max() < 5:
            if torch.compiler.is_exporting():
                _block_forever()
            return x.relu()
        return x.tanh()


# onnx-export:
def router():
    return Router(), (torch.zeros(3, 3),)
