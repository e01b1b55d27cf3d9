"""The error hierarchy: every mxkit error is an MXKitError, which is a RuntimeError as MXNet's MXNetError is."""

import inspect

import pytest
from mxkit.core import errors


def _error_classes():
    return [cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.MXKitError)]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_is_caught_as_runtime_error(cls):
    # MXNet code catches RuntimeError (MXNetError's base) around failing calls
    with pytest.raises(RuntimeError, match="what went wrong"):
        raise cls("what went wrong")


def test_builtin_bases_still_apply():
    # the Pythonic bases stay: a bad value is still a ValueError, a missing name an AttributeError
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.ShapeError, ValueError)
    assert issubclass(errors.DTypeError, TypeError)
    assert issubclass(errors.MissingComponentError, AttributeError)
    assert issubclass(errors.UnknownPluginError, LookupError)
    assert issubclass(errors.OutOfMemoryError, MemoryError)
