"""Containers and basic layers: Sequential, Dense, Dropout, normalisations, Embedding..."""

from __future__ import annotations

from typing import Any

from mxkit.gluon.block import Block, HybridBlock
from mxkit.gluon.nn.activations import Activation
from mxkit.gluon.parameter import GluonError


class _ChildrenInOrder:
    """What Sequential and HybridSequential share: children added in order, run one after
    another (a child returning a tuple passes its first element on and the rest as extra
    arguments to the next), indexed and sliced like a list."""

    _children: dict[str, Any]
    _prefix: str

    def add(self, *blocks: Any) -> None:
        """Append blocks."""
        for block in blocks:
            self.register_child(block)  # type: ignore[attr-defined]

    def _run_children(self, x: Any, *args: Any) -> Any:
        for block in self._children.values():
            x = block(x, *args)
            args = ()
            if isinstance(x, tuple | list):
                args, x = tuple(x[1:]), x[0]
        return (x, *args) if args else x

    def __getitem__(self, key: Any) -> Any:
        children = list(self._children.values())
        if isinstance(key, slice):
            net = type(self)(prefix=self._prefix)  # type: ignore[call-arg]
            with net.name_scope():  # type: ignore[attr-defined]
                net.add(*children[key])
            return net
        return children[key]

    def __len__(self) -> int:
        return len(self._children)


class Sequential(_ChildrenInOrder, Block):
    """Children run one after another (MXNet's ``nn.Sequential``)."""

    def forward(self, x: Any, *args: Any) -> Any:
        return self._run_children(x, *args)

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        """Hybridize the children (this container itself stays imperative)."""
        if self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            import warnings

            warnings.warn(f"All children of this Sequential layer '{self.prefix}' are HybridBlocks. Consider using "
                          f"HybridSequential for the best performance.", stacklevel=2)
        super().hybridize(active, **kwargs)


class HybridSequential(_ChildrenInOrder, HybridBlock):
    """Hybrid children run one after another (MXNet's ``nn.HybridSequential``)."""

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:
        return self._run_children(x, *args)


class Dense(HybridBlock):
    """A fully connected layer: ``activation(dot(x, weight.T) + bias)``.

    Parameters
    ----------
    units : int
        Output size.
    activation : str, optional
        An ``Activation`` applied to the output.
    use_bias : bool
    flatten : bool
        Flatten all but the first input axis (else apply to the last axis).
    in_units : int
        Input size; 0 infers it at the first forward pass.
    """

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True, flatten: bool = True,
                 dtype: Any = "float32", weight_initializer: Any = None, bias_initializer: Any = "zeros",
                 in_units: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._flatten = flatten
        with self.name_scope():
            self._units = units
            self._in_units = in_units
            self.weight = self.params.get("weight", shape=(units, in_units), init=weight_initializer, dtype=dtype,
                                          allow_deferred_init=True)
            self.bias = self.params.get("bias", shape=(units,), init=bias_initializer, dtype=dtype,
                                        allow_deferred_init=True) if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") if activation is not None else None

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:
        args = (x, weight) if bias is None else (x, weight, bias)
        out = F.FullyConnected(*args, no_bias=bias is None, num_hidden=self._units, flatten=self._flatten,
                               name="fwd")
        return self.act(out) if self.act is not None else out

    def __repr__(self) -> str:
        shape = self.weight.shape
        return f"Dense({shape[1] if shape[1] else None} -> {shape[0]}, {self.act.name if self.act else 'linear'})"


class Dropout(HybridBlock):
    """Zero a fraction ``rate`` of the inputs in training mode (scaling the rest)."""

    def __init__(self, rate: float, axes: tuple = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0 <= rate <= 1:  # MXNet's range: rate 1 drops everything in training
            raise GluonError(f"Dropout rate must be in [0, 1], got {rate}")
        self._rate = rate
        self._axes = axes

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        if self._rate > 0:
            return F.Dropout(x, p=self._rate, axes=self._axes, name="fwd")
        return F.identity(x)


def _scale_and_shift(block: HybridBlock, size: int, center: bool, scale: bool, beta_initializer: Any,
                     gamma_initializer: Any, switch_off_gradient: bool = False) -> None:
    """The learned ``gamma`` (used when ``scale``) and ``beta`` (when ``center``) of a
    normalisation layer, ``size`` values each (0: inferred). A switched-off one is still made,
    with grad_req null, as MXNet makes it (saved files name it); ``switch_off_gradient`` also
    marks it not differentiable (BatchNorm's operator ignores it then)."""
    for name, used, init in (("gamma", scale, gamma_initializer), ("beta", center, beta_initializer)):
        options = {"differentiable": used} if switch_off_gradient else {}
        setattr(block, name, block.params.get(name, grad_req="write" if used else "null", shape=(size,), init=init,
                                              allow_deferred_init=True, **options))


class BatchNorm(HybridBlock):
    """Batch normalisation with running statistics (auxiliary states).

    Parameters follow MXNet: ``axis``, ``momentum``, ``epsilon``, ``center``, ``scale``,
    ``use_global_stats``, the four initializers and ``in_channels`` (0: inferred).
    """

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, use_global_stats: bool = False, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", running_mean_initializer: Any = "zeros",
                 running_variance_initializer: Any = "ones", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum, "fix_gamma": not scale,
                        "use_global_stats": use_global_stats}
        _scale_and_shift(self, in_channels, center, scale, beta_initializer, gamma_initializer,
                         switch_off_gradient=True)
        self.running_mean = self.params.get("running_mean", grad_req="null", shape=(in_channels,),
                                            init=running_mean_initializer, allow_deferred_init=True,
                                            differentiable=False)
        self.running_var = self.params.get("running_var", grad_req="null", shape=(in_channels,),
                                           init=running_variance_initializer, allow_deferred_init=True,
                                           differentiable=False)

    def cast(self, dtype: Any) -> None:
        import numpy as np

        if np.dtype(dtype).name == "float16":
            dtype = "float32"  # MXNet keeps BatchNorm in float32
        super().cast(dtype)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any, running_mean: Any, running_var: Any) -> Any:
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, name="fwd", **self._kwargs)


class InstanceNorm(HybridBlock):
    """Normalise each sample and channel over its spatial axes."""

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = False,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._axis = axis
        self._epsilon = epsilon
        _scale_and_shift(self, in_channels, center, scale, beta_initializer, gamma_initializer)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:
        if self._axis == 1:
            return F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon)
        x = x.swapaxes(1, self._axis)
        return F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon).swapaxes(1, self._axis)


class LayerNorm(HybridBlock):
    """Normalise over ``axis`` (the last by default) with a learned scale and shift."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", in_channels: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._axis = axis
        self._epsilon = epsilon
        _scale_and_shift(self, in_channels, center, scale, beta_initializer, gamma_initializer)

    def hybrid_forward(self, F: Any, data: Any, gamma: Any, beta: Any) -> Any:
        return F.LayerNorm(data, gamma, beta, axis=self._axis, eps=self._epsilon)


class GroupNorm(HybridBlock):
    """Normalise over groups of channels; ``gamma`` and ``beta`` have one value per group, as in
    MXNet 1.9.1."""

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
                 beta_initializer: Any = "zeros", gamma_initializer: Any = "ones", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._num_groups = num_groups
        self._epsilon = epsilon
        _scale_and_shift(self, num_groups, center, scale, beta_initializer, gamma_initializer)

    def hybrid_forward(self, F: Any, data: Any, gamma: Any, beta: Any) -> Any:
        return F.GroupNorm(data, gamma=gamma, beta=beta, num_groups=self._num_groups, eps=self._epsilon)


class Embedding(HybridBlock):
    """Look up rows of a ``(input_dim, output_dim)`` weight by integer index."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32", weight_initializer: Any = None,
                 sparse_grad: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype}
        # sparse_grad: the weight's gradient is row_sparse, holding only the looked-up rows, and
        # the Trainer's optimizer updates only those rows (MXNet's lazy update)
        self.weight = self.params.get("weight", shape=(input_dim, output_dim), init=weight_initializer, dtype=dtype,
                                      allow_deferred_init=True,
                                      grad_stype="row_sparse" if sparse_grad else "default")

    def hybrid_forward(self, F: Any, x: Any, weight: Any) -> Any:
        return F.Embedding(x, weight, name="fwd", **self._kwargs)


class Flatten(HybridBlock):
    """Reshape ``(N, ...)`` to ``(N, -1)``."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Flatten(x)


class Lambda(Block):
    """Wrap a function (or the name of an ``mx.nd`` function) as a Block."""

    def __init__(self, function: Any, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            from mxkit import ndarray

            if not hasattr(ndarray, function):
                raise GluonError(f"Lambda: mx.nd has no function {function!r}")
            function = getattr(ndarray, function)
        elif not callable(function):
            raise GluonError(f"Lambda takes a function or the name of an mx.nd function, got {function!r}")
        self._func = function

    def forward(self, *args: Any) -> Any:
        return self._func(*args)


class HybridLambda(HybridBlock):
    """Wrap ``function(F, *args)`` (or the name of an operator) as a HybridBlock."""

    def __init__(self, function: Any, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            name = function
            self._func = lambda F, *args: getattr(F, name)(*args)
        elif callable(function):
            self._func = function
        else:
            raise GluonError(f"HybridLambda takes a function or the name of an operator, got {function!r}")

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:
        return self._func(F, x, *args)


class HybridConcatenate(HybridSequential):
    """Run every child on the input and concatenate the results along ``axis``."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class Concatenate(Sequential):
    """Run every child on the input and concatenate the results along ``axis``."""

    def __init__(self, axis: int = -1, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x: Any) -> Any:
        from mxkit import ndarray

        return ndarray.concat(*[block(x) for block in self._children.values()], dim=self.axis)
