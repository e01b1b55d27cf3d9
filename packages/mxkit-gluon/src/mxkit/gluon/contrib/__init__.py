"""``gluon.contrib``: MXNet 1.x's contributed Gluon pieces: ``nn`` (Concurrent, Identity,
PixelShuffle, SparseEmbedding, SyncBatchNorm), ``rnn`` (convolutional and variational-dropout
cells, LSTMP, dynamic_unroll), ``cnn`` (deformable convolutions), ``data`` (IntervalSampler) and
``estimator`` (the Estimator training loop)."""

from mxkit.gluon.contrib import cnn, data, estimator, nn, rnn

__all__ = ["cnn", "data", "estimator", "nn", "rnn"]
