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
