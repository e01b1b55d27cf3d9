/* float32 exp, tanh and sigmoid that the C compiler can vectorize, and the loops over them
 * (mxkit_cpu._fastmath).
 *
 * numpy's float32 tanh costs ~7 ns per element on a 2-core AMD EPYC (one libm call each),
 * which made tanh and sigmoid the largest elementwise costs of LeNet and of an LSTM step.
 * These versions have no branches and no library calls, so a loop over them compiles to
 * SIMD code (built with -fno-trapping-math, which lets the compiler turn selects into
 * blends). With GCC 12 or later on x86-64 each loop is also compiled for x86-64-v3 (AVX2
 * and FMA) and the machine picks its version when the module loads: 2.5 ns per element
 * there, 5.5 ns with SSE2 alone.
 *
 * Accuracy (checked against float64 numpy by tests/test_fastmath.py over all float32
 * ranges): a few units in the last place; NaN gives NaN, +-inf give +-1 (tanh) and 1/0
 * (sigmoid).
 */
#ifndef MXKIT_CPU_FASTMATH_H
#define MXKIT_CPU_FASTMATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline float mxk_bits_to_float(int32_t bits) {
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static inline int32_t mxk_float_to_bits(float value) {
    int32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* e**x for x in [-87, 0] (callers clamp): x = n*ln2 + r with |r| <= ln2/2, e**r by its
 * Taylor series to degree 7 (truncation below 6e-9), 2**n written into the exponent bits. */
static inline float mxk_exp_nonpositive(float x) {
    const float round_magic = 12582912.0f; /* 1.5 * 2**23: adding it rounds to an integer */
    float shifted = x * 1.44269504088896341f + round_magic;
    int32_t n = mxk_float_to_bits(shifted) - mxk_float_to_bits(round_magic);
    float nf = shifted - round_magic;
    /* ln 2 in two parts (the first exact in float) so that r keeps its low bits */
    float r = (x - nf * 0.693359375f) + nf * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    return p * mxk_bits_to_float((n + 127) << 23);
}

static inline float mxk_abs(float x) {
    return mxk_bits_to_float(mxk_float_to_bits(x) & 0x7fffffff);
}

static inline float mxk_with_sign_of(float magnitude, float sign_source) {
    return mxk_bits_to_float(mxk_float_to_bits(magnitude) | (mxk_float_to_bits(sign_source) & (int32_t)0x80000000));
}

static inline float mxk_tanh(float x) {
    float a = mxk_abs(x);
    float clamped = a < 9.0f ? a : 9.0f; /* tanh(9) is 1 in float; NaN also lands here */
    float e = mxk_exp_nonpositive(-2.0f * clamped);
    float large = (1.0f - e) / (1.0f + e); /* no cancellation for a >= 0.3 (e <= 0.55) */
    /* below 0.3, the odd Taylor series of tanh to degree 13 (truncation below 3e-11) */
    float a2 = a * a;
    float q = 21844.0f / 6081075.0f;
    q = q * a2 - 1382.0f / 155925.0f;
    q = q * a2 + 62.0f / 2835.0f;
    q = q * a2 - 17.0f / 315.0f;
    q = q * a2 + 2.0f / 15.0f;
    q = q * a2 - 1.0f / 3.0f;
    float small = a + a * a2 * q;
    float result = a < 0.3f ? small : large;
    result = mxk_with_sign_of(result, x);
    return x != x ? x : result;
}

static inline float mxk_sigmoid(float x) {
    float a = mxk_abs(x);
    float clamped = a < 87.0f ? a : 87.0f; /* exp(-87) is still a normal float */
    float e = mxk_exp_nonpositive(-clamped);
    float s = 1.0f / (1.0f + e);       /* sigmoid(|x|) */
    /* sigmoid(-|x|) = e**-|x| / (1 + e**-|x|); from -87 down it is under 2e-38: 0, as numpy's float32 gives */
    float result = x >= 0.0f ? s : (a < 87.0f ? e * s : 0.0f);
    return x != x ? x : result;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && __GNUC__ >= 12 && defined(__linux__)
#define MXK_HAVE_CLONES 1
#define MXK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define MXK_HAVE_CLONES 0
#define MXK_CLONES
#endif

/* Each code path of the tanh and sigmoid loops on its own, so that tests check every one
 * the dispatcher may pick (their rounding differs: x86-64-v3 contracts multiply-adds into
 * FMA), not only the one of the machine they run on:
 *   variant 0: the loop with vectorization turned off (a scalar reference);
 *   variant 1: the "default" clone's code (baseline x86-64: SSE2 vectors, no FMA);
 *   variant 2: the "arch=x86-64-v3" clone's code (AVX2 and FMA), where the CPU has it.
 * mxk_dispatched_variant() says which of 1 and 2 mxk_tanh_array runs here. */
__attribute__((optimize("no-tree-vectorize"))) static void mxk_tanh_array_scalar(const float *x, float *out,
                                                                                 ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_tanh(x[i]);
}

__attribute__((optimize("no-tree-vectorize"))) static void mxk_sigmoid_array_scalar(const float *x, float *out,
                                                                                    ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_sigmoid(x[i]);
}

#if MXK_HAVE_CLONES
__attribute__((target("arch=x86-64"))) static void mxk_tanh_array_baseline(const float *x, float *out, ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_tanh(x[i]);
}

__attribute__((target("arch=x86-64"))) static void mxk_sigmoid_array_baseline(const float *x, float *out,
                                                                              ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_sigmoid(x[i]);
}

__attribute__((target("arch=x86-64-v3"))) static void mxk_tanh_array_v3(const float *x, float *out, ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_tanh(x[i]);
}

__attribute__((target("arch=x86-64-v3"))) static void mxk_sigmoid_array_v3(const float *x, float *out,
                                                                           ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_sigmoid(x[i]);
}

static int mxk_can_run_variant(int variant) {
    if (variant == 2) return __builtin_cpu_supports("x86-64-v3");
    return variant == 0 || variant == 1;
}

static int mxk_dispatched_variant(void) { return __builtin_cpu_supports("x86-64-v3") ? 2 : 1; }
#else
static void mxk_tanh_array_baseline(const float *x, float *out, ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_tanh(x[i]);
}

static void mxk_sigmoid_array_baseline(const float *x, float *out, ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_sigmoid(x[i]);
}

#define mxk_tanh_array_v3 mxk_tanh_array_baseline
#define mxk_sigmoid_array_v3 mxk_sigmoid_array_baseline

static int mxk_can_run_variant(int variant) { return variant == 0 || variant == 1; }

static int mxk_dispatched_variant(void) { return 1; }
#endif

/* x and out may be the same array */
MXK_CLONES static void mxk_tanh_array(const float *x, float *out, ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_tanh(x[i]);
}

MXK_CLONES static void mxk_sigmoid_array(const float *x, float *out, ptrdiff_t size) {
    for (ptrdiff_t i = 0; i < size; i++) out[i] = mxk_sigmoid(x[i]);
}

/* One LSTM step after its products, rows of C-contiguous arrays (no two overlap):
 * pre (batch, 4*hidden) in gate order i, f, g, o; c_prev, cells, tanh_cells, h (batch, hidden). */
MXK_CLONES static void mxk_lstm_forward(const float *restrict pre, const float *restrict c_prev,
                                        float *restrict gates, float *restrict cells,
                                        float *restrict tanh_cells, float *restrict h,
                                        ptrdiff_t batch, ptrdiff_t hidden) {
    for (ptrdiff_t b = 0; b < batch; b++) {
        const float *p = pre + b * 4 * hidden;
        float *gate = gates + b * 4 * hidden;
        ptrdiff_t row = b * hidden;
        for (ptrdiff_t j = 0; j < hidden; j++) {
            float i = mxk_sigmoid(p[j]);
            float f = mxk_sigmoid(p[hidden + j]);
            float g = mxk_tanh(p[2 * hidden + j]);
            float o = mxk_sigmoid(p[3 * hidden + j]);
            float c = f * c_prev[row + j] + i * g;
            float t = mxk_tanh(c);
            gate[j] = i;
            gate[hidden + j] = f;
            gate[2 * hidden + j] = g;
            gate[3 * hidden + j] = o;
            cells[row + j] = c;
            tanh_cells[row + j] = t;
            h[row + j] = o * t;
        }
    }
}

/* Its backward: d_pre (batch, 4*hidden) from d_h and d_c; d_c becomes the previous cell's gradient. */
MXK_CLONES static void mxk_lstm_backward(const float *restrict d_h, float *restrict d_c,
                                         const float *restrict gates, const float *restrict tanh_cells,
                                         const float *restrict c_prev, float *restrict d_pre,
                                         ptrdiff_t batch, ptrdiff_t hidden) {
    for (ptrdiff_t b = 0; b < batch; b++) {
        const float *gate = gates + b * 4 * hidden;
        float *d = d_pre + b * 4 * hidden;
        ptrdiff_t row = b * hidden;
        for (ptrdiff_t j = 0; j < hidden; j++) {
            float i = gate[j], f = gate[hidden + j], g = gate[2 * hidden + j], o = gate[3 * hidden + j];
            float t = tanh_cells[row + j];
            float dh = d_h[row + j];
            float dc = d_c[row + j] + dh * o * (1.0f - t * t);
            d[j] = dc * g * i * (1.0f - i);
            d[hidden + j] = dc * c_prev[row + j] * f * (1.0f - f);
            d[2 * hidden + j] = dc * i * (1.0f - g * g);
            d[3 * hidden + j] = dh * t * o * (1.0f - o);
            d_c[row + j] = dc * f;
        }
    }
}

/* The softmax of each row of a rows x cols row-major matrix (out may be x): e**(x - max) in the loop
 * above's vectorizable exp, then each divided by the row's sum. numpy's version is two reductions along
 * a short axis and three passes, ~20 us for an MLP's 128 x 10 scores against ~2 here. Differences under
 * -87 (after the shift) give 0 where e**d is below float32's normal range; NaN and +inf in a row give a
 * row of NaN, as numpy's does. */
MXK_CLONES static void mxk_softmax_rows(const float *x, float *out, ptrdiff_t rows, ptrdiff_t cols) {
    for (ptrdiff_t i = 0; i < rows; i++) {
        const float *row = x + i * cols;
        float *dst = out + i * cols;
        float top = row[0];
        for (ptrdiff_t j = 1; j < cols; j++)
            top = row[j] > top ? row[j] : top;
        for (ptrdiff_t j = 0; j < cols; j++) {
            float d = row[j] - top;
            float e = mxk_exp_nonpositive(d < -87.0f ? -87.0f : d);
            dst[j] = d < -87.0f ? 0.0f : e;
        }
        float sum = 0.0f;
        for (ptrdiff_t j = 0; j < cols; j++)
            sum += dst[j];
        for (ptrdiff_t j = 0; j < cols; j++)
            dst[j] = dst[j] / sum;
    }
}

#endif
