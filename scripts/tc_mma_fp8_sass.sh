#!/usr/bin/env bash
# Print the SASS that ptxas emits for the fp8 mma.sync of the validation kernels
# (MATLAB-tensor-core model_validation/CUDA/mma_fp8_output_fp16.cu and _fp32.cu):
#   mma.sync.aligned.m16n8k32.row.col.{f16,f32}.<fmt>.<fmt>.{f16,f32}
# for sm_89 (Ada), sm_90 (H100/H200) and sm_100 (B200).  No GPU is needed: nvcc (with ptxas)
# and nvdisasm only (nvdisasm: e.g. `pip install --target DIR nvidia-cuda-nvdisasm`).
# The evidence behind the fp8 paths with sub-blocks in numstd/emulate/tensor_core.py
# (docs/emulators.md): on sm_90/sm_100 the instruction is two HMMA.16816 over the F2FP-unpacked
# low and high 16-bit halves of the fp8 registers, the first from zero, then HADD2/FADD of c.
#
# Usage: scripts/tc_mma_fp8_sass.sh [e4m3|e5m2]   (NVDISASM=path overrides the nvdisasm found)
set -euo pipefail
fmt="${1:-e4m3}"
nvdisasm="${NVDISASM:-$(command -v nvdisasm || true)}"
if ! command -v nvcc >/dev/null || [ -z "$nvdisasm" ]; then
    echo "needs nvcc and nvdisasm on PATH (or NVDISASM=...)" >&2
    exit 2
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat > "$dir/k.cu" <<CU
extern "C" __global__ void out_f16(unsigned* o, const unsigned* a, const unsigned* b,
                                  const unsigned* c) {
    unsigned d0, d1;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.${fmt}.${fmt}.f16 "
                 "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
                 : "=r"(d0), "=r"(d1)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "r"(c[0]), "r"(c[1]));
    o[0] = d0; o[1] = d1;
}
extern "C" __global__ void out_f32(float* o, const unsigned* a, const unsigned* b,
                                  const float* c) {
    float d0, d1, d2, d3;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.${fmt}.${fmt}.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    o[0] = d0; o[1] = d1; o[2] = d2; o[3] = d3;
}
CU
nvcc --version | tail -1
for sm in 89 90 100; do
    nvcc -arch="sm_$sm" -cubin -o "$dir/k$sm.cubin" "$dir/k.cu"
    echo "== sm_$sm ($fmt)"
    "$nvdisasm" -c "$dir/k$sm.cubin" \
        | grep -E '\.text\.out|MMA|F2FP|HADD|FADD' | grep -v section \
        | sed -E 's@/\*[0-9a-f]+\*/@@g; s/[[:space:]]+/ /g'
done
