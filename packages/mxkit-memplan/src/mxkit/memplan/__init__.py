"""mxkit-memplan: graph-agnostic memory planning. It lands with the memplan issue."""
