#!/bin/sh
# gpu_check.sh — the GPU session's checks, run on the GPU machine from the
# repository root with .gpubundle.tgz (or .gpubundle) carried (see gpu_bundle.sh).  Writes logs
# and benchmark JSON under $OUT.  Steps are chosen by arguments:
#   env tiny pcache memcheck bench4k bench128k ncu real sample prefill   (default: all but ncu and prefill, in that order)
B=.gpubundle
[ -x $B/lilac ] || tar -xzf $B.tgz || exit 1
export LD_LIBRARY_PATH=$PWD/$B/lib:$LD_LIBRARY_PATH
OUT=${OUT:-/tmp/lilac-out}
mkdir -p "$OUT"
steps=${*:-env tiny pcache memcheck bench4k bench128k real sample}
for s in $steps; do
    echo "=== $s"
    case $s in
    env)
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/env.txt"
        $B/lilac --version | tee -a "$OUT/env.txt" ;;
    tiny)
        $B/tests/test_gpu_backend test_gpu_golden_logits test_gpu_generate test_gpu_chunks test_gpu_snapshot 2>&1 | tee "$OUT/test_tiny.log" ;;
    pcache)
        # the prefix cache's save/restore through RAM and disk on the GPU, exact against a cold session
        $B/tests/test_gpu_pcache 2>&1 | tee "$OUT/test_pcache.log" ;;
    memcheck)
        for tool in memcheck racecheck synccheck; do
            compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_backend test_gpu_golden_logits test_gpu_generate \
                test_gpu_snapshot > "$OUT/$tool.log" 2>&1
            echo "$tool rc=$?"; grep -E "ERROR SUMMARY|checks" "$OUT/$tool.log"
        done ;;
    bench4k)
        $B/lilac bench --synthetic --ctx 4096 -n 256 --json "$OUT/bench_4k.json" 2>&1 | tee "$OUT/bench_4k.txt" ;;
    bench128k)
        $B/lilac bench --synthetic --ctx 131072 -n 128 --json "$OUT/bench_128k.json" 2>&1 | tee "$OUT/bench_128k.txt" ;;
    ncu)
        # per-kernel times of decode-graph kernels (after the synthetic fills and the first forward)
        ncu --clock-control none --graph-profiling node --launch-skip ${NCU_SKIP:-1700} --launch-count ${NCU_COUNT:-60} --csv \
            --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active \
            $B/lilac bench --synthetic --ctx 4096 -n 8 --warmup 0 --repeats 1 --no-prefill --no-profile > "$OUT/ncu.csv" 2>&1
        echo "ncu rc=$?"; grep -c '"' "$OUT/ncu.csv" ;;
    real)
        $B/tests/test_gpu_backend test_gpu_vs_cpu_real_width test_gpu_long_context_decode test_gpu_prefill_real_width 2>&1 | tee "$OUT/test_real.log" ;;
    prefill)
        $B/lilac bench --synthetic --prefill 512,4096,32768,131072 --no-decode --json "$OUT/prefill.json" 2>&1 | tee "$OUT/prefill.txt" ;;
    sample)
        # sampling and logprobs on the device: distributions, exactness, time per token
        $B/tests/test_gpu_sample 2>&1 | tee "$OUT/test_sample.log"
        for tool in memcheck racecheck synccheck; do
            compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_sample test_smoke > "$OUT/sample_$tool.log" 2>&1
            echo "sample $tool rc=$?"; grep -E "ERROR SUMMARY|checks" "$OUT/sample_$tool.log"
        done ;;
    esac
done
