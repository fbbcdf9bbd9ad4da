// The 'sum' / 'mean' reduction of a loss's per-row values in one launch: one block adds the
// rows (and, for 'mean', the rows' weights) in a fixed order (strided per thread, then a
// shared-memory tree), and writes the loss in the output dtype and the 'mean' denominator
// (float32) that backward divides by. One launch instead of the five or so array operations
// (two sums, a division, casts), each with its own host time.
//
// The squared error's kernels feed it: squared_error_partials writes each block's float32 sum of
// scale * (x - t)^2 (scale 1 / n for 'mean'), which loss_reduce then adds (mean = 0) into the loss;
// squared_error_backward writes dx = norm * (x - t) * g (norm 2 / n or 2, as PyTorch's mse_loss
// backward) and dt = -dx, in one pass. IN_T: x and t's dtype (the loss and its gradient have it too).
//
// nvrtc-check: -DOUT_T=float -DIN_T=float
// nvrtc-check: -DOUT_T=__half -DIN_T=__half
// nvrtc-check: -DOUT_T=__nv_bfloat16 -DIN_T=__nv_bfloat16
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifndef OUT_T
#define OUT_T float
#endif

#ifndef IN_T
#define IN_T OUT_T
#endif

#include "dtypes.cuh"  // to_f, from_f

#define THREADS 1024

// mean != 0: out = sum(loss) / sum(weight), denom = sum(weight); else out = sum(loss).
// All weights zero (every target ignored) gives 0/0 = NaN, as PyTorch does.
extern "C" __global__ void __launch_bounds__(THREADS) loss_reduce(const float* __restrict__ loss,
                                                                  const float* __restrict__ weight,
                                                                  OUT_T* __restrict__ out, float* __restrict__ denom,
                                                                  long long rows, int mean) {
    __shared__ float sl[THREADS], sw[THREADS];
    float l = 0.0f, w = 0.0f;
    for (long long i = threadIdx.x; i < rows; i += THREADS) {
        l += loss[i];
        if (mean) w += weight[i];
    }
    sl[threadIdx.x] = l;
    sw[threadIdx.x] = w;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) {
            sl[threadIdx.x] += sl[threadIdx.x + half];
            sw[threadIdx.x] += sw[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (mean) {
            denom[0] = sw[0];
            out[0] = from_f<OUT_T>(sl[0] / sw[0]);
        } else {
            out[0] = from_f<OUT_T>(sl[0]);
        }
    }
}

#define PARTIAL_THREADS 256

extern "C" __global__ void __launch_bounds__(PARTIAL_THREADS) squared_error_partials(
        const IN_T* __restrict__ x, const IN_T* __restrict__ t, float* __restrict__ part, long long n, float scale) {
    __shared__ float s[PARTIAL_THREADS];
    float acc = 0.0f;
    for (long long i = blockIdx.x * (long long)PARTIAL_THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * PARTIAL_THREADS) {
        const float d = to_f(x[i]) - to_f(t[i]);
        acc += d * d;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = PARTIAL_THREADS / 2; half > 0; half >>= 1) {
        if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = s[0] * scale;
}

// dt may be null (the target needs no gradient), as may dx.
extern "C" __global__ void squared_error_backward(const IN_T* __restrict__ x, const IN_T* __restrict__ t,
                                                  const IN_T* __restrict__ g, IN_T* __restrict__ dx,
                                                  IN_T* __restrict__ dt, long long n, float norm) {
    const float gv = to_f(g[0]);
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) {
        const float v = norm * (to_f(x[i]) - to_f(t[i])) * gv;
        if (dx) dx[i] = from_f<IN_T>(v);
        if (dt) dt[i] = from_f<IN_T>(-v);
    }
}
