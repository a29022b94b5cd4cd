export OUT
B=.gpubundle; [ -x $B/lilac ] || tar -xzf $B.tgz; export LD_LIBRARY_PATH=$PWD/$B/lib
timeout 100 build/kernels/qgemm_test > $OUT/qgemm.log 2>&1; echo "qgemm rc=$?"
grep -E "f16|FAIL|all ok" $OUT/qgemm.log | grep -E "rel|time.*4096|FAIL|all ok"
timeout 300 $B/tests/test_gpu_backend test_gpu_vs_cpu_real_width test_gpu_prefill_real_width test_gpu_golden_logits test_gpu_chunks test_gpu_generate test_gpu_snapshot 2>&1 | grep -E "real width|prefill, real|ok|FAIL|checks"
timeout 250 $B/lilac bench --synthetic --prefill 512,4096,32768 --no-decode --repeats 3 --json $OUT/prefill.json > $OUT/bench.txt 2>&1
grep -E "^\|" $OUT/bench.txt
