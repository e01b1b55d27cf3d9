"""Shared fixtures of the engine tests: every engine type, made fresh and shut down after."""

import os

import mxkit.engine as engine
import pytest

ENGINE_NAMES = ("naive", "threaded", "threaded_per_device")
THREADED_NAMES = ("threaded", "threaded_per_device")


@pytest.fixture(autouse=True)
def no_mxkit_environment(monkeypatch):
    for key in list(os.environ):
        if key.startswith("MXKIT_"):
            monkeypatch.delenv(key)


def _make(name):
    return engine.create(name) if name == "naive" else engine.create(name, num_workers=2)


def _close(eng):
    # bounded: a test that failed because the engine got stuck must not hang here
    eng.shutdown(timeout=10)


@pytest.fixture(params=ENGINE_NAMES)
def any_engine(request):
    eng = _make(request.param)
    yield eng
    _close(eng)


@pytest.fixture(params=THREADED_NAMES)
def threaded_engine(request):
    eng = _make(request.param)
    yield eng
    _close(eng)
