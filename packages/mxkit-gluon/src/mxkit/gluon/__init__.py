"""mxkit-gluon: MXNet 1.x's Gluon API (``mx.gluon``).

Write a network imperatively from ``nn`` layers, train it with ``Trainer`` under
``mx.autograd.record()``, and ``hybridize()`` it to run as one Symbol graph whose memory
the configured planner lays out once per input signature.
"""

from mxkit.gluon import contrib, data, loss, model_zoo, nn, rnn, utils
from mxkit.gluon.block import Block, HybridBlock
from mxkit.gluon.parameter import (
    BlockInputError,
    Constant,
    DeferredInitializationError,
    GluonError,
    Parameter,
    ParameterDict,
    StorageTypeError,
)
from mxkit.gluon.symbol_block import SymbolBlock
from mxkit.gluon.trainer import Trainer

__all__ = ["Block", "BlockInputError", "Constant", "DeferredInitializationError", "GluonError", "HybridBlock",
           "Parameter", "ParameterDict", "StorageTypeError", "SymbolBlock", "Trainer", "contrib", "data", "loss",
           "model_zoo", "nn", "rnn", "utils"]
