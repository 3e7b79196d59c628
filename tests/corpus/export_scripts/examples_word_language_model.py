"""LSTM language-model export, modelled on pytorch/examples' word_language_model.

Source: https://github.com/pytorch/examples
        word_language_model/main.py (``export_onnx``) and word_language_model/model.py
        (``RNNModel``), at commit 77f55b912142e11fcfdf5b530231fb9c52f181e8; the export call
        has been unchanged since commit eee5ca3b68d59aa2d6f33d1499499ee5c0963300 (2018).
License: BSD-3-Clause, Copyright (c) 2017, Pytorch contributors.

Adapted: only the LSTM branch of ``RNNModel`` is kept (no GRU/RNN_TANH/RNN_RELU or weight
tying), with small sizes (vocabulary 100, embedding and hidden size 16, 2 layers) and random
weights instead of training on WikiText-2; ``export_onnx(path, batch_size=1, seq_len=bptt)`` is
inlined into a parameterless ``export()`` with the script's defaults (bptt=35). The call is the
original one: positional arguments only, the LSTM state passed as a nested tuple, no opset,
no names and no dynamic axes.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

        self.init_weights()

        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


# onnx-export:
def export():
    model = RNNModel("LSTM", ntoken=100, ninp=16, nhid=16, nlayers=2, dropout=0.2)
    path, batch_size, seq_len = "word_language_model.onnx", 1, 35
    model.eval()
    dummy_input = torch.LongTensor(seq_len * batch_size).zero_().view(-1, batch_size)
    hidden = model.init_hidden(batch_size)
    torch.onnx.export(model, (dummy_input, hidden), path)


if __name__ == "__main__":
    export()
