"""Placing a bound graph's nodes on devices by their ``ctx_group`` (``bind(..., group2ctx=)``).

MXNet 1.x's model parallelism: a symbol built under ``with mx.AttrScope(ctx_group="dev1"):``
carries the group on its nodes, and ``group2ctx={"dev1": mx.cpu(1), "dev2": mx.cpu(2)}``
at bind says where each group runs. The rules are MXNet's (``AssignContext`` and nnvm's
``PlaceDevice``):

- a variable of a group named in ``group2ctx`` gets its arrays (argument, gradient,
  auxiliary state) on that group's device, any other on the bind's device; with ``bind``
  the arrays given say where their variables are;
- an operator node of a named group runs on the group's device; any other runs where its
  first placed input is (so a group's loss layer follows the group), or on the bind's device;
- a backward node runs on the device of the forward node it differentiates (it carries that
  node's ``ctx_group``); one that belongs to no node (a sum of gradients) runs where the first
  of its inputs is placed.

Outputs and head gradients live where their nodes run. The executor pushes each node to the
engine on its device, so groups run on their devices' worker pools. Devices of one graph
must share one memory space (the CPU contexts ``cpu(i)``, ``cpu_pinned``, ``cpu_shared``: host
memory), where a value crossing from one group to another is read where it is and needs no
copy; placing groups on devices with memory of their own (GPUs) is refused with an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxkit.core.errors import MXKitError

GROUP_ATTRIBUTE = "__ctx_group__"
HOST_DEVICE_TYPES = ("cpu", "cpu_pinned", "cpu_shared")


class PlacementError(MXKitError):
    """A ``group2ctx`` that cannot be honoured (not a mapping of names to contexts, or devices
    that do not share memory)."""


def group_of(node: Any) -> str | None:
    """The ``ctx_group`` attribute of a graph node, or None."""
    return node.attrs.get(GROUP_ATTRIBUTE) or node.attrs.get("ctx_group")


def normalize_group2ctx(group2ctx: Any, default_ctx: Any) -> dict[str, Any]:
    """``group2ctx`` as a dict of group name to Context, checked.

    Raises
    ------
    PlacementError
        When it is not a mapping of strings to contexts, or names a device outside the
        host memory the bind's device uses.
    """
    from mxkit.core.context import Context

    if group2ctx is None:
        return {}
    if not isinstance(group2ctx, Mapping):
        raise PlacementError(f"group2ctx must be a dict of ctx_group name to Context, e.g. {{'dev1': mx.cpu(1)}}, "
                             f"got {type(group2ctx).__name__}")
    result: dict[str, Any] = {}
    for name, ctx in group2ctx.items():
        if not isinstance(name, str) or not isinstance(ctx, Context):
            raise PlacementError(f"group2ctx maps ctx_group names (str) to Contexts; got {name!r}: {ctx!r}")
        if ctx != default_ctx and not (ctx.device_type in HOST_DEVICE_TYPES
                                       and default_ctx.device_type in HOST_DEVICE_TYPES):
            raise PlacementError(
                f"group2ctx places group {name!r} on {ctx} and the bind runs on {default_ctx}: groups are placed "
                f"on devices that share host memory (cpu(i), cpu_pinned, cpu_shared); devices with memory of "
                f"their own need copies across the graph, which are not supported yet")
        result[name] = ctx
    return result


def variable_context(node: Any, default_ctx: Any, group2ctx: Mapping[str, Any]) -> Any:
    """Where ``simple_bind`` allocates the arrays of variable ``node``."""
    return group2ctx.get(group_of(node) or "", default_ctx)


def place_nodes(graph: Any, default_ctx: Any, group2ctx: Mapping[str, Any], variable_contexts: Mapping[int, Any]
                ) -> dict[int, Any]:
    """Node id to Context for every node of an executor's graph (module docstring).

    ``variable_contexts`` gives the context of each bound variable (by node id): the
    contexts of its arrays.
    """
    placed: dict[int, Any] = dict(variable_contexts)
    for node in graph.forward_nodes:
        group = group_of(node)
        if group in group2ctx:
            placed[id(node)] = group2ctx[group]
            continue
        placed[id(node)] = next((placed[id(e.node)] for e in node.inputs if id(e.node) in placed), default_ctx)
    for variable in graph.head_grad_nodes:
        if variable is not None:
            head = graph.heads[graph.head_grad_nodes.index(variable)]
            placed[id(variable)] = placed.get(id(head.node), default_ctx)
    arguments = {n.name: n for n in graph.arg_nodes}
    for name, variable in graph.grad_inputs.items():
        placed[id(variable)] = placed.get(id(arguments[name]), default_ctx)  # the gradient array's value
    for node in graph.backward_nodes:
        group = group_of(node)
        if group in group2ctx:
            placed[id(node)] = group2ctx[group]  # the backward nodes of a forward node carry its group
            continue
        placed[id(node)] = next((placed[id(e.node)] for e in node.inputs if id(e.node) in placed), default_ctx)
    return placed


__all__ = ["GROUP_ATTRIBUTE", "PlacementError", "group_of", "normalize_group2ctx", "place_nodes",
           "variable_context"]
