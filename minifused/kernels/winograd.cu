// Winograd F(4x4, 3x3) for fp32 without TF32 (winograd.py): a 3x3 stride-1 convolution as 36 GEMMs of
// transformed 6x6 input windows by transformed filters, then each 6x6 product folded into a 4x4 output tile
// (Lavin & Gray's minimal filtering): 36 multiplies per 4x4 outputs and input channel instead of 144. The
// transforms interpolate at 0, 1, -1, 2, -1/2 and infinity (winograd.py says why these).
//   wino_input   x (N, C, H, W) -> V[36][C][T]: B^T d B of the 6x6 window of each tile t (and channel)
//   wino_filter  w (K, C, 3, 3) -> U[36][K][C]: G g G^T (for the data gradient: each 3x3 turned 180 degrees and
//                the channels swapped, U[36][C][K])
//   wino_output  M[36][K][T] -> y (N, K, P, Q): A^T m A (+ bias) of each tile, rows and columns past P, Q dropped
// The filter gradient is F(3x3, 4x4), the same matrices in swapped roles (A^T's transpose filters, G^T folds):
// each tile's 4x4 block of dy, as the filter, correlated with the tile's 6x6 window of x gives its 3x3 share of
// dW, and the tiles' shares sum in the transform domain:
//   wino_input   x -> V[36][S][C][Ts]: as above (the windows of dy's 4x4 blocks are the forward's of y's)
//   wino_wgrad_dy  dy (N, K, P, Q) -> U[36][S][K][Ts]: A^T' g A^T of each tile's 4x4 block (zero past P, Q)
//   (36 x S GEMMs, each over one run of Ts tiles: M[36][S][K][C])
//   wino_wgrad_output  M -> dw (K, C, 3, 3): G^T m G of the sum over the S runs (in order: deterministic)
// The tiles split into S runs of Ts (tiles past T transform to zeros) so that a filter gradient of few channels
// still gives the GPU 36 x S GEMMs; the forward's S is 1. Run s of matrix xi lies at (xi S + s) * chunk floats
// (the host rounds chunk up to keep each one 256-byte aligned, as its GEMMs' outputs must be). Tiles t =
// (n * TH + ty) * TW + tx cover the output's 4x4 blocks; a tile's window starts at (4 ty - pad, 4 tx - pad),
// zero outside x. Threads take t fastest, so that neighbours read neighbouring windows of one channel's plane
// and write V's and y's rows coalesced. The 3x3 stride-2 forward (wino_s2_*, at the end) is F(4x4, 2x2) over x's
// four phases.

// The matrices, as constants that the unrolled loops below fold into the adds they take (a zero entry drops
// its term, see sandwich)
struct Bt {  // B^T (6 x 6)
    static constexpr int rows = 6, cols = 6;
    __device__ static float at(int i, int j) {
        constexpr float m[6][6] = {{1, 1.5f, -2, -1.5f, 1, 0},     {0, -1, -2.5f, -0.5f, 1, 0},
                                   {0, 1, 0.5f, -2.5f, 1, 0},      {0, -0.5f, -1, 0.5f, 1, 0},
                                   {0, 2, -1, -2, 1, 0},           {0, 1, 1.5f, -2, -1.5f, 1}};
        return m[i][j];
    }
};
struct G {  // G (6 x 3)
    static constexpr int rows = 6, cols = 3;
    __device__ static float at(int i, int j) {
        constexpr float m[6][3] = {{1, 0, 0},
                                   {-1.0f / 3, -1.0f / 3, -1.0f / 3},
                                   {1.0f / 3, -1.0f / 3, 1.0f / 3},
                                   {1.0f / 15, 2.0f / 15, 4.0f / 15},
                                   {-16.0f / 15, 8.0f / 15, -4.0f / 15},
                                   {0, 0, 1}};
        return m[i][j];
    }
};
struct At {  // A^T (4 x 6)
    static constexpr int rows = 4, cols = 6;
    __device__ static float at(int i, int j) {
        constexpr float m[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -0.5f, 0}, {0, 1, 1, 4, 0.25f, 0},
                                   {0, 1, -1, 8, -0.125f, 1}};
        return m[i][j];
    }
};
template <class L> struct Transposed {
    static constexpr int rows = L::cols, cols = L::rows;
    __device__ static float at(int i, int j) { return L::at(j, i); }
};

// out = L in L^T. Sums start from -0.0f, which adds exactly (an fp32 sum from +0.0f would turn a -0.0f term
// into +0.0f, so the compiler could not drop that add); terms of a zero entry are skipped at compile time.
template <class L>
__device__ __forceinline__ void sandwich(const float (&in)[L::cols][L::cols], float (&out)[L::rows][L::rows]) {
    float half[L::rows][L::cols];
#pragma unroll
    for (int a = 0; a < L::rows; ++a)
#pragma unroll
        for (int j = 0; j < L::cols; ++j) {
            float sum = -0.0f;
#pragma unroll
            for (int i = 0; i < L::cols; ++i)
                if (L::at(a, i) != 0.0f) sum += L::at(a, i) * in[i][j];
            half[a][j] = sum;
        }
#pragma unroll
    for (int a = 0; a < L::rows; ++a)
#pragma unroll
        for (int b = 0; b < L::rows; ++b) {
            float sum = -0.0f;
#pragma unroll
            for (int j = 0; j < L::cols; ++j)
                if (L::at(b, j) != 0.0f) sum += half[a][j] * L::at(b, j);
            out[a][b] = sum;
        }
}

// One item's transform-domain values (A x A: one per GEMM) to (or from) the GEMMs' matrices, `step` floats apart
template <int A> __device__ __forceinline__ void store_points(float* out, const float (&v)[A][A], long long step) {
#pragma unroll
    for (int r = 0; r < A; ++r)
#pragma unroll
        for (int s = 0; s < A; ++s) out[(A * r + s) * step] = v[r][s];
}
template <int A> __device__ __forceinline__ void load_points(const float* in, float (&v)[A][A], long long step) {
#pragma unroll
    for (int r = 0; r < A; ++r)
#pragma unroll
        for (int s = 0; s < A; ++s) v[r][s] = in[(A * r + s) * step];
}

// The tile t of a thread's item and where run-split matrices keep it: (t / Ts) * chunk + t % Ts
struct Tile {
    int n, ty, tx;
    long long at;
    __device__ Tile(long long t, int TH, int TW, long long Ts, long long chunk)
        : n((int)(t / ((long long)TW * TH))), ty((int)(t / TW % TH)), tx((int)(t % TW)), at(t / Ts * chunk + t % Ts) {}
};

// Out[xi][s][c][t % Ts] = (L d L^T)[xi] of tile t's D x D window d of the planes `in` (N, C, H, W), from
// (4 ty - pad, 4 tx - pad), zero outside them (s = t / Ts; zeros for t >= T, the last run's padding)
template <class L>
__device__ __forceinline__ void input_tiles(const float* __restrict__ in, float* __restrict__ out, int N, int C, int H,
                                            int W, int TH, int TW, int pad, int S, long long Ts, long long chunk) {
    constexpr int D = L::cols, A = L::rows;
    const long long T = (long long)N * TH * TW, total = Ts * S * C;
    const long long step = chunk * S;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i % (Ts * S);
        const int c = (int)(i / (Ts * S));
        const Tile tile(t, TH, TW, Ts, chunk);
        const float* plane = in + ((long long)tile.n * C + c) * H * W;
        const int y0 = 4 * tile.ty - pad, x0 = 4 * tile.tx - pad;
        float d[D][D];
#pragma unroll
        for (int r = 0; r < D; ++r)
#pragma unroll
            for (int s = 0; s < D; ++s) {
                const int yy = y0 + r, xx = x0 + s;
                d[r][s] = t < T && yy >= 0 && yy < H && xx >= 0 && xx < W ? plane[(long long)yy * W + xx] : 0.0f;
            }
        float v[A][A];
        sandwich<L>(d, v);
        store_points(out + tile.at + (long long)c * Ts, v, step);
    }
}

// V = B^T d B of x's 6x6 windows
extern "C" __global__ void wino_input(const float* __restrict__ x, float* __restrict__ V, int N, int C, int H, int W,
                                      int TH, int TW, int pad, int S, long long Ts, long long chunk) {
    input_tiles<Bt>(x, V, N, C, H, W, TH, TW, pad, S, Ts, chunk);
}

// U[36][K][C] = G g G^T of each filter g = w[k][c] (3x3), or with `data_grad` of g turned 180 degrees, stored as
// U[36][C][K] (the data gradient's filters: output channels C, input channels K)
extern "C" __global__ void wino_filter(const float* __restrict__ w, float* __restrict__ U, int K, int C,
                                       int data_grad, long long step) {
    const long long total = (long long)K * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(i / C), c = (int)(i % C);
        const float* src = w + i * 9;
        float g[3][3];
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
            for (int s = 0; s < 3; ++s) g[r][s] = data_grad ? src[(2 - r) * 3 + (2 - s)] : src[r * 3 + s];
        float u[6][6];
        sandwich<G>(g, u);
        float* out = U + (data_grad ? (long long)c * K + k : i);
        store_points(out, u, step);
    }
}

// y[n][k][4 ty + i][4 tx + j] = (A^T m A)[i][j] (+ bias[k]) of m = M[.][k][t], for the A^T of L (4 x alpha)
template <class L>
__device__ __forceinline__ void output_tiles(const float* __restrict__ M, const float* __restrict__ bias,
                                             float* __restrict__ y, int N, int K, int P, int Q, int TH, int TW,
                                             long long step) {
    constexpr int A = L::cols;
    const long long T = (long long)N * TH * TW, total = T * K;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i % T;
        const int k = (int)(i / T);
        const Tile tile(t, TH, TW, T, 0);
        const float* src = M + (long long)k * T + t;
        float m[A][A];
        load_points(src, m, step);
        float o[4][4];
        sandwich<L>(m, o);
        const float b = bias ? bias[k] : 0.0f;
        float* plane = y + ((long long)tile.n * K + k) * P * Q;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int yy = 4 * tile.ty + r;
            if (yy >= P) continue;
#pragma unroll
            for (int s = 0; s < 4; ++s)
                if (4 * tile.tx + s < Q) plane[(long long)yy * Q + 4 * tile.tx + s] = o[r][s] + b;
        }
    }
}

extern "C" __global__ void wino_output(const float* __restrict__ M, const float* __restrict__ bias,
                                       float* __restrict__ y, int N, int K, int P, int Q, int TH, int TW,
                                       long long step) {
    output_tiles<At>(M, bias, y, N, K, P, Q, TH, TW, step);
}

// U = A^T' g A^T of dy's 4x4 blocks (zero past P, Q)
extern "C" __global__ void wino_wgrad_dy(const float* __restrict__ dy, float* __restrict__ U, int N, int K, int P,
                                         int Q, int TH, int TW, int S, long long Ts, long long chunk) {
    input_tiles<Transposed<At>>(dy, U, N, K, P, Q, TH, TW, 0, S, Ts, chunk);
}

// dw[k][c] (3x3) = G^T m G of m = the sum over s of M[.][s][k][c]
extern "C" __global__ void wino_wgrad_output(const float* __restrict__ M, float* __restrict__ dw, int K, int C,
                                             int S, long long chunk) {
    const long long total = (long long)K * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        float m[6][6];
#pragma unroll
        for (int r = 0; r < 6; ++r)
#pragma unroll
            for (int s = 0; s < 6; ++s) {
                const float* src = M + (6 * r + s) * chunk * S + i;
                float sum = src[0];
                for (int run = 1; run < S; ++run) sum += src[run * chunk];
                m[r][s] = sum;
            }
        float o[3][3];
        sandwich<Transposed<G>>(m, o);
        float* out = dw + i * 9;
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
            for (int s = 0; s < 3; ++s) out[r * 3 + s] = o[r][s];
    }
}

// ------------------------------------------------------------ the 3x3 stride-2 forward at padding 1
// x's four phases, X_ab[i][j] = x[2 i + a][2 j + b] (a, b in {0, 1}), are 4C channels of a stride-1 2x2
// correlation: y[p][q] = sum over ab and c of sum_{u,v in {0,1}} h_abc[u][v] X_abc[p - 1 + u][q - 1 + v], where
// h_ab's taps are w's rows (columns) 0 and 2 for an odd phase, none and 1 for an even one (zero where none).
// It runs as F(4x4, 2x2), interpolating at 0, 1, -1, 1/2 and infinity: 25 GEMMs over the 4C channels.
//   wino_s2_input   x -> V[25][4C][T]: B^T d B of phase ab's 5x5 window d from (4 ty - 1, 4 tx - 1), channel
//                   (2 a + b) C + c
//   wino_s2_filter  w (K, C, 3, 3) -> U[25][K][4C]: G h G^T of each 2x2 h_abc
//   wino_s2_output  M[25][K][T] -> y: as wino_output, by this A^T
struct Bt5 {  // B^T (5 x 5)
    static constexpr int rows = 5, cols = 5;
    __device__ static float at(int i, int j) {
        constexpr float m[5][5] = {{0.5f, -1, -0.5f, 1, 0}, {0, -0.5f, 0.5f, 1, 0}, {0, 0.5f, -1.5f, 1, 0},
                                   {0, -1, 0, 1, 0},         {0, 0.5f, -1, -0.5f, 1}};
        return m[i][j];
    }
};
struct G5 {  // G (5 x 2)
    static constexpr int rows = 5, cols = 2;
    __device__ static float at(int i, int j) {
        constexpr float m[5][2] = {{2, 0}, {1, 1}, {-1.0f / 3, 1.0f / 3}, {-8.0f / 3, -4.0f / 3}, {0, 1}};
        return m[i][j];
    }
};
struct At5 {  // A^T (4 x 5)
    static constexpr int rows = 4, cols = 5;
    __device__ static float at(int i, int j) {
        constexpr float m[4][5] = {{1, 1, 1, 1, 0}, {0, 1, -1, 0.5f, 0}, {0, 1, 1, 0.25f, 0}, {0, 1, -1, 0.125f, 1}};
        return m[i][j];
    }
};

extern "C" __global__ void wino_s2_input(const float* __restrict__ x, float* __restrict__ V, int N, int C, int H,
                                         int W, int TH, int TW, long long step) {
    const long long T = (long long)N * TH * TW, total = T * 4 * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long t = i % T;
        const int j = (int)(i / T), phase = j / C, c = j - phase * C, a = phase >> 1, b = phase & 1;
        const Tile tile(t, TH, TW, T, 0);
        const float* plane = x + ((long long)tile.n * C + c) * H * W;
        const int r0 = 2 * (4 * tile.ty - 1) + a, s0 = 2 * (4 * tile.tx - 1) + b;  // x's row, column of d[0][0]
        float d[5][5];
#pragma unroll
        for (int r = 0; r < 5; ++r)
#pragma unroll
            for (int s = 0; s < 5; ++s) {
                const int yy = r0 + 2 * r, xx = s0 + 2 * s;
                d[r][s] = yy >= 0 && yy < H && xx >= 0 && xx < W ? plane[(long long)yy * W + xx] : 0.0f;
            }
        float v[5][5];
        sandwich<Bt5>(d, v);
        store_points(V + (long long)j * T + t, v, step);
    }
}

extern "C" __global__ void wino_s2_filter(const float* __restrict__ w, float* __restrict__ U, int K, int C,
                                          long long step) {
    const long long total = (long long)K * 4 * C;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(i / (4 * C)), j = (int)(i % (4 * C)), phase = j / C, c = j - phase * C;
        const int a = phase >> 1, b = phase & 1;
        const float* src = w + ((long long)k * C + c) * 9;
        const int rows[2] = {a ? 0 : -1, a ? 2 : 1}, cols[2] = {b ? 0 : -1, b ? 2 : 1};  // -1: no tap
        float h[2][2];
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
            for (int v = 0; v < 2; ++v) h[u][v] = rows[u] >= 0 && cols[v] >= 0 ? src[rows[u] * 3 + cols[v]] : 0.0f;
        float g[5][5];
        sandwich<G5>(h, g);
        store_points(U + i, g, step);
    }
}

extern "C" __global__ void wino_s2_output(const float* __restrict__ M, const float* __restrict__ bias,
                                          float* __restrict__ y, int N, int K, int P, int Q, int TH, int TW,
                                          long long step) {
    output_tiles<At5>(M, bias, y, N, K, P, Q, TH, TW, step);
}
