"""An example of a third-party mxkit plugin (the plugin author guide walks through it)."""
