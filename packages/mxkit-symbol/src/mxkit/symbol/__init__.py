"""mxkit-symbol: declarative graphs, automatic differentiation and the executor.

The Symbol API lands with the Symbol issue; this distribution already exists so the
workspace, the facade and the isolation matrix have their final shape.
"""
