"""A helper of another file that exports and returns the program (no target of its own)."""

import torch


def exported_elsewhere(model, example, path):
    program = torch.onnx.export(model, example, dynamo=True)
    program.save(path)
    return program
