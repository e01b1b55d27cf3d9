"""mxkit-cpu: the CPU backend plugin (numpy, with Cython kernels where numpy is slow)."""
