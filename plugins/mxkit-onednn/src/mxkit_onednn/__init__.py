"""mxkit-onednn: the CPU kernels of convolution, pooling and BatchNorm through oneDNN.

Installed, it registers itself through the ``mxkit`` entry point group (see
:mod:`mxkit_onednn.plugin`); nothing here needs to be imported by hand.
:func:`mxkit_onednn.library.status` says whether oneDNN loaded and, if not, why.
"""
