"""The errors of ``gluon.contrib.estimator``."""

from __future__ import annotations

from mxkit.core.errors import DeviceError
from mxkit.gluon.parameter import GluonError


class EstimatorError(GluonError, ValueError):
    """An Estimator or event handler was given an argument of the wrong kind (MXNet raised ValueError)."""


class UnavailableDeviceError(DeviceError, AssertionError):
    """An Estimator was asked to run on a device this process does not have.

    MXNet 1.x checked this with ``assert``; deriving from AssertionError keeps code that
    caught it working.
    """


__all__ = ["EstimatorError", "UnavailableDeviceError"]
