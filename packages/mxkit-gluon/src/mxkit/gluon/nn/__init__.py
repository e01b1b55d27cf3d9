"""Gluon's neural-network layers (``mx.gluon.nn``)."""

from mxkit.gluon.block import Block, HybridBlock
from mxkit.gluon.nn.activations import ELU, GELU, SELU, Activation, LeakyReLU, PReLU, Swish
from mxkit.gluon.nn.basic_layers import (
    BatchNorm,
    Concatenate,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    HybridConcatenate,
    HybridLambda,
    HybridSequential,
    InstanceNorm,
    Lambda,
    LayerNorm,
    Sequential,
)
from mxkit.gluon.nn.conv_layers import (
    AvgPool1D,
    AvgPool2D,
    AvgPool3D,
    Conv1D,
    Conv1DTranspose,
    Conv2D,
    Conv2DTranspose,
    Conv3D,
    Conv3DTranspose,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    GlobalAvgPool3D,
    GlobalMaxPool1D,
    GlobalMaxPool2D,
    GlobalMaxPool3D,
    MaxPool1D,
    MaxPool2D,
    MaxPool3D,
    ReflectionPad2D,
)
from mxkit.gluon.symbol_block import SymbolBlock

__all__ = [
    "Activation", "AvgPool1D", "AvgPool2D", "AvgPool3D", "BatchNorm", "Block", "Concatenate", "Conv1D",
    "Conv1DTranspose", "Conv2D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Dense", "Dropout", "ELU",
    "Embedding", "Flatten", "GELU", "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D", "GlobalMaxPool1D",
    "GlobalMaxPool2D", "GlobalMaxPool3D", "GroupNorm", "HybridBlock", "HybridConcatenate", "HybridLambda",
    "HybridSequential", "InstanceNorm", "Lambda", "LayerNorm", "LeakyReLU", "MaxPool1D", "MaxPool2D", "MaxPool3D",
    "PReLU", "ReflectionPad2D", "SELU", "Sequential", "Swish", "SymbolBlock",
]
