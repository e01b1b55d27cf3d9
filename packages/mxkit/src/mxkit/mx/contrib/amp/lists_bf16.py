"""Which operators run in bfloat16 when a symbol is converted with ``target_dtype="bfloat16"``.

The lists follow MXNet 1.9.1's ``contrib/amp/lists/symbol_bf16.py`` (its choices, not its text): the
convolution and the inner product, whose bfloat16 kernels multiply bfloat16 and accumulate in float32,
run in bfloat16; operators that work in either type (pooling, batch normalisation with its float32
statistics, relu/tanh...) take what they are given; operators whose inputs must share a dtype get the
widest of them; everything else (softmax, the losses, reductions, exp/log, reshapes...) runs in float32.
MXNet lists those float32 operators one by one; mxkit treats any operator in no list as float32, so an
operator added later cannot silently run in bfloat16.
"""

#: run in bfloat16: every input is cast to bfloat16
BF16_FUNCS = ("Convolution", "FullyConnected")

#: run in the dtype of their inputs (no cast); several data inputs are cast to the widest of them
BF16_FP32_FUNCS = ("abs", "_add", "Activation", "BatchNorm", "clip", "Concat", "concat", "LRN", "Pooling", "relu",
                   "sqrt", "square", "tanh", "sigmoid")

#: inputs of these operators (by position, after the data) that stay float32 whatever the data's dtype
BF16_USE_FP32_PARAMS = {"BatchNorm": ("gamma", "beta", "moving_mean", "moving_var")}

#: float32 for these parameter values, otherwise in the dtype of their inputs
CONDITIONAL_FP32_FUNCS = (("Activation", "act_type", ("softrelu",)), ("LeakyReLU", "act_type", ("elu", "selu")))

#: every floating input cast to the widest floating dtype among them (``amp_multicast``)
WIDEST_TYPE_CASTS = ("_Plus", "_plus", "_Minus", "_minus", "_sub", "_Mul", "_mul", "_Div", "_div", "_maximum",
                     "_minimum", "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "add_n",
                     "ElementWiseSum", "broadcast_add", "broadcast_plus", "broadcast_sub", "broadcast_minus",
                     "broadcast_mul", "broadcast_div", "broadcast_maximum", "broadcast_minimum", "where")

__all__ = ["BF16_FP32_FUNCS", "BF16_FUNCS", "BF16_USE_FP32_PARAMS", "CONDITIONAL_FP32_FUNCS", "WIDEST_TYPE_CASTS"]
