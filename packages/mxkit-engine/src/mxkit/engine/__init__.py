"""mxkit-engine: the dependency engine. It lands with the engine issue."""
