"""mxkit-caffe: Caffe models (deploy.prototxt, .caffemodel, mean .binaryproto) to mxkit/MXNet files.

``mx.contrib.caffe`` in the facade, and ``mxkit convert caffe`` on the command line::

    sym, input_dim = convert_symbol("deploy.prototxt")
    sym, arg_params, aux_params, input_dim = convert_model("deploy.prototxt", "net.caffemodel", "net")
    mean = convert_mean("mean.binaryproto", "net-mean.nd")

The files are parsed with protobuf against Caffe's schema compiled into this package
(``caffe.proto``, ``caffe_pb2.py``): no Caffe installation and nothing downloaded.

Caffe models take BGR images; by default the converted model takes RGB (the first and third
input channels of every convolution that reads a network input are swapped, and so are the
mean's), as MXNet's converter did. Pass ``bgr_to_rgb=False`` to keep BGR.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from mxkit.caffe.layers import UnsupportedLayerError

__all__ = ["UnsupportedLayerError", "convert_mean", "convert_model", "convert_symbol"]


def _net(prototxt: str | os.PathLike[str]) -> Any:
    from mxkit.caffe.reader import read_prototxt

    return read_prototxt(prototxt)


def convert_symbol(prototxt_fname: str | os.PathLike[str], *,
                   input_shapes: Mapping[str, Sequence[int]] | None = None) -> tuple[Any, tuple[int, ...] | None]:
    """Convert a Caffe network definition into a Symbol.

    Parameters
    ----------
    prototxt_fname : str or path
        The ``deploy.prototxt`` (Caffe's text format; V1 ``layers`` are upgraded).
    input_shapes : dict, optional
        Input shapes by blob name, where the prototxt gives none (Data layers) or to override it.

    Returns
    -------
    Symbol
        The network; several outputs (blobs no layer reads) are grouped.
    tuple or None
        The shape of the first input (MXNet's ``input_dim``), None when the prototxt gives none.

    Raises
    ------
    UnsupportedLayerError
        Naming each layer (name and type) that cannot be converted.
    FormatError
        For a malformed prototxt (with its line and column) or an inconsistent network.
    """
    from mxkit.caffe.convert import convert_net

    converted = convert_net(_net(prototxt_fname), input_shapes=input_shapes)
    return converted.symbol, converted.input_dim


def convert_model(prototxt_fname: str | os.PathLike[str], caffemodel_fname: str | os.PathLike[str],
                  output_prefix: str | os.PathLike[str] | None = None, *, bgr_to_rgb: bool = True,
                  input_shapes: Mapping[str, Sequence[int]] | None = None,
                  ) -> tuple[Any, dict[str, Any], dict[str, Any], Any]:
    """Convert a Caffe network and its trained weights.

    Parameters
    ----------
    prototxt_fname : str or path
        The ``deploy.prototxt``.
    caffemodel_fname : str or path
        The trained weights (Caffe's binary ``NetParameter``; layers are matched by name, as
        Caffe's ``CopyTrainedLayersFrom`` does, and layers the prototxt lacks are ignored).
    output_prefix : str or path, optional
        When given, write ``PREFIX-symbol.json`` and ``PREFIX-0000.params`` (MXNet's checkpoint
        format, loadable by ``mx.model.load_checkpoint``). Nothing is written when any check fails.
    bgr_to_rgb : bool
        Make the model take RGB input (see the module documentation); False keeps Caffe's BGR.
    input_shapes : dict, optional
        Input shapes by blob name (see :func:`convert_symbol`).

    Returns
    -------
    sym : Symbol
    arg_params : dict of str to NDArray
    aux_params : dict of str to NDArray
    input_dim : tuple or None
        As MXNet's ``convert_model`` returns them.
    """
    import mxkit.ndarray as nd
    from mxkit.caffe.convert import convert_net, load_caffemodel_blobs

    converted = convert_net(_net(prototxt_fname), bgr_to_rgb=bgr_to_rgb, input_shapes=input_shapes)
    args, auxs = converted.convert_params(load_caffemodel_blobs(caffemodel_fname).get)
    _check_param_shapes(converted, args, auxs)
    arg_params = {name: nd.array(value) for name, value in args.items()}
    aux_params = {name: nd.array(value) for name, value in auxs.items()}
    if output_prefix is not None:
        prefix = os.fspath(output_prefix)
        converted.symbol.save(f"{prefix}-symbol.json")
        saved = {f"arg:{k}": v for k, v in arg_params.items()}
        saved.update({f"aux:{k}": v for k, v in aux_params.items()})
        nd.save(f"{prefix}-0000.params", saved)
    return converted.symbol, arg_params, aux_params, converted.input_dim


def _check_param_shapes(converted: Any, args: dict[str, np.ndarray], auxs: dict[str, np.ndarray]) -> None:
    """Each weight's shape must be the one the symbol infers for it (when the inputs' shapes are known)."""
    from mxkit.core.errors import FormatError, MXKitError

    shapes = converted.input_shapes
    sym = converted.symbol
    known = {name: shape for name, shape in shapes.items() if shape is not None}
    known.update({name: value.shape for name, value in args.items()})
    try:
        arg_shapes, _, aux_shapes = sym.infer_shape_partial(**known)
    except MXKitError as exc:  # any shape complaint means the weights do not fit
        raise FormatError(f"the caffemodel's weights do not fit the prototxt's network: {exc}") from None
    for names, inferred, values in ((sym.list_arguments(), arg_shapes, args),
                                    (sym.list_auxiliary_states(), aux_shapes, auxs)):
        for name, shape in zip(names, inferred or []):
            if name in values and shape and tuple(shape) != values[name].shape:
                raise FormatError(f"parameter {name!r}: the caffemodel gives shape {values[name].shape} but the "
                                  f"network needs {tuple(shape)}")


def convert_mean(binaryproto_fname: str | os.PathLike[str], output: str | os.PathLike[str] | None = None, *,
                 bgr_to_rgb: bool = True) -> Any:
    """Convert a Caffe mean image (``mean.binaryproto``) to an NDArray of shape (channels, height, width).

    Parameters
    ----------
    binaryproto_fname : str or path
        The mean file (a Caffe ``BlobProto`` of shape (1, C, H, W)).
    output : str or path, optional
        When given, save it there with ``mx.nd.save`` as ``{"mean_image": mean}`` (MXNet's converter's layout).
    bgr_to_rgb : bool
        Swap the first and third channels of a 3- or 4-channel mean, to match a model converted with
        ``bgr_to_rgb=True``.

    Returns
    -------
    NDArray
        The mean image, float32.
    """
    import mxkit.ndarray as nd
    from mxkit.caffe.reader import read_mean
    from mxkit.core.errors import FormatError

    mean = read_mean(binaryproto_fname)
    if mean.ndim == 4 and mean.shape[0] == 1:
        mean = mean[0]
    if mean.ndim != 3:
        raise FormatError(f"{os.fspath(binaryproto_fname)}: a mean image has shape (1, C, H, W) or (C, H, W), got "
                          f"{mean.shape}")
    if bgr_to_rgb and mean.shape[0] in (3, 4):
        mean = mean.copy()
        mean[[0, 2]] = mean[[2, 0]]
    array = nd.array(np.ascontiguousarray(mean))
    if output is not None:
        nd.save(os.fspath(output), {"mean_image": array})
    return array
