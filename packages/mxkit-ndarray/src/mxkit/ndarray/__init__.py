"""mxkit-ndarray: NDArray, the operator registry, random, save/load and autograd.

They land with the NDArray issue.
"""
