"""A small numpy re-implementation of Caffe's forward pass (TEST phase), the tests' reference.

It follows Caffe's C++ layer code, not MXNet's operators: convolution and deconvolution as
sums over kernel offsets, pooling with Caffe's own loops (ceil rounding, the dropped last
window, AVE's divisor that counts the padding but not the overhang), LRN's
``k + alpha / size * sum x^2``, BatchNorm's scale-factor blob, and so on. Given no weights
for a layer it draws random ones (which is how tests/fixtures/make_fixtures.py makes the
caffemodels).
"""

from __future__ import annotations

import math

import numpy as np


class CaffeReference:
    """Run a Caffe ``NetParameter`` on numpy arrays.

    ``weights`` maps layer names to lists of blobs (arrays in Caffe's shapes); layers with
    parameters but no entry get random blobs from ``rng``, recorded in ``self.weights``.
    """

    def __init__(self, net, weights=None, rng=None):
        self.net = net
        self.weights = dict(weights or {})
        self.rng = rng

    def _blobs(self, layer, shapes):
        if layer.name not in self.weights:
            if self.rng is None:
                raise KeyError(f"no weights for layer {layer.name!r}")
            self.weights[layer.name] = [self.rng.standard_normal(s).astype(np.float32) * 0.5 for s in shapes]
        return self.weights[layer.name]

    def forward(self, inputs):
        """Every blob after the forward pass, by name (inputs given as {blob name: array})."""
        blobs = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
        for layer in self.net.layer:
            if layer.type in ("Input", "Data", "DummyData", "MemoryData") or not _in_test_phase(layer):
                continue
            bottoms = [blobs[b] for b in layer.bottom]
            tops = getattr(self, "_" + layer.type)(layer, bottoms)
            for name, value in zip(layer.top, tops):
                blobs[name] = value
        return blobs

    # ---- layers with weights -------------------------------------------------------------

    @staticmethod
    def _conv_geometry(p):
        def pick(rep, h, w, default):
            if p.HasField(h):
                return getattr(p, h), getattr(p, w)
            values = list(getattr(p, rep)) or [default]
            return (values[0], values[-1])

        kernel = pick("kernel_size", "kernel_h", "kernel_w", 0)
        stride = pick("stride", "stride_h", "stride_w", 1)
        pad = pick("pad", "pad_h", "pad_w", 0)
        dil = tuple((list(p.dilation) or [1]) * 2)[:2] if len(p.dilation) <= 1 else tuple(p.dilation)
        return kernel, stride, pad, dil

    def _Convolution(self, layer, bottoms):
        p = layer.convolution_param
        x = bottoms[0]
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self._conv_geometry(p)
        g, o = p.group, p.num_output
        shapes = [(o, c // g, kh, kw)] + ([(o,)] if p.bias_term else [])
        blobs = self._blobs(layer, shapes)
        weight = blobs[0].astype(np.float64).reshape(o, c // g, kh, kw)
        oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
        ow = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        out = np.zeros((n, o, oh, ow))
        for group in range(g):
            xs = xp[:, group * c // g:(group + 1) * c // g]
            ws = weight[group * o // g:(group + 1) * o // g]
            for i in range(kh):
                for j in range(kw):
                    patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                    out[:, group * o // g:(group + 1) * o // g] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
        if p.bias_term:
            out += blobs[1].reshape(1, o, 1, 1)
        return [out]

    def _Deconvolution(self, layer, bottoms):
        p = layer.convolution_param
        x = bottoms[0]
        n, c, h, w = x.shape
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self._conv_geometry(p)
        g, o = p.group, p.num_output
        shapes = [(c, o // g, kh, kw)] + ([(o,)] if p.bias_term else [])
        blobs = self._blobs(layer, shapes)
        weight = blobs[0].astype(np.float64).reshape(c, o // g, kh, kw)
        full_h, full_w = sh * (h - 1) + dh * (kh - 1) + 1, sw * (w - 1) + dw * (kw - 1) + 1
        out = np.zeros((n, o, full_h, full_w))
        for group in range(g):
            xs = x[:, group * c // g:(group + 1) * c // g]
            ws = weight[group * c // g:(group + 1) * c // g]
            for i in range(kh):
                for j in range(kw):
                    contrib = np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
                    out[:, group * o // g:(group + 1) * o // g, i * dh:i * dh + sh * (h - 1) + 1:sh,
                        j * dw:j * dw + sw * (w - 1) + 1:sw] += contrib
        out = out[:, :, ph:full_h - ph, pw:full_w - pw]
        if p.bias_term:
            out = out + blobs[1].reshape(1, o, 1, 1)
        return [out]

    def _InnerProduct(self, layer, bottoms):
        p = layer.inner_product_param
        x = bottoms[0]
        axis = p.axis % x.ndim
        m, k = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
        shapes = [(k, p.num_output) if p.transpose else (p.num_output, k)] + ([(p.num_output,)] if p.bias_term else [])
        blobs = self._blobs(layer, shapes)
        weight = blobs[0].astype(np.float64)
        weight = weight.reshape(k, p.num_output) if p.transpose else weight.reshape(p.num_output, k).T
        out = x.reshape(m, k) @ weight
        if p.bias_term:
            out = out + blobs[1].reshape(1, -1)
        return [out.reshape((*x.shape[:axis], p.num_output))]

    def _PReLU(self, layer, bottoms):
        x = bottoms[0]
        shared = layer.prelu_param.channel_shared
        (slope,) = self._blobs(layer, [(1,) if shared else (x.shape[1],)])
        slope = slope.reshape(-1) if shared else slope.reshape((1, -1) + (1,) * (x.ndim - 2))
        return [np.maximum(x, 0) + slope * np.minimum(x, 0)]

    def _BatchNorm(self, layer, bottoms):
        x = bottoms[0]
        c = x.shape[1]
        if layer.name not in self.weights and self.rng is not None:
            factor = np.float32(self.rng.uniform(0.5, 2.0))
            self.weights[layer.name] = [self.rng.standard_normal(c).astype(np.float32) * factor,
                                        self.rng.uniform(0.5, 1.5, c).astype(np.float32) * factor,
                                        np.array([factor], np.float32)]
        mean, var, factor = self.weights[layer.name]
        scale = 0.0 if factor[0] == 0 else 1.0 / float(factor[0])
        shape = (1, c) + (1,) * (x.ndim - 2)
        mean = mean.astype(np.float64).reshape(shape) * scale
        var = var.astype(np.float64).reshape(shape) * scale
        return [(x - mean) / np.sqrt(var + layer.batch_norm_param.eps)]

    def _Scale(self, layer, bottoms):
        x = bottoms[0]
        c = x.shape[1]
        p = layer.scale_param
        blobs = self._blobs(layer, [(c,)] + ([(c,)] if p.bias_term else []))
        shape = (1, c) + (1,) * (x.ndim - 2)
        out = x * blobs[0].reshape(shape)
        if p.bias_term:
            out = out + blobs[1].reshape(shape)
        return [out]

    # ---- pooling and normalisation (Caffe's loops) ---------------------------------------

    def _Pooling(self, layer, bottoms):
        p = layer.pooling_param
        x = bottoms[0]
        n, c, h, w = x.shape
        if p.global_pooling:
            (kh, kw), (sh, sw), (ph, pw) = (h, w), (1, 1), (0, 0)
        else:
            kh, kw = (p.kernel_h, p.kernel_w) if p.HasField("kernel_h") else (p.kernel_size, p.kernel_size)
            sh, sw = (p.stride_h, p.stride_w) if p.HasField("stride_h") else (p.stride, p.stride)
            ph, pw = (p.pad_h, p.pad_w) if p.HasField("pad_h") else (p.pad, p.pad)
        rounding = math.floor if p.round_mode == type(p).FLOOR else math.ceil
        oh = int(rounding((h + 2 * ph - kh) / sh)) + 1
        ow = int(rounding((w + 2 * pw - kw) / sw)) + 1
        if ph or pw:
            if (oh - 1) * sh >= h + ph:
                oh -= 1
            if (ow - 1) * sw >= w + pw:
                ow -= 1
        out = np.zeros((n, c, oh, ow))
        for y in range(oh):
            for x_ in range(ow):
                hs, ws = y * sh - ph, x_ * sw - pw
                if p.pool == type(p).MAX:
                    he, we = min(hs + kh, h), min(ws + kw, w)
                    hs, ws = max(hs, 0), max(ws, 0)
                    out[:, :, y, x_] = x[:, :, hs:he, ws:we].max(axis=(2, 3))
                else:
                    he, we = min(hs + kh, h + ph), min(ws + kw, w + pw)
                    size = (he - hs) * (we - ws)
                    hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
                    out[:, :, y, x_] = x[:, :, hs:he, ws:we].sum(axis=(2, 3)) / size
        return [out]

    def _LRN(self, layer, bottoms):
        p = layer.lrn_param
        x = bottoms[0]
        size = p.local_size
        if p.norm_region == type(p).ACROSS_CHANNELS:
            c = x.shape[1]
            half = (size - 1) // 2
            squares = np.pad(x * x, ((0, 0), (half, half), (0, 0), (0, 0)))
            window = sum(squares[:, i:i + c] for i in range(size))
            return [x * (p.k + p.alpha / size * window) ** (-p.beta)]
        # WITHIN_CHANNEL: Caffe's AVE pooling of x^2 (pad (size-1)/2, stride 1), power -beta of 1 + alpha * that
        pool = _pool_param(size, (size - 1) // 2)
        mean_square = self._Pooling(pool, [x * x])[0]
        return [x * (1 + p.alpha * mean_square) ** (-p.beta)]

    # ---- elementwise ---------------------------------------------------------------------

    def _ReLU(self, layer, bottoms):
        x = bottoms[0]
        return [np.where(x > 0, x, x * layer.relu_param.negative_slope)]

    def _Sigmoid(self, layer, bottoms):
        return [1 / (1 + np.exp(-bottoms[0]))]

    def _TanH(self, layer, bottoms):
        return [np.tanh(bottoms[0])]

    def _ELU(self, layer, bottoms):
        x = bottoms[0]
        return [np.where(x > 0, x, layer.elu_param.alpha * (np.exp(np.minimum(x, 0)) - 1))]

    def _AbsVal(self, layer, bottoms):
        return [np.abs(bottoms[0])]

    def _Dropout(self, layer, bottoms):
        return [bottoms[0]]  # TEST phase: the identity (Caffe scales at training time)

    def _Power(self, layer, bottoms):
        p = layer.power_param
        return [(p.shift + p.scale * bottoms[0]) ** p.power]

    def _Eltwise(self, layer, bottoms):
        p = layer.eltwise_param
        if p.operation == type(p).PROD:
            return [math.prod(bottoms[1:], start=bottoms[0])]
        if p.operation == type(p).MAX:
            return [np.maximum.reduce(bottoms)]
        coeffs = list(p.coeff) or [1.0] * len(bottoms)
        return [sum(c * b for c, b in zip(coeffs, bottoms))]

    # ---- shapes --------------------------------------------------------------------------

    def _Concat(self, layer, bottoms):
        p = layer.concat_param
        return [np.concatenate(bottoms, axis=p.concat_dim if p.HasField("concat_dim") else p.axis)]

    def _Slice(self, layer, bottoms):
        p = layer.slice_param
        x = bottoms[0]
        axis = p.slice_dim if p.HasField("slice_dim") else p.axis
        points = list(p.slice_point)
        if not points:
            step = x.shape[axis] // len(layer.top)
            points = [step * i for i in range(1, len(layer.top))]
        return np.split(x, points, axis=axis)

    def _Split(self, layer, bottoms):
        return [bottoms[0]] * len(layer.top)

    def _Flatten(self, layer, bottoms):
        x = bottoms[0]
        p = layer.flatten_param
        axis, end = p.axis % x.ndim, p.end_axis % x.ndim
        return [x.reshape((*x.shape[:axis], -1, *x.shape[end + 1:]))]

    def _Reshape(self, layer, bottoms):
        x = bottoms[0]
        p = layer.reshape_param
        start = p.axis if p.axis >= 0 else x.ndim + p.axis + 1
        end = x.ndim if p.num_axes == -1 else start + p.num_axes
        dims = [x.shape[start + i] if d == 0 else d for i, d in enumerate(p.shape.dim)]
        return [x.reshape(x.shape[:start] + tuple(dims) + x.shape[end:])]

    def _Softmax(self, layer, bottoms):
        x = bottoms[0]
        axis = layer.softmax_param.axis
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return [e / e.sum(axis=axis, keepdims=True)]

    def _SoftmaxWithLoss(self, layer, bottoms):
        # Caffe's top is the loss; the converted SoftmaxOutput gives the probabilities, compared here
        return self._Softmax(layer, bottoms[:1])

    def _Crop(self, layer, bottoms):
        x, ref = bottoms
        p = layer.crop_param
        axis = p.axis % x.ndim
        offsets = list(p.offset)
        index = []
        for dim in range(x.ndim):
            if dim < axis:
                index.append(slice(None))
                continue
            off = 0 if not offsets else offsets[0] if len(offsets) == 1 else offsets[dim - axis]
            index.append(slice(off, off + ref.shape[dim]))
        return [x[tuple(index)]]


def _in_test_phase(layer):
    """Caffe's include/exclude rules for the TEST phase (phase rules only; the fixtures use no others)."""
    test = 1
    if len(layer.include):
        return any(not rule.HasField("phase") or rule.phase == test for rule in layer.include)
    return not any(not rule.HasField("phase") or rule.phase == test for rule in layer.exclude)


def _pool_param(size, pad):
    """A stand-in Pooling layer of type AVE (for LRN's WITHIN_CHANNEL)."""
    from mxkit.caffe import caffe_pb2

    layer = caffe_pb2.LayerParameter(name="pool", type="Pooling")
    layer.pooling_param.pool = caffe_pb2.PoolingParameter.AVE
    layer.pooling_param.kernel_size = size
    layer.pooling_param.pad = pad
    layer.pooling_param.stride = 1
    return layer
