"""mxkit-cuda: the CUDA backend plugin (CuPy)."""
