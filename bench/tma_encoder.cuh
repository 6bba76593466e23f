/* tma_encoder.cuh -- cuTensorMapEncodeTiled for the benches, through the
 * runtime's driver entry point (no -lcuda), looked up once per program.
 * A bench that cannot have it has nothing to measure: it says so and
 * exits (bench programs only; libattune's own lookup is cuda_fused.cu's). */
#ifndef ATTUNE_BENCH_TMA_ENCODER_CUH
#define ATTUNE_BENCH_TMA_ENCODER_CUH

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cuda_runtime.h>

#include "graph_timing.cuh"

#include <cstdio>
#include <cstdlib>

static PFN_cuTensorMapEncodeTiled_v12000 bench_tma_encoder()
{
    static PFN_cuTensorMapEncodeTiled_v12000 enc = []() {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q;
        CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess) {
            std::fprintf(stderr, "no cuTensorMapEncodeTiled\n");
            std::exit(1);
        }
        return (PFN_cuTensorMapEncodeTiled_v12000)f;
    }();
    return enc;
}

#endif
