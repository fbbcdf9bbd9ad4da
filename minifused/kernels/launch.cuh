// Programmatic dependent launch (PDL, sm_90+). kernels.launch() launches a kernel with it while a CUDA
// graph is being captured; such a kernel calls pdl_entry() first, before it reads or writes memory.
#pragma once

__device__ __forceinline__ void pdl_entry() {
#if __CUDA_ARCH__ >= 900
    // Wait until the kernels before this one have finished and their writes are visible (returns at
    // once when launched without PDL) ...
    asm volatile("griddepcontrol.wait;" ::: "memory");
    // ... then let the next kernel's blocks launch: they take this kernel's places as its blocks exit,
    // and wait in turn. (A no-op when the next kernel is not launched with PDL.)
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
