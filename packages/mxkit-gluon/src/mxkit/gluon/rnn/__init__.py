"""Recurrent layers and cells (``mx.gluon.rnn``)."""

from mxkit.gluon.rnn.rnn_cell import (
    BidirectionalCell,
    DropoutCell,
    GRUCell,
    HybridRecurrentCell,
    HybridSequentialRNNCell,
    LSTMCell,
    ModifierCell,
    RecurrentCell,
    ResidualCell,
    RNNCell,
    SequentialRNNCell,
    ZoneoutCell,
)
from mxkit.gluon.rnn.rnn_layer import GRU, LSTM, RNN

__all__ = ["GRU", "LSTM", "RNN", "BidirectionalCell", "DropoutCell", "GRUCell", "HybridRecurrentCell",
           "HybridSequentialRNNCell", "LSTMCell", "ModifierCell", "RNNCell", "RecurrentCell", "ResidualCell",
           "SequentialRNNCell", "ZoneoutCell"]
