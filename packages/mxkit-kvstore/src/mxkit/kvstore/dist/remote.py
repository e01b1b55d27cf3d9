"""Waiting for actor calls, with Ray's failures turned into mxkit errors.

An error an actor raises on purpose (a :class:`~mxkit.core.errors.MXKitError`, say a
pull that timed out naming the missing rank) is raised again here as itself, without
Ray's wrapping; a dead actor or an answer that never comes becomes a
:class:`KVStoreError` that says which call and what to check.
"""

from __future__ import annotations

from typing import Any

from mxkit.core.errors import KVStoreError, MXKitError

#: seconds added to a call's own timeout before the caller gives up on the answer
ANSWER_MARGIN = 30.0


class ActorLost(KVStoreError):
    """A server or the coordinator died while answering (Ray may be restarting it)."""


def wait(refs: Any, what: str, timeout: float | None) -> Any:
    """``ray.get(refs)``, raising mxkit errors.

    Parameters
    ----------
    refs : ObjectRef or list of them
    what : str
        The call, for messages (``"pull of 3 keys from server 1"``).
    timeout : float, optional
        Seconds to wait for the answers.
    """
    import ray
    from ray import exceptions

    try:
        return ray.get(refs, timeout=timeout)
    except exceptions.GetTimeoutError:
        raise KVStoreError(f"{what}: no answer within {timeout} s; a server may be overloaded or stuck "
                           f"(raise config kvstore_timeout if it is only slow)") from None
    except exceptions.RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, MXKitError):
            raise type(cause)(*cause.args) from None
        raise KVStoreError(f"{what} failed on the server: {type(cause).__name__}: {cause}") from None
    except exceptions.RayActorError as exc:
        raise ActorLost(f"{what}: the actor died ({exc.__class__.__name__}); the job's servers or "
                           f"coordinator are gone (was the job stopped?)") from None


def check_done(refs: list[Any], what: str) -> list[Any]:
    """Raise the error of any finished call in ``refs``; return those still running."""
    import ray

    if not refs:
        return refs
    done, running = ray.wait(refs, num_returns=len(refs), timeout=0)
    if done:
        wait(done, what, None)
    return running


__all__ = ["ANSWER_MARGIN", "ActorLost", "check_done", "wait"]
