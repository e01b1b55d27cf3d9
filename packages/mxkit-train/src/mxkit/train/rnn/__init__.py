"""``mx.rnn``: MXNet 1.x's symbolic RNN cells, bucketing text iterator and RNN checkpoints.

Cells build unrolled graphs from ``FullyConnected`` steps (:class:`RNNCell`, :class:`LSTMCell`,
:class:`GRUCell`) or from the fused ``RNN`` operator (:class:`FusedRNNCell`); containers and
modifiers combine them. :class:`BucketSentenceIter` feeds ``mx.mod.BucketingModule``.
"""

from mxkit.train.rnn.cells import BaseRNNCell, GRUCell, LSTMCell, RNNCell, RNNParams
from mxkit.train.rnn.checkpoint import do_rnn_checkpoint, load_rnn_checkpoint, save_rnn_checkpoint
from mxkit.train.rnn.conv_cells import BaseConvRNNCell, ConvGRUCell, ConvLSTMCell, ConvRNNCell
from mxkit.train.rnn.fused import FusedRNN, FusedRNNCell
from mxkit.train.rnn.io import BucketSentenceIter, encode_sentences
from mxkit.train.rnn.wrappers import (
    BidirectionalCell,
    DropoutCell,
    ModifierCell,
    ResidualCell,
    SequentialRNNCell,
    ZoneoutCell,
)

__all__ = ["BaseConvRNNCell", "BaseRNNCell", "BidirectionalCell", "BucketSentenceIter", "ConvGRUCell", "ConvLSTMCell",
           "ConvRNNCell", "DropoutCell", "FusedRNN", "FusedRNNCell", "GRUCell", "LSTMCell", "ModifierCell", "RNNCell",
           "RNNParams", "ResidualCell", "SequentialRNNCell", "ZoneoutCell", "do_rnn_checkpoint", "encode_sentences",
           "load_rnn_checkpoint", "save_rnn_checkpoint"]
