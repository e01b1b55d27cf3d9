"""MXNet 1.9.1's image operators (``mx.nd.image`` / ``mx.sym.image``, registered as ``_image_*``).

Images are ``(H, W, C)`` with the channels last (a batch ``(N, H, W, C)`` where MXNet takes
one), except ``normalize``, which works on the ``(C, H, W)`` / ``(N, C, H, W)`` tensors that
``to_tensor`` makes. Shapes and parameters are checked as MXNet checks them (``flip_*`` and
the colour operators take single images of 1 or 3 channels, the lighting ones of 3;
``normalize`` takes 1 or 3 channels and 1 or C means and standard deviations).

Two of MXNet 1.9.1's kernels are not copied where they are plainly wrong: its
``flip_top_bottom`` leaves the middle row of an odd height unwritten, and its saturation
blends with ``0.114 * blue`` alone (``=`` written for ``+=``); here the flip is complete and the
saturation blends with the luma, as documented. ``random_hue`` shifts the hue in HLS space,
as MXNet's operator (and Gluon's ``RandomHue``) does; ``adjust_hue`` is the YIQ turn of
``mx.image.HueJitterAug``.

The colour adjustments (``adjust_*``) are plain functions of a float32 ``(..., 3)`` RGB array,
shared with Gluon's ``vision.transforms`` (which re-exports them). A uint8 result is clipped
to [0, 255] and truncated, as MXNet's ``saturate_cast``. The random operators draw their
factors from the operator's generator (``mx.random.seed``), so they are not differentiable
and have no gradient, as in MXNet.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mxkit.core.errors import MissingComponentError, ShapeError
from mxkit.ndarray.ops._helpers import write
from mxkit.ndarray.ops.nn_common import fmt, public
from mxkit.ndarray.params import Param, ParamError, schema
from mxkit.ndarray.registry import OpDef, define

#: the luma weights of R, G and B (ITU-R BT.601), MXNet's ``coef``
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]], dtype=np.float32)
_FROM_YIQ = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]], dtype=np.float32)
#: AlexNet's PCA of ImageNet's RGB values: eigenvalues and eigenvectors (columns)
_EIGVAL = np.array([55.46, 4.794, 1.148], dtype=np.float32)
_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]],
                   dtype=np.float32)


# ---- the colour adjustments (numpy or CuPy arrays of float32 RGB values) ------------------------

def adjust_brightness(image: Any, alpha: float) -> Any:
    """``image * alpha``."""
    return image * np.float32(alpha)


def adjust_contrast(image: Any, alpha: float) -> Any:
    """Blend with the image's mean luma: ``image * alpha + mean_gray * (1 - alpha)``."""
    gray = float((image @ LUMA).mean())
    return image * np.float32(alpha) + np.float32(gray * (1 - alpha))


def adjust_saturation(image: Any, alpha: float) -> Any:
    """Blend each pixel with its luma: ``image * alpha + gray * (1 - alpha)``."""
    gray = (image @ LUMA)[..., None]
    return image * np.float32(alpha) + gray * np.float32(1 - alpha)


def adjust_hue(image: Any, alpha: float) -> Any:
    """Turn the chroma in YIQ space by ``alpha * pi`` radians."""
    u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
    turn = np.array([[1, 0, 0], [0, u, -w], [0, w, u]], dtype=np.float32)
    return image @ (_FROM_YIQ @ turn @ _TO_YIQ).T


def adjust_hue_hls(image: Any, alpha: float) -> Any:
    """Shift the hue by ``alpha * 360`` degrees in HLS space (MXNet 1.9.1's ``_image_random_hue``;
    ``adjust_hue`` is the YIQ turn of ``mx.image.HueJitterAug``), values in [0, 255]."""
    xp = np if isinstance(image, np.ndarray) else _array_module(image)
    rgb = image.astype(np.float32) / np.float32(255.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    vmax, vmin = rgb.max(axis=-1), rgb.min(axis=-1)
    diff = vmax - vmin
    light = (vmax + vmin) * np.float32(0.5)
    coloured = diff > np.finfo(np.float32).eps
    safe = xp.where(coloured, diff, np.float32(1.0))
    # (the denominators of uncoloured pixels, possibly 0, are replaced: their saturation is 0)
    low = safe / xp.where(coloured, vmax + vmin, np.float32(1.0))
    high = safe / xp.where(coloured, 2 - vmax - vmin, np.float32(1.0))
    sat = xp.where(light < 0.5, low, high)
    sat = xp.where(coloured, sat, np.float32(0.0))
    scale = np.float32(60.0) / safe
    hue = xp.where(vmax == r, (g - b) * scale, xp.where(vmax == g, (b - r) * scale + 120, (r - g) * scale + 240))
    hue = xp.where(coloured, hue + (hue < 0) * np.float32(360.0), np.float32(0.0))
    hue = (hue + np.float32(alpha * 360.0)) / np.float32(60.0)
    hue = hue - 6 * xp.floor(hue / 6)  # MXNet's loops adding or taking 6 into [0, 6)
    sector = xp.minimum(hue.astype(np.int64), 5)
    frac = hue - sector
    p2 = xp.where(light <= 0.5, light * (1 + sat), light + sat - light * sat)
    p1 = 2 * light - p2
    table = xp.stack([p2, p1, p1 + (p2 - p1) * (1 - frac), p1 + (p2 - p1) * frac], axis=-1)
    # MXNet's c_HlsSectorData: which table entry each of b, g, r takes in each sector
    sectors = xp.asarray([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])[sector]
    bgr = xp.take_along_axis(table, sectors, axis=-1)
    out = xp.where((sat != 0)[..., None], bgr[..., ::-1], light[..., None])
    return out * np.float32(255.0)


def _array_module(array: Any) -> Any:
    import importlib

    return importlib.import_module(type(array).__module__.split(".")[0])


def adjust_lighting(image: Any, alphas: Any) -> Any:
    """Add ``eigvec @ (alphas * eigval)`` to every pixel (AlexNet's PCA lighting noise)."""
    return image + _EIGVEC @ (np.asarray(alphas, dtype=np.float32) * _EIGVAL)


def _store(xp: Any, out: Any, values: Any) -> None:
    # MXNet's saturate_cast: a uint8 result is clipped, then truncated by the cast
    if out.dtype == np.uint8:
        values = xp.clip(values, 0, 255)
    write(xp, out, values)


# ---- shape checks ------------------------------------------------------------------------------

def _image_or_batch(op: str, shape: Any) -> tuple[int, ...]:
    if shape is None or len(shape) not in (3, 4):
        raise ShapeError(f"{op}: the input must be an (H, W, C) image or an (N, H, W, C) batch, got shape "
                         f"{fmt(shape)}")
    return tuple(int(d) for d in shape)


def _single_image(op: str, shape: Any, channels: tuple[int, ...] = (1, 3)) -> tuple[int, ...]:
    if shape is None or len(shape) != 3:
        raise ShapeError(f"{op}: the input must be one (H, W, C) image (as in MXNet 1.9.1; map a batch image "
                         f"by image), got shape {fmt(shape)}")
    if int(shape[2]) not in channels:
        kinds = "an (H, W, 3) RGB image" if channels == (3,) else "an (H, W, 1) gray or (H, W, 3) RGB image"
        raise ShapeError(f"{op}: the input must be {kinds}, got shape {fmt(shape)}")
    return tuple(int(d) for d in shape)


def _same_shape(check: Any) -> Any:
    def infer(params: dict, in_shapes: list) -> list:
        return [check(in_shapes[0])]

    return infer


def _rgb_shape(op: str):
    return _same_shape(lambda shape: _single_image(op, shape, channels=(3,)))


def _image_shape(op: str):
    return _same_shape(lambda shape: _single_image(op, shape))


# ---- to_tensor, normalize ----------------------------------------------------------------------

_TO_TENSOR = "_image_to_tensor"


def _to_tensor_shape(params: dict, in_shapes: list) -> list:
    shape = _image_or_batch(_TO_TENSOR, in_shapes[0])
    return [(*shape[:-3], shape[-1], shape[-3], shape[-2])]


def _to_tensor_kernel(xp, inputs, outputs, params):
    write(xp, outputs[0], xp.moveaxis(inputs[0].astype(np.float32), -1, -3) / np.float32(255.0))


define(OpDef(
    name=_TO_TENSOR, infer_shape=_to_tensor_shape, kernel=_to_tensor_kernel, infer_dtype=lambda p, d: ["float32"],
    doc="An (H, W, C) image (or (N, H, W, C) batch) in [0, 255] to a (C, H, W) float32 tensor in [0, 1].",
))

_NORMALIZE = "_image_normalize"
_NORMALIZE_SCHEMA = schema([
    Param("mean", "floats", default=(0.0, 0.0, 0.0, 0.0), doc="Means, one for every channel or one per channel."),
    Param("std", "floats", default=(1.0, 1.0, 1.0, 1.0), doc="Standard deviations, one or one per channel."),
])


def _normalize_shape(params: dict, in_shapes: list) -> list:
    shape = in_shapes[0]
    if shape is None or len(shape) not in (3, 4):
        raise ShapeError(f"{_NORMALIZE}: the input must be a (C, H, W) tensor or an (N, C, H, W) batch, got "
                         f"shape {fmt(shape)}")
    channels = int(shape[-3])
    if channels not in (1, 3):
        raise ShapeError(f"{_NORMALIZE}: the channel axis (C of (C, H, W)) must have 1 or 3 elements, got shape "
                         f"{fmt(shape)}")
    for what in ("mean", "std"):
        if len(params[what]) not in (1, channels):
            raise ParamError(f"{_NORMALIZE}: {what} must have 1 or {channels} elements for shape {fmt(shape)}, "
                             f"got {params[what]} (the default has 4: pass it)")
    if any(s == 0 for s in params["std"]):
        raise ParamError(f"{_NORMALIZE}: std must not contain 0, got {params['std']}")
    return [tuple(int(d) for d in shape)]


def _normalize_kernel(xp, inputs, outputs, params):
    x = inputs[0]
    compute = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    mean = xp.asarray(params["mean"], dtype=compute).reshape(-1, 1, 1)
    std = xp.asarray(params["std"], dtype=compute).reshape(-1, 1, 1)
    write(xp, outputs[0], (x.astype(compute) - mean) / std)


def _normalize_gradient(F, params, inputs, outputs, out_grads):
    # d/dx (x - mean) / std = 1 / std: the head gradient normalized with a zero mean
    return [F(_NORMALIZE, out_grads[0], mean=(0.0,), std=params["std"])]


define(OpDef(
    name=_NORMALIZE, infer_shape=_normalize_shape, kernel=_normalize_kernel, params=_NORMALIZE_SCHEMA,
    gradient=_normalize_gradient, backward_ignores=frozenset({0}),
    doc="(x - mean) / std per channel of a (C, H, W) tensor or (N, C, H, W) batch.",
))


# ---- crop, flips -------------------------------------------------------------------------------

_CROP = "_image_crop"
_CROP_SCHEMA = schema([
    Param("x", "int", doc="Left boundary of the cropping area."),
    Param("y", "int", doc="Top boundary of the cropping area."),
    Param("width", "int", doc="Width of the cropping area."),
    Param("height", "int", doc="Height of the cropping area."),
])


def _crop_shape(params: dict, in_shapes: list) -> list:
    shape = _image_or_batch(_CROP, in_shapes[0])
    x, y, width, height = params["x"], params["y"], params["width"], params["height"]
    if width <= 0 or height <= 0:
        raise ParamError(f"{_CROP}: width and height must be > 0, got width={width}, height={height}")
    if x < 0 or y < 0 or x + width > shape[-2] or y + height > shape[-3]:
        raise ShapeError(f"{_CROP}: the area x={x}, y={y}, width={width}, height={height} must lie inside the "
                         f"image of width {shape[-2]} and height {shape[-3]} (shape {fmt(shape)})")
    return [(*shape[:-3], height, width, shape[-1])]


def _crop_kernel(xp, inputs, outputs, params):
    x, y = params["x"], params["y"]
    write(xp, outputs[0], inputs[0][..., y:y + params["height"], x:x + params["width"], :])


def _crop_backward_kernel(xp, inputs, outputs, params):
    # the head gradient in the cropped area, zero elsewhere (MXNet's _backward_image_crop)
    x, y = params["x"], params["y"]
    outputs[0][...] = 0
    outputs[0][..., y:y + params["height"], x:x + params["width"], :] = inputs[0]


def _crop_gradient(F, params, inputs, outputs, out_grads):
    return [F(f"_backward{_CROP}", out_grads[0], inputs[0], **public(params))]


define(OpDef(
    name=_CROP, infer_shape=_crop_shape, kernel=_crop_kernel, params=_CROP_SCHEMA, gradient=_crop_gradient,
    backward_ignores=frozenset({0}),
    doc="The area [y, y + height) x [x, x + width) of an (H, W, C) image or (N, H, W, C) batch.",
))
define(OpDef(
    name=f"_backward{_CROP}", params=_CROP_SCHEMA, kernel=_crop_backward_kernel, num_inputs=2,
    input_names=("head_grad", "data"), reads_shape_only=frozenset({1}),
    infer_shape=lambda p, s: [tuple(s[1])], infer_dtype=lambda p, d: [d[0]], doc="Backward of image crop.",
))


def _define_flip(name: str, axis: int, doc: str) -> None:
    def kernel(xp, inputs, outputs, params):
        write(xp, outputs[0], xp.flip(inputs[0], axis=axis))

    def random_kernel(xp, inputs, outputs, params):
        flip = params["_rng"].random() < 0.5  # MXNet's bernoulli_distribution(0.5)
        write(xp, outputs[0], xp.flip(inputs[0], axis=axis) if flip else inputs[0])

    check = _image_shape(f"_image_{name}")
    define(OpDef(name=f"_image_{name}", infer_shape=check, kernel=kernel, doc=doc))
    define(OpDef(name=f"_image_random_{name}", infer_shape=check, kernel=random_kernel, needs_rng=True,
                 doc=f"{doc} With probability 0.5.".replace(". With", ", with")))


_define_flip("flip_left_right", 1, "Reverse the columns of an (H, W, C) image.")
_define_flip("flip_top_bottom", 0, "Reverse the rows of an (H, W, C) image.")


# ---- resize ------------------------------------------------------------------------------------

_RESIZE = "_image_resize"
#: OpenCV's interpolation codes, as MXNet numbers them: nearest, bilinear, bicubic, area, Lanczos
_INTERPOLATIONS = (0, 1, 2, 3, 4)
_RESIZE_SCHEMA = schema([
    Param("size", "shape", default=(), doc="(width, height) of the result, or (size,)."),
    Param("keep_ratio", "bool", default=False, doc="With one size: resize the short edge to it, keeping the ratio."),
    Param("interp", "int", default=1, doc="OpenCV interpolation: 0 nearest, 1 bilinear, 2 bicubic, 3 area, "
                                          "4 Lanczos."),
])


def scale_down(src_size: tuple[int, int], size: tuple[int, int]) -> tuple[int, int]:
    """Shrink a crop ``size`` (w, h) to fit ``src_size`` (w, h), keeping its aspect ratio."""
    w, h = float(size[0]), float(size[1])
    sw, sh = src_size
    if sh < h:
        w, h = w * sh / h, sh
    if sw < w:
        w, h = sw, h * sw / w
    return int(w), int(h)


def resized_size(size: tuple, keep_ratio: bool, height: int, width: int) -> tuple[int, int]:
    """MXNet's ``(width, height)`` of a resized image: ``size`` as ``(w, h)``, or one edge
    for both, or with ``keep_ratio`` for the short edge (the long one in integer arithmetic)."""
    if len(size) == 2:
        return int(size[0]), int(size[1])
    edge = int(size[0])
    if not keep_ratio:
        return edge, edge
    if height > width:
        return edge, height * edge // width
    return width * edge // height, edge


def _resize_shape(params: dict, in_shapes: list) -> list:
    shape = _image_or_batch(_RESIZE, in_shapes[0])
    size = params["size"]
    if len(size) not in (1, 2) or any(s <= 0 for s in size):
        raise ParamError(f"{_RESIZE}: size must be (width, height) or (size,) of positive ints, got {size}")
    if params["interp"] not in _INTERPOLATIONS:
        raise ParamError(f"{_RESIZE}: interp must be one of {_INTERPOLATIONS} (nearest, bilinear, bicubic, area, "
                         f"Lanczos), got {params['interp']}")
    width, height = resized_size(size, params["keep_ratio"], shape[-3], shape[-2])
    return [(*shape[:-3], height, width, shape[-1])]


def _cv2() -> Any:
    try:
        import cv2
    except ModuleNotFoundError as exc:
        if exc.name != "cv2":
            raise
        raise MissingComponentError(
            f"{_RESIZE} resamples with OpenCV, as MXNet does, and OpenCV is not installed; install it with "
            f"`pip install 'mxkit[image]'` (or opencv-python-headless)") from None
    return cv2


def _resize_kernel(xp, inputs, outputs, params):
    # OpenCV (numpy, on the host) as MXNet's CPU kernel: its uint8 fixed-point rounding included
    cv2 = _cv2()
    host = inputs[0].get() if hasattr(inputs[0], "get") else np.asarray(inputs[0])
    height, width = outputs[0].shape[-3], outputs[0].shape[-2]

    def one(image):
        if image.shape[:2] == (height, width):
            return image
        resized = cv2.resize(image, (width, height), interpolation=params["interp"])
        return resized[:, :, None] if resized.ndim == 2 else resized

    result = one(host) if host.ndim == 3 else np.stack([one(image) for image in host])
    write(xp, outputs[0], xp.asarray(result))


define(OpDef(
    name=_RESIZE, infer_shape=_resize_shape, kernel=_resize_kernel, params=_RESIZE_SCHEMA,
    doc="Resize an (H, W, C) image or (N, H, W, C) batch with OpenCV to a (width, height) size.",
))


# ---- colour ------------------------------------------------------------------------------------

_ADJUST_LIGHTING = "_image_adjust_lighting"


def _check_alphas(params: dict, in_shapes: list) -> list:
    if len(params["alpha"]) != 3:
        raise ParamError(f"{_ADJUST_LIGHTING}: alpha must hold 3 numbers (for R, G and B), got {params['alpha']}")
    return _rgb_shape(_ADJUST_LIGHTING)(params, in_shapes)


define(OpDef(
    name=_ADJUST_LIGHTING, infer_shape=_check_alphas, params=schema([
        Param("alpha", "floats", doc="The lighting alphas for the R, G, B channels.")]),
    kernel=lambda xp, i, o, p: _store(xp, o[0], adjust_lighting(i[0].astype(np.float32), p["alpha"])),
    doc="AlexNet's PCA lighting: add eigvec @ (alpha * eigval) to every pixel of an (H, W, 3) image.",
))


def _random_lighting_kernel(xp, inputs, outputs, params):
    alphas = params["_rng"].normal(0.0, params["alpha_std"], size=3)
    _store(xp, outputs[0], adjust_lighting(inputs[0].astype(np.float32), alphas))


def _check_alpha_std(params: dict, in_shapes: list) -> list:
    if params["alpha_std"] < 0:
        raise ParamError(f"_image_random_lighting: alpha_std must be >= 0, got {params['alpha_std']}")
    return _rgb_shape("_image_random_lighting")(params, in_shapes)


define(OpDef(
    name="_image_random_lighting", infer_shape=_check_alpha_std, kernel=_random_lighting_kernel, needs_rng=True,
    params=schema([Param("alpha_std", "float", default=0.05, doc="Level of the lighting noise.")]),
    doc="AlexNet's PCA lighting noise with alphas drawn from Normal(0, alpha_std).",
))

_FACTOR_SCHEMA = schema([
    Param("min_factor", "float", doc="Minimum factor."),
    Param("max_factor", "float", doc="Maximum factor."),
])


def _contrast_any(image: Any, alpha: float) -> Any:
    # one channel: the gray mean is the values' mean
    if image.shape[-1] == 1:
        return image * np.float32(alpha) + np.float32(float(image.mean()) * (1 - alpha))
    return adjust_contrast(image, alpha)


def _saturation_any(image: Any, alpha: float) -> Any:
    # (MXNet 1.9.1 blends with 0.114 * blue alone, a slip of `=` for `+=`; this is the luma blend of
    # its documentation, of mx.image.SaturationJitterAug and of Gluon's transforms here)
    return image if image.shape[-1] == 1 else adjust_saturation(image, alpha)


def _hue_any(image: Any, alpha: float) -> Any:
    # (a one-channel image has no hue: returned as it is, where MXNet leaves its output unwritten)
    return image if image.shape[-1] == 1 else adjust_hue_hls(image, alpha)


def _define_random_adjust(name: str, adjust: Any, doc: str) -> None:
    op = f"_image_random_{name}"

    def infer(params: dict, in_shapes: list) -> list:
        if params["min_factor"] < 0:  # MXNet's lower bound of both factors
            raise ParamError(f"{op}: min_factor and max_factor must be >= 0, got min_factor={params['min_factor']}")
        if not params["min_factor"] <= params["max_factor"]:  # (MXNet leaves this undefined)
            raise ParamError(f"{op}: min_factor ({params['min_factor']}) must be <= max_factor "
                             f"({params['max_factor']})")
        return _image_shape(op)(params, in_shapes)

    def kernel(xp, inputs, outputs, params):
        alpha = params["_rng"].uniform(params["min_factor"], params["max_factor"])
        _store(xp, outputs[0], adjust(inputs[0].astype(np.float32), alpha))

    define(OpDef(name=op, infer_shape=infer, kernel=kernel, params=_FACTOR_SCHEMA, needs_rng=True, doc=doc))


_define_random_adjust("brightness", adjust_brightness,
                      "Scale an (H, W, 3) image by a factor drawn from U(min_factor, max_factor).")
_define_random_adjust("contrast", _contrast_any,
                      "Blend an (H, W, 3) image with its mean luma by a factor drawn from U(min_factor, max_factor).")
_define_random_adjust("saturation", _saturation_any,
                      "Blend each pixel with its luma by a factor drawn from U(min_factor, max_factor).")
_define_random_adjust("hue", _hue_any,
                      "Shift the hue (HLS) of an (H, W, 3) image by U(min_factor, max_factor) * 360 degrees.")

_JITTER = "_image_random_color_jitter"


def _jitter_shape(params: dict, in_shapes: list) -> list:
    for what in ("brightness", "contrast", "saturation", "hue"):
        if params[what] < 0:
            raise ParamError(f"{_JITTER}: {what} must be >= 0, got {params[what]}")
    return _image_shape(_JITTER)(params, in_shapes)


def _jitter_kernel(xp, inputs, outputs, params):
    # MXNet's order: the four adjustments shuffled, each (with a factor > 0) applied in turn
    rng = params["_rng"]
    values = inputs[0].astype(np.float32)
    for step in rng.permutation(4):
        if step == 0 and params["brightness"] > 0:
            values = adjust_brightness(values, 1 + rng.uniform(-params["brightness"], params["brightness"]))
        elif step == 1 and params["contrast"] > 0:
            values = _contrast_any(values, 1 + rng.uniform(-params["contrast"], params["contrast"]))
        elif step == 2 and params["saturation"] > 0:
            values = _saturation_any(values, 1 + rng.uniform(-params["saturation"], params["saturation"]))
        elif step == 3 and params["hue"] > 0:
            values = _hue_any(values, rng.uniform(-params["hue"], params["hue"]))
        if outputs[0].dtype == np.uint8:  # each of MXNet's steps saturates into the output
            values = xp.clip(values, 0, 255).astype(np.uint8).astype(np.float32)
    _store(xp, outputs[0], values)


define(OpDef(
    name=_JITTER, infer_shape=_jitter_shape, kernel=_jitter_kernel, needs_rng=True, params=schema([
        Param("brightness", "float", doc="How much to jitter brightness."),
        Param("contrast", "float", doc="How much to jitter contrast."),
        Param("saturation", "float", doc="How much to jitter saturation."),
        Param("hue", "float", doc="How much to jitter hue."),
    ]),
    doc="Brightness, contrast, saturation and hue jitter, in a random order.",
))

__all__ = ["LUMA", "adjust_brightness", "adjust_contrast", "adjust_hue", "adjust_lighting", "adjust_saturation",
           "adjust_hue_hls", "resized_size", "scale_down"]
