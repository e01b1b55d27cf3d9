"""``gluon.contrib.rnn``: convolutional recurrent cells, ``VariationalDropoutCell`` and ``LSTMPCell``."""

from mxkit.gluon.contrib.rnn import conv_rnn_cell, rnn_cell
from mxkit.gluon.contrib.rnn.conv_rnn_cell import (
    Conv1DGRUCell,
    Conv1DLSTMCell,
    Conv1DRNNCell,
    Conv2DGRUCell,
    Conv2DLSTMCell,
    Conv2DRNNCell,
    Conv3DGRUCell,
    Conv3DLSTMCell,
    Conv3DRNNCell,
)
from mxkit.gluon.contrib.rnn.rnn_cell import LSTMPCell, VariationalDropoutCell

__all__ = ["Conv1DGRUCell", "Conv1DLSTMCell", "Conv1DRNNCell", "Conv2DGRUCell", "Conv2DLSTMCell", "Conv2DRNNCell",
           "Conv3DGRUCell", "Conv3DLSTMCell", "Conv3DRNNCell", "LSTMPCell", "VariationalDropoutCell", "conv_rnn_cell",
           "rnn_cell"]
