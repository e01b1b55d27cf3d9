"""mxkit-kvstore: the parameter-server KVStore (local, device, distributed on Ray).

The store lands with the KVStore issues; this distribution already exists so the
workspace, the facade and the isolation matrix have their final shape.
"""
