"""The implementation of ``mx.test_utils`` (:mod:`mxkit.mx.test_utils` re-exports it).

Split by subject: :mod:`.compare` (tolerances and assertions), :mod:`.arrays` (default
context, random shapes and arrays), :mod:`.environment` (environment variables and
stderr), :mod:`.symbolic` (checking symbols forward, backward and by finite
differences) and :mod:`.datasets` (MNIST from local files).
"""
