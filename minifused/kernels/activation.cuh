// The activations' math, once, for every kernel that applies or differentiates one. GELU is
// PyTorch's: exact (erf) or the tanh approximation 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))).
// kernels/__init__.py holds the same constants and the float64 references.
#pragma once

#define MF_GELU_C 0.7978845608028654f      // sqrt(2 / pi)
#define MF_GELU_CUBIC 0.044715f
#define MF_SQRT1_2 0.70710678118654752f    // 1 / sqrt(2)
#define MF_INV_SQRT_2PI 0.3989422804014327f

__device__ __forceinline__ float gelu_tanh(float z) {
    return 0.5f * z * (1.0f + tanhf(MF_GELU_C * (z + MF_GELU_CUBIC * z * z * z)));
}

__device__ __forceinline__ float gelu_tanh_grad(float z) {
    const float t = tanhf(MF_GELU_C * (z + MF_GELU_CUBIC * z * z * z));
    return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * MF_GELU_C * (1.0f + 3.0f * MF_GELU_CUBIC * z * z);
}

__device__ __forceinline__ float gelu_erf(float z) { return 0.5f * z * (1.0f + erff(z * MF_SQRT1_2)); }

__device__ __forceinline__ float gelu_erf_grad(float z) {
    // (written as the elementwise kernel wrote it, so the compiler contracts it to the same bits)
    const float cdf = 0.5f * (1.0f + erff(z * MF_SQRT1_2));
    const float pdf = MF_INV_SQRT_2PI * expf(-0.5f * z * z);
    return cdf + z * pdf;
}

// The other activations of ops/activation.py (and sigmoid, tanh), in PyTorch's cuda formulas, for
// elementwise.cu's act_* kernels; kinds numbered as elementwise.py's ACTIVATIONS and KEEP_ACTIVATIONS.
// act_value is f(v) with the parameters a, b, c; act_grad is g f'(v) from what the op keeps: its input,
// but sigmoid's and tanh's output. ACT_SCALE and ACT_DIVIDE (v * a, v / a: a floating tensor and a number in
// float32) are their own gradients' form (g * a, g / a), and ACT_SHIFT's (v + a, or with b < 0 a - v) is g or -g,
// so they have no act_grad.
enum ActKind {
    ACT_SILU, ACT_MISH, ACT_ELU, ACT_HARDSWISH, ACT_SOFTPLUS, ACT_SIGMOID, ACT_TANH, ACT_SCALE, ACT_DIVIDE, ACT_SHIFT
};

__device__ __forceinline__ float act_value(int kind, float v, float a, float b, float c) {
    switch (kind) {
    case ACT_SILU: return v / (1.0f + expf(-v));
    case ACT_MISH: return v * tanhf(log1pf(expf(v)));
    case ACT_ELU: return v > 0.0f ? v * b : expm1f(v * c) * (a * b);  // a alpha, b scale, c input scale
    case ACT_HARDSWISH: {
        const float t = v + 3.0f;  // (NaN stays NaN)
        return v * (t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t) / 6.0f;
    }
    case ACT_SOFTPLUS: return v * a > b ? v : log1pf(expf(v * a)) / a;  // a beta, b threshold
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case ACT_SCALE: return v * a;
    case ACT_DIVIDE: return v / a;
    case ACT_SHIFT: return b < 0.f ? a - v : v + a;
    default: return tanhf(v);
    }
}

__device__ __forceinline__ float act_grad(int kind, float g, float v, float a, float b, float c) {
    switch (kind) {
    case ACT_SILU: {
        const float s = 1.0f / (1.0f + expf(-v));
        return g * s * (1.0f + v * (1.0f - s));
    }
    case ACT_MISH: {
        const float s = 1.0f / (1.0f + expf(-v)), t = tanhf(log1pf(expf(v)));
        return g * (t + v * s * (1.0f - t * t));
    }
    case ACT_ELU: return v <= 0.0f ? g * c * (a * b) * expf(v * c) : g * b;  // (NaN takes the scale side)
    case ACT_HARDSWISH: return v <= -3.0f ? 0.0f : v < 3.0f ? g * (v / 3.0f + 0.5f) : g;
    case ACT_SOFTPLUS: {
        const float z = expf(v * a);
        return v * a > b ? g : g * z / (z + 1.0f);
    }
    case ACT_SIGMOID: return g * (1.0f - v) * v;  // v: the output
    default: return g * (1.0f - v * v);           // tanh, v: the output
    }
}

// The piecewise ones keep whether the gradient passes at each element (a bool, taken before an in-place
// form overwrites the input); act_keep_value returns f(v) and sets keep.
enum KeepKind { KEEP_LEAKY_RELU, KEEP_HARDTANH, KEEP_HARDSIGMOID, KEEP_THRESHOLD };

__device__ __forceinline__ float act_keep_value(int kind, float v, float a, float b, bool& keep) {
    switch (kind) {
    case KEEP_LEAKY_RELU:  // a: the negative slope (a NaN takes it)
        keep = v > 0.0f;
        return keep ? v : v * a;
    case KEEP_HARDTANH:  // a, b: the bounds; the gradient passes at NaN, not at the bounds
        keep = !(v <= a || v >= b);
        return v < a ? a : v > b ? b : v;
    case KEEP_HARDSIGMOID:
        keep = v > -3.0f && v < 3.0f;
        return v <= -3.0f ? 0.0f : v >= 3.0f ? 1.0f : (v + 3.0f) / 6.0f;
    default:  // threshold: a the threshold, b the value put where v <= a
        keep = !(v <= a);
        return keep ? v : b;
    }
}
