export OUT
B=.gpubundle; [ -x $B/lilac ] || tar -xzf $B.tgz; export LD_LIBRARY_PATH=$PWD/$B/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/qgemm_test --quick > $OUT/${tool}_qgemm.log 2>&1; echo "$tool qgemm rc=$?"; grep -E "ERROR SUMMARY" $OUT/${tool}_qgemm.log
done
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_gpu_backend test_gpu_golden_logits test_gpu_chunks > $OUT/memcheck_tiny.log 2>&1; echo "memcheck tiny rc=$?"; grep "ERROR SUMMARY" $OUT/memcheck_tiny.log
timeout 300 $B/tests/test_gpu_backend > $OUT/gpu_tests.log 2>&1; echo "all gpu tests rc=$?"; tail -3 $OUT/gpu_tests.log; grep -E "FAIL" $OUT/gpu_tests.log | head
timeout 120 $B/lilac bench --synthetic --prefill 131072 --no-decode --repeats 1 > $OUT/pre128k.txt 2>&1; grep -E "^\| 131072" $OUT/pre128k.txt
timeout 120 $B/lilac bench --synthetic --decode 4K -n 256 --repeats 1 > $OUT/dec4k.txt 2>&1; grep -E "^\|" $OUT/dec4k.txt | head -5
