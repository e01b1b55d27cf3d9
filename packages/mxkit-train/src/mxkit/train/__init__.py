"""mxkit-train: optimizers, initializers, metrics, callbacks, FeedForward and Module.

They land with the training issue.
"""
