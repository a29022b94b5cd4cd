#!/bin/sh
# build_moe_cluster.sh — the MoE cluster workshop (moe_cluster_test.cu: the engine's
# router against a reference, then the gate/up and down of an expert slot joined in
# a cluster against tq_gate_up + tq_down; decode/moe.cu and gemv.cu for the router):
# build/kernels/moe_cluster_test.  Run from the repository root.  Prints
# registers and spills of the kernels it times (full ptxas log:
# build/kernels/moe_cluster_test.ptxas).
set -e
sh bench/kernels/nvcc_workshop.sh moe_cluster_test \
    'moe_cluster|combine|tq_gate_up<4, false>|tq_down<1>|router_cluster_kernel<8, 4, 32>|router_kernel<8, 4, 32>|moe_slots|route_z|make_M|ring_gemv<4096, true>' \
    -DLC_MOE_SLOTS_STAMPS bench/kernels/moe_cluster_test.cu src/backend/cuda/decode/moe.cu src/backend/cuda/decode/moe_slots.cu \
    src/backend/cuda/decode/gemv.cu src/backend/cuda/fill.cu src/backend/cuda/decode_try.c
echo "built build/kernels/moe_cluster_test (run: build/kernels/moe_cluster_test [--quick])"
