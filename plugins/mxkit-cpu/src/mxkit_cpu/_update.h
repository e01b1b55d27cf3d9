/* The loops of mxkit_cpu._update: SGD, SGD with momentum and Adam, one pass per weight.
 *
 * Written in C on plain pointers so that the compiler vectorizes them (the same loops over
 * Cython memoryviews ran element by element, 2-5x slower than numpy). The flags are loop
 * invariants: the compiler makes one loop per case. The weight output may be the weight
 * itself; no other arrays overlap. Built with -fno-math-errno so that sqrt vectorizes
 * (it is correctly rounded either way). Per element, each operation is the one the
 * generic numpy kernel makes, in the same order and dtype, so the results are the same bits.
 */
#ifndef MXKIT_CPU_UPDATE_H
#define MXKIT_CPU_UPDATE_H

#include <math.h>
#include <stddef.h>

#define MXK_DEFINE_UPDATES(real, suffix, root)                                                      \
static inline real mxk_clip_##suffix(real value, real bound) {                                     \
    return value < -bound ? -bound : (value > bound ? bound : value);                               \
}                                                                                                   \
                                                                                                    \
static void mxk_sgd_##suffix(const real *weight, const real *grad, real *out, ptrdiff_t size,       \
                             real scale, int clip, real bound, real rate, real decay) {             \
    for (ptrdiff_t i = 0; i < size; i++) {                                                          \
        real step = grad[i] * scale;                                                                \
        if (clip) step = mxk_clip_##suffix(step, bound) * rate;                                     \
        out[i] = weight[i] * decay - step;                                                          \
    }                                                                                               \
}                                                                                                   \
                                                                                                    \
static void mxk_sgd_mom_##suffix(const real *weight, const real *grad, real *mom, real *out,        \
                                 ptrdiff_t size, real scale, int clip, real bound, real rate,       \
                                 int decay, real weight_rate, real keep) {                          \
    for (ptrdiff_t i = 0; i < size; i++) {                                                          \
        real step = grad[i] * scale;                                                                \
        if (clip) step = mxk_clip_##suffix(step, bound) * rate;                                     \
        if (decay) step = step + weight[i] * weight_rate;                                           \
        real m = mom[i] * keep;                                                                     \
        m = m - step;                                                                               \
        mom[i] = m;                                                                                 \
        out[i] = weight[i] + m;                                                                     \
    }                                                                                               \
}                                                                                                   \
                                                                                                    \
static void mxk_adam_##suffix(const real *weight, const real *grad, real *mean, real *var,          \
                              real *out, ptrdiff_t size, real scale, int decay, real weight_decay,  \
                              int clip, real bound, real b1, real rest1, real b2, real rest2,       \
                              real eps, real rate) {                                                \
    for (ptrdiff_t i = 0; i < size; i++) {                                                          \
        real g = grad[i] * scale;                                                                   \
        if (decay) g = g + weight[i] * weight_decay;                                                \
        if (clip) g = mxk_clip_##suffix(g, bound);                                                  \
        real m = mean[i] * b1;                                                                      \
        m = m + g * rest1;                                                                          \
        mean[i] = m;                                                                                \
        real v = var[i] * b2;                                                                       \
        v = v + (g * g) * rest2;                                                                    \
        var[i] = v;                                                                                 \
        real denom = root(v) + eps;                                                                 \
        out[i] = weight[i] - (m / denom) * rate;                                                    \
    }                                                                                               \
}

MXK_DEFINE_UPDATES(float, f32, sqrtf)
MXK_DEFINE_UPDATES(double, f64, sqrt)

#endif
