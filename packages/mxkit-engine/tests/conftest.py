"""Shared fixtures of the engine tests: every engine type, made fresh and shut down after."""

import mxkit.engine as engine
import pytest

ENGINE_NAMES = ("naive", "threaded", "threaded_per_device")
THREADED_NAMES = ("threaded", "threaded_per_device")


@pytest.fixture(params=ENGINE_NAMES)
def any_engine(request):
    eng = engine.create(request.param)
    yield eng
    try:
        eng.wait_all()
    except Exception:
        pass
    eng.shutdown()


@pytest.fixture(params=THREADED_NAMES)
def threaded_engine(request):
    eng = engine.create(request.param, num_workers=2)
    yield eng
    try:
        eng.wait_all()
    except Exception:
        pass
    eng.shutdown()
