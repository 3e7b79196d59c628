import torch


class MNISTModel(torch.onnx.ExportableModule):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, 1, bias=False)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, 1, bias=False)
        self.fc1 = torch.nn.Linear(9216, 128, bias=False)
        self.fc2 = torch.nn.Linear(128, 10, bias=False)

    def forward(self, tensor_x: torch.Tensor):
        tensor_x = self.conv1(tensor_x)
        tensor_x = torch.nn.functional.sigmoid(tensor_x)
        tensor_x = self.conv2(tensor_x)
        tensor_x = torch.nn.functional.sigmoid(tensor_x)
        tensor_x = torch.nn.functional.max_pool2d(tensor_x, 2)
        tensor_x = torch.flatten(tensor_x, 1)
        tensor_x = self.fc1(tensor_x)
        tensor_x = torch.nn.functional.sigmoid(tensor_x)
        tensor_x = self.fc2(tensor_x)
        return torch.nn.functional.log_softmax(tensor_x, dim=1)

    def example_arguments(self):
        return (torch.rand((4, 1, 28, 28), dtype=torch.float32),), None

    def dynamic_shapes(self):
        return ({0: "batch"},)
