#!/bin/sh
# build_stream_probe.sh — the HBM-to-shared-memory probe by copy mechanism
# (stream_probe_test.cu): build/kernels/stream_probe_test.  Run from the
# repository root.
set -e
sh bench/kernels/nvcc_workshop.sh stream_probe_test 'probe' bench/kernels/stream_probe_test.cu
echo "built build/kernels/stream_probe_test (run: build/kernels/stream_probe_test [--quick])"
