// Nearest-neighbour resampling of the last two dims of a C-contiguous (B, H, W) array (B = N * C planes) to
// (B, P, Q), by PyTorch's source-index tables (ops/resample.py's nearest_index, as int32):
//
// nearest_forward:  y[b, i, j] = x[b, hi[i], wi[j]].
// nearest_backward: dx[b, h, w] = the sum of g[b, i, j] over the outputs that read input (h, w): rows i in
//   [hs[h], hs[h + 1]) and columns j in [ws[w], ws[w + 1]) (the index tables are non-decreasing, so each input's
//   outputs form one window, and its starts are tables too). A gather in a fixed order (rows, then columns, in
//   float32, rounded once): no atomics, the same bits on every run; an input no output reads gets 0.
//
// One element a thread in a grid-stride loop (the copy's pattern: these passes are bandwidth-bound).
//
// nvrtc-check: -DELEM_T=float
// nvrtc-check: -DELEM_T=__half
// nvrtc-check: -DELEM_T=__nv_bfloat16
#include "dtypes.cuh"
#include "launch.cuh"

#ifndef ELEM_T
#define ELEM_T float
#endif
typedef ELEM_T T;

extern "C" __global__ void __launch_bounds__(256) nearest_forward(const T* __restrict__ x, T* __restrict__ y,
                                                                  const int* __restrict__ hi,
                                                                  const int* __restrict__ wi, long long total,
                                                                  int H, int W, int P, int Q) {
    pdl_entry();
    const long long plane = (long long)P * Q;
    for (long long t = (long long)blockIdx.x * 256 + threadIdx.x; t < total; t += (long long)gridDim.x * 256) {
        const long long b = t / plane;
        const int r = (int)(t - b * plane), i = r / Q, j = r - i * Q;
        y[t] = x[(b * H + hi[i]) * W + wi[j]];
    }
}

extern "C" __global__ void __launch_bounds__(256) nearest_backward(const T* __restrict__ g, T* __restrict__ dx,
                                                                   const int* __restrict__ hs,
                                                                   const int* __restrict__ ws, long long total,
                                                                   int H, int W, int P, int Q) {
    pdl_entry();
    const long long plane = (long long)H * W;
    for (long long t = (long long)blockIdx.x * 256 + threadIdx.x; t < total; t += (long long)gridDim.x * 256) {
        const long long b = t / plane;
        const int r = (int)(t - b * plane), h = r / W, w = r - h * W;
        const int j0 = ws[w], j1 = ws[w + 1];
        const T* row = g + b * P * Q;
        float s = 0.0f;
        for (int i = hs[h]; i < hs[h + 1]; ++i)
            for (int j = j0; j < j1; ++j) s += to_f(row[(long long)i * Q + j]);
        dx[t] = from_f<T>(s);
    }
}
