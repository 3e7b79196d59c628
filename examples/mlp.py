import torch
import torch.nn as nn


# onnx-export: args=(torch.rand(97, 8), {"tensor_x": torch.rand(97, 8)}, [torch.rand(97, 8)]),
#     dynamic_shapes=({0: "batch_size"}, {"tensor_x": {0: "batch_size"}}, [{0: "batch_size"}]),
#     input_names=["tensor_input", "tensor_x", "list_input_index_0"], output_names=["output"]
class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(8, 8, bias=True)
        self.fc1 = nn.Linear(8, 4, bias=True)
        self.fc2 = nn.Linear(4, 2, bias=True)
        self.fc3 = nn.Linear(2, 2, bias=True)
        self.fc_combined = nn.Linear(8 + 8 + 8, 8, bias=True)

    def forward(self, tensor_x: torch.Tensor, input_dict: dict, input_list: list):
        dict_tensor = input_dict["tensor_x"]
        list_tensor = input_list[0]
        combined_tensor = torch.cat([tensor_x, dict_tensor, list_tensor], dim=1)
        combined_tensor = torch.sigmoid(self.fc_combined(combined_tensor))
        combined_tensor = torch.sigmoid(self.fc0(combined_tensor))
        combined_tensor = torch.sigmoid(self.fc1(combined_tensor))
        combined_tensor = torch.sigmoid(self.fc2(combined_tensor))
        return self.fc3(combined_tensor)
