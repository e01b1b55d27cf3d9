"""``gluon.contrib.cnn``: MXNet 1.x's deformable convolution layers."""

from mxkit.gluon.contrib.cnn.conv_layers import DeformableConvolution, ModulatedDeformableConvolution

__all__ = ["DeformableConvolution", "ModulatedDeformableConvolution"]
