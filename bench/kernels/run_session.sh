#!/bin/sh
# run_session.sh — one GPU call's worth of prefill work: the kernel workshops,
# the GPU tests, and the prefill benchmark (steps as arguments).
B=.gpubundle
# the bundle: build/gb.tar.xz (tar | xz -9 of .gpubundle: a fifth of the gzipped size, which leaves room in the carry
# for a second one, build/gbbase.tar.xz of .gpubundle-base) or .gpubundle.tgz
untar() { python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall()" "$1"; }
[ -f build/gbbase.tar.xz ] && [ ! -x .gpubundle-base/lilac ] && untar build/gbbase.tar.xz
if [ ! -x $B/lilac ]; then
    if [ -f build/gb.tar.xz ]; then untar build/gb.tar.xz || exit 1; else tar -xzf $B.tgz || exit 1; fi
fi
export LD_LIBRARY_PATH=$PWD/$B/lib:$LD_LIBRARY_PATH
OUT=${OUT:-/tmp/lilac-out}
mkdir -p "$OUT"
for s in "$@"; do
    echo "=== $s $(date +%T)"
    case $s in
    env) nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; $B/lilac --version ;;
    qgemm) timeout 120 build/kernels/qgemm_test 2>&1 | tee "$OUT/qgemm.log" ;;
    qgemmmma) LILAC_QGEMM=mma timeout 120 build/kernels/qgemm_test 2>&1 | grep -E "time|FAIL|ok \(" | tee "$OUT/qgemm_mma.log" ;;
    qgemm1) LILAC_QGEMM_SPLIT=1 timeout 120 build/kernels/qgemm_test 2>&1 | grep -E "time|FAIL|ok \(" | tee "$OUT/qgemm_split1.log" ;;
    gemv) [ -x build/kernels/gemv_test ] || sh bench/kernels/build_gemv.sh > "$OUT/build_gemv.log" 2>&1
        timeout 150 build/kernels/gemv_test 2>&1 | tee "$OUT/gemv.log" ;;
    gemvsan) timeout 280 compute-sanitizer --tool memcheck --error-exitcode 9 build/kernels/gemv_test --quick > "$OUT/memcheck_gemv.log" 2>&1; echo "memcheck gemv rc=$?"; grep -E "ERROR SUMMARY" "$OUT/memcheck_gemv.log" ;;
    attn) [ -x build/kernels/attn_prefill_test ] && timeout 150 build/kernels/attn_prefill_test 2>&1 | tee "$OUT/attn.log" ;;
    attnwd) [ -x build/kernels/attn_prefill_test_wd ] && timeout 100 build/kernels/attn_prefill_test_wd --quick --modes 12,11 2>&1 | tee "$OUT/attn_wd.log" ;;
    gdn) [ -x build/kernels/gdn_chunk_test ] && timeout 150 build/kernels/gdn_chunk_test 2>&1 | tee "$OUT/gdn.log" ;;
    tiny) timeout 120 $B/tests/test_gpu_backend test_gpu_golden_logits test_gpu_generate test_gpu_chunks test_gpu_snapshot 2>&1 | tee "$OUT/tiny.log" ;;
    real) timeout 400 $B/tests/test_gpu_backend test_gpu_vs_cpu_real_width test_gpu_prefill_real_width 2>&1 | tee "$OUT/real.log" ;;
    real1) LILAC_QGEMM_SPLIT=1 timeout 400 $B/tests/test_gpu_backend test_gpu_vs_cpu_real_width test_gpu_prefill_real_width 2>&1 | tee "$OUT/real_split1.log" ;;
    long) timeout 200 $B/tests/test_gpu_backend test_gpu_long_context_decode 2>&1 | tee -a "$OUT/real.log" ;;
    simt) LILAC_PREFILL=simt timeout 200 $B/lilac bench --synthetic --prefill 512,4096 --no-decode 2>&1 | tee "$OUT/bench_simt.txt" ;;
    pre) timeout 300 $B/lilac bench --synthetic --prefill ${PRE:-512,4096,16384} --no-decode --repeats ${REPEATS:-3} --json "$OUT/prefill.json" 2>&1 | tee "$OUT/bench_prefill.txt" ;;
    pre128) timeout 120 $B/lilac bench --synthetic --prefill 131072 --no-decode --repeats 1 --json "$OUT/prefill128k.json" 2>&1 | tee "$OUT/bench_prefill128k.txt" ;;
    pre1) LILAC_QGEMM_SPLIT=1 timeout 300 $B/lilac bench --synthetic --prefill ${PRE:-512,4096} --no-decode 2>&1 | tee "$OUT/bench_prefill_split1.txt" ;;
    pos)
        for be in cpu cuda; do $B/lilac --backend $be score --model tests/fixtures/tiny --ids @bench/kernels/tiny72.ids --logits-out "$OUT/lg_$be.f32" > /dev/null; done
        LILAC_PREFILL=simt $B/lilac --backend cuda score --model tests/fixtures/tiny --ids @bench/kernels/tiny72.ids --logits-out "$OUT/lg_simt.f32" > /dev/null
        python3 -c "
import numpy as np
a=np.fromfile('$OUT/lg_cpu.f32',dtype=np.float32).reshape(72,-1); b=np.fromfile('$OUT/lg_cuda.f32',dtype=np.float32).reshape(72,-1); c=np.fromfile('$OUT/lg_simt.f32',dtype=np.float32).reshape(72,-1)
print('per position max|cuda-cpu|:', ' '.join('%d:%.3g'%(i,x) for i,x in enumerate(np.abs(a-b).max(1))))
print('per position max|simt-cpu|:', ' '.join('%d:%.3g'%(i,x) for i,x in enumerate(np.abs(a-c).max(1))))
" ;;
    trace)
        for ids in @bench/kernels/tiny72.ids; do
            LILAC_TRACE=1 $B/lilac --backend cpu score --model tests/fixtures/tiny --ids $ids > /dev/null 2> "$OUT/trace_cpu.txt"
            LILAC_TRACE=1 $B/lilac --backend cuda score --model tests/fixtures/tiny --ids $ids > /dev/null 2> "$OUT/trace_gpu.txt"
        done
        python3 -c "
import re,sys
a=open('$OUT/trace_cpu.txt').read().splitlines(); b=open('$OUT/trace_gpu.txt').read().splitlines()
ga={}
for l in b:
    m=re.match(r'trace (\S+)\s*\[\s*(\d+)\]: n=(\d+)\s+sum=(\S+)\s+abs=(\S+)',l)
    if m: ga[(m.group(1),m.group(2))]=l
n=0
for l in a:
    m=re.match(r'trace (\S+)\s*\[\s*(\d+)\]: n=(\d+)\s+sum=(\S+)\s+abs=(\S+)',l)
    if not m: continue
    g=ga.get((m.group(1),m.group(2)))
    if not g: print('cpu only:',l); continue
    ab=float(re.search(r'abs=(\S+)',g).group(1)); aa=float(m.group(5))
    flag=abs(ab-aa)>1e-3*max(abs(aa),1e-9)
    if flag or n<6: print(('DIFF ' if flag else 'ok   ')+l); print('     '+g); n+=1
    if flag and n>30: break
" ;;
    ncu) ncu --clock-control none -k regex:qgemm --launch-skip ${NCU_SKIP:-106} --launch-count 1 --section SpeedOfLight \
            --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy --section InstructionStats build/kernels/qgemm_test > "$OUT/ncu.txt" 2>&1
        grep -E "qgemm_kernel|Throughput|Stall|Issue|Executed Ipc|Occupancy|Registers|Warp Cycles|Block Limit|Shared Memory Config" "$OUT/ncu.txt" | head -60 ;;
    ncuwg) ncu --clock-control none -k regex:qgemm_wg --launch-skip ${NCU_SKIP:-106} --launch-count 1 --section SpeedOfLight \
            --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy --section SchedulerStats build/kernels/qgemm_test > "$OUT/ncu_wg.txt" 2>&1
        grep -E "qgemm_wg|Throughput|Stall|Issue|Ipc|Occupancy|Warp Cycles|Eligible|Active Warps|Pipe" "$OUT/ncu_wg.txt" | head -50 ;;
    memcheck)
        for tool in memcheck racecheck; do
            timeout 280 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_backend test_gpu_golden_logits test_gpu_chunks > "$OUT/$tool.log" 2>&1
            echo "$tool tiny rc=$?"; grep -E "ERROR SUMMARY" "$OUT/$tool.log"
        done
        for tool in memcheck racecheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/qgemm_test --small > "$OUT/${tool}_qgemm.log" 2>&1; echo "$tool qgemm rc=$?"; grep -E "ERROR SUMMARY" "$OUT/${tool}_qgemm.log"
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/attn_prefill_test --quick > "$OUT/${tool}_attn.log" 2>&1; echo "$tool attn rc=$?"; grep -E "ERROR SUMMARY" "$OUT/${tool}_attn.log"
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/gdn_chunk_test --no-timing > "$OUT/${tool}_gdn.log" 2>&1; echo "$tool gdn rc=$?"; grep -E "ERROR SUMMARY" "$OUT/${tool}_gdn.log"
        done ;;
    chunks) for ch in 2048 8192; do timeout 120 $B/lilac bench --synthetic --prefill 4096,16384 --chunk $ch --no-decode 2>&1 | grep -v "^bench:" | tail -3; done ;;
    gpuserve)
        # the server, chat and Anthropic routes on the synthetic full-size model on the GPU, then a short soak
        $B/lilac synth --out /tmp/full --quiet && python3 tools/make_synthetic_tokenizer.py tests/fixtures/tokenizer/qwen3 /tmp/full > /dev/null
        ls /tmp/full
        printf 'Hello\n/stats\n' | timeout 60 $B/lilac chat --model /tmp/full --no-think -n 8 > "$OUT/chat.txt" 2>&1; echo "chat rc=$?"; tail -3 "$OUT/chat.txt"
        $B/lilac serve --model /tmp/full --port 18080 --quiet > "$OUT/serve.log" 2>&1 & SP=$!
        for i in $(seq 1 60); do curl -s localhost:18080/health > /dev/null && break; sleep 1; done
        curl -s localhost:18080/v1/messages -H 'content-type: application/json' -d '{"model":"x","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}' | head -c 600; echo
        curl -s localhost:18080/v1/chat/completions -H 'content-type: application/json' -d '{"max_tokens":8,"stream":true,"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}}' | tail -c 400; echo
        curl -s localhost:18080/metrics | grep -E "gpu_memory|prefill_tokens_per_second|decode_tokens_per_second|requests_total" | head -12
        curl -s -o /dev/null -w "web page: %{http_code} %{size_download} bytes\n" localhost:18080/
        kill -TERM $SP; wait $SP; echo "serve exit=$?"
        timeout $(( ${SOAK_MIN:-1} * 60 + 150 )) python3 tools/soak.py --lilac $B/lilac --model /tmp/full --minutes ${SOAK_MIN:-1} --clients 4 --max-tokens 8 --json "$OUT/soak_gpu.json" 2>&1 | tail -15 ;;
    qhws) # the warp-specialised fp16 GEMMs: correctness (all cases) and timing, then the sanitizers on small cases
        LILAC_QH_DENSE=ws128 LILAC_QH_MOE=ws64 timeout 100 build/kernels/qgemm_test 2>&1 | grep -E "f16|FAIL|all ok" | grep -E "rel|time.*4096|FAIL|all ok"
        for tool in memcheck racecheck synccheck; do
            LILAC_QH_DENSE=ws128 LILAC_QH_MOE=ws64 timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/qgemm_test --small > "$OUT/${tool}_qhws.log" 2>&1; echo "$tool qhws rc=$?"; grep -E "SUMMARY" "$OUT/${tool}_qhws.log"
        done ;;
    qhsan) # the fp16 wgmma GEMMs (gemm_wgmma.cu) under compute-sanitizer, small cases
        for tool in memcheck racecheck synccheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/qgemm_test --small > "$OUT/${tool}_qh.log" 2>&1; echo "$tool qh rc=$?"; grep -E "ERROR SUMMARY" "$OUT/${tool}_qh.log"
        done ;;
    qhshapes) # the fp16 GEMMs' tile shapes side by side (LILAC_QH_DENSE / LILAC_QH_MOE)
        for v in "128x1 64x1o2" "ws128 ws64" "ws64 64x1o2" "64x1o2 64x1" "64x2 64x2" "128x1 128x1"; do
            set -- $v
            echo "dense $1, experts $2:"
            LILAC_QH_DENSE=$1 LILAC_QH_MOE=$2 timeout 100 build/kernels/qgemm_test --one 2>&1 | grep time
        done ;;
    gpucache) # prefix-cache snapshots on the GPU: saved and restored across a restart, and the RAM tier, at about 4K and 32K tokens
        [ -f /tmp/full/config.json ] || { $B/lilac synth --out /tmp/full --quiet && python3 tools/make_synthetic_tokenizer.py tests/fixtures/tokenizer/qwen3 /tmp/full > /dev/null; }
        for w in ${WORDS_LIST:-700 5600}; do
            echo "words $w, restart:"; WORDS=$w LILAC=$B/lilac LILAC_FLAGS="--backend cuda" MODEL=/tmp/full CTX=40000 timeout 240 sh tools/cache_restart_bench.sh 2>&1 | tee -a "$OUT/gpucache.txt"
            echo "words $w, RAM tier:"; WORDS=$w LILAC=$B/lilac LILAC_FLAGS="--backend cuda" MODEL=/tmp/full CTX=40000 CACHE_RAM=8G timeout 240 sh tools/cache_ram_bench.sh 2>&1 | tee -a "$OUT/gpucache.txt"
        done ;;
    gdnrace) # the DeltaNet chunk kernel under racecheck and memcheck, calls of up to 100 tokens
        [ -x build/kernels/gdn_chunk_test ] || sh bench/kernels/build_gdn.sh > /dev/null
        for tool in racecheck memcheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/gdn_chunk_test --small > "$OUT/${tool}_gdn_small.log" 2>&1
            echo "$tool gdn --small rc=$?"; grep -E "SUMMARY|all ok|FAIL" "$OUT/${tool}_gdn_small.log" | head -3
        done ;;
    gemvmma) # the tensor-core decode GEMV workshop: correctness and timing, then memcheck
        [ -x build/kernels/gemv_mma_test ] || sh bench/kernels/build_gemv_mma.sh > "$OUT/build_gemv_mma.log" 2>&1
        timeout 150 build/kernels/gemv_mma_test 2>&1 | tee "$OUT/gemv_mma.log" | tail -40
        timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/kernels/gemv_mma_test --quick > "$OUT/memcheck_gemv_mma.log" 2>&1
        echo "memcheck gemv_mma rc=$?"; grep SUMMARY "$OUT/memcheck_gemv_mma.log" ;;
    gdnstep) # the decode DeltaNet step workshop (block form vs split forms): correctness and timing, then the sanitizers on --quick
        [ -x build/kernels/gdn_step_test ] || sh bench/kernels/build_gdn_step.sh > "$OUT/build_gdn_step.log" 2>&1
        timeout 150 build/kernels/gdn_step_test 2>&1 | tee -a "$OUT/gdn_step.log" | tail -30
        for tool in memcheck racecheck synccheck; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/gdn_step_test --quick > /tmp/san.log 2>&1
            echo "$tool gdn_step --quick rc=$?"; grep -E "SUMMARY|all ok|FAIL" /tmp/san.log | head -3; cat /tmp/san.log >> "$OUT/gdn_step_san.log"
        done ;;
    moecl) # the MoE cluster workshop (gate/up and down of a slot joined in a cluster) against tq_gate_up + tq_down, the engine's
        # one-kernel MoE (lc_moe_slots) against its three kernels with its phase stamps, out_proj + MoE with the
        # routing beside out_proj (early) against the engine's, then the sanitizers
        [ -x build/kernels/moe_cluster_test ] || sh bench/kernels/build_moe_cluster.sh > "$OUT/build_moe_cluster.log" 2>&1
        for v in ${MOECL_TRY:-- none xchg,c8}; do # LILAC_DECODE_TRY's variants of the one kernel (read per launch): the default, none, ...
            t=$v; [ "$v" = - ] && t=
            echo "--- LILAC_DECODE_TRY=${t:-(unset)}"
            LILAC_DECODE_TRY=$t timeout 120 build/kernels/moe_cluster_test 2>&1 | tee -a "$OUT/moe_cluster.log"
        done
        for run in "memcheck -" "racecheck -" "synccheck -" "synccheck none"; do # synccheck: the default and the barrier form
            set -- $run; t=$2; [ "$t" = - ] && t=
            LILAC_DECODE_TRY=$t timeout 240 compute-sanitizer --tool $1 --error-exitcode 9 build/kernels/moe_cluster_test --quick > /tmp/san.log 2>&1
            echo "$1 moe_cluster --quick (LILAC_DECODE_TRY=${t:-unset}) rc=$?"; grep -E "SUMMARY" /tmp/san.log; cat /tmp/san.log >> "$OUT/moe_cluster_san.log"
        done ;;
    topk) # the routing top-K alone: moe_route.cuh's topk_warp against its variants, cycles per call cold and warm, then memcheck
        [ -x build/kernels/topk_test ] || sh bench/kernels/build_topk.sh > "$OUT/build_topk.log" 2>&1
        timeout 60 build/kernels/topk_test 2>&1 | tee "$OUT/topk.log"
        timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/kernels/topk_test --quick > "$OUT/memcheck_topk.log" 2>&1
        echo "memcheck topk --quick rc=$?"; grep SUMMARY "$OUT/memcheck_topk.log" ;;
    probe) # HBM to shared memory by copy mechanism (stream_probe_test: cp.async 16 B, ld.global, bulk copies) per SM count
        [ -x build/kernels/stream_probe_test ] || sh bench/kernels/build_stream_probe.sh > "$OUT/build_stream_probe.log" 2>&1
        timeout 200 build/kernels/stream_probe_test 2>&1 | tee "$OUT/stream_probe.log" ;;
    persist) # the persistent decode chain workshop
        [ -x build/kernels/persist_chain_test ] || sh bench/kernels/build_persist.sh > "$OUT/build_persist.log" 2>&1
        timeout 120 build/kernels/persist_chain_test 2>&1 | tee "$OUT/persist.log" | tail -14 ;;
    graph) # per-kernel times inside the decode graph at 4K (nsys node tracing), then tools/graph_trace.py
        NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)
        if [ -z "$NSYS" ]; then echo "graph: skipped (no nsys on this machine)"; else
            timeout 200 "$NSYS" profile --cuda-graph-trace=node -t cuda -o /tmp/lilac-dec --force-overwrite true \
                $B/lilac bench --synthetic --decode 4096 -n 64 --repeats 1 --no-profile > "$OUT/nsys.log" 2>&1
            timeout 200 "$NSYS" stats --report cuda_gpu_trace --format csv -o /tmp/lilac-dec /tmp/lilac-dec.nsys-rep > /dev/null 2>&1
            python3 tools/graph_trace.py /tmp/lilac-dec_cuda_gpu_trace.csv --steps 20 2>&1 | tee "$OUT/graph_kernels.txt"
        fi ;;
    cupti) # per-kernel times inside the decode graph at 4K (tools/cupti_trace.c: no nsys report here), then tools/graph_trace.py;
        # CUPTI_VARIANTS: env settings to trace one after another ("-" the default; commas join settings, + stands
        # for a comma inside a value: LILAC_DECODE_TRY=xchg+c8),
        # e.g. "- LILAC_MOE=split LILAC_MOE=split,LILAC_ROUTER=block"; CUPTI_BUNDLES: the bundles' folders, each
        # traced with every variant (default $B; e.g. ".gpubundle-base .gpubundle")
        CUPTI_LIB=$(sh tools/build_cupti_trace.sh /tmp/libcupti_trace.so) || { echo "cupti: skipped (tracer not built)"; continue; }
        for d in ${CUPTI_BUNDLES:-$B}; do
        for v in ${CUPTI_VARIANTS:--}; do
            tag=$(echo "$d$v" | tr -c 'a-zA-Z0-9\n' _)
            [ "$v" = - ] && v=
            echo "--- $d ${v:-default}"
            env $(echo "$v" | tr , ' ' | tr + ,) LD_LIBRARY_PATH="$CUPTI_LIB:$LD_LIBRARY_PATH" CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so CUPTI_TRACE_OUT=/tmp/cupti_$tag.csv \
                timeout 200 $d/lilac bench --synthetic --decode ${CUPTI_CTX:-4096} -n 64 --repeats 1 --no-profile > "$OUT/cupti_bench_$tag.log" 2>&1
            grep -E "^\| [0-9]" "$OUT/cupti_bench_$tag.log"
            python3 tools/graph_trace.py /tmp/cupti_$tag.csv --steps 20 2>&1 | tee "$OUT/graph_kernels_$tag.txt"
        done
        done ;;
    pcache) timeout 120 $B/tests/test_gpu_pcache 2>&1 | tee "$OUT/pcache.log" | tail -3 ;;
    decgdn) # decode at 4K with the DeltaNet step's block form against the split forms (LILAC_GDN_STEP), same binary
        for f in block split4 split2 split8; do echo "LILAC_GDN_STEP=$f"; LILAC_GDN_STEP=$f timeout 100 $B/lilac bench --synthetic --decode 4096 -n 256 --repeats 3 2>&1 | tee "$OUT/bench_dec_gdn_$f.txt" | grep -E "^\| [0-9]|step:|DeltaNet"; done ;;
    decab) # decode at 4K, 32K and 128K, the default kernels against LILAC_GEMV=stream, same binary
        for k in auto stream; do echo "LILAC_GEMV=$k"; LILAC_GEMV=$k timeout 200 $B/lilac bench --synthetic --decode 4096,32768,131072 -n 256 --repeats 3 2>&1 | tee "$OUT/bench_dec_$k.txt" | grep -E "^\| [0-9]|step:|roofline"; done ;;
    decnext) # decode at 4K, 32K and 128K: the default (the MoE as one kernel) against the split MoE (cluster router) and its variants, same binary
        for v in "" "LILAC_MOE=split" "LILAC_MOE=split LILAC_ROUTER=block" "LILAC_MOE=split LILAC_GATE_UP=xw"; do
            echo "${v:-default}"; env $v timeout 100 $B/lilac bench --synthetic --decode ${DEC:-4096,32768,131072} -n 256 --repeats ${REPEATS:-3} 2>&1 | grep -E "^\| [0-9]"
        done ;;
    realnext) # the GPU tests and the sanitizers with the split MoE and its opt-in per-warp-x gate/up
        LILAC_MOE=split LILAC_GATE_UP=xw timeout 300 $B/tests/test_gpu_backend 2>&1 | tee "$OUT/gpu_backend_next.log" | grep -E "top-1|KL|checks|FAIL"
        LILAC_MOE=split LILAC_GATE_UP=xw timeout 100 $B/tests/test_gpu_sample 2>&1 | tail -1
        for tool in memcheck racecheck synccheck; do
            LILAC_MOE=split LILAC_GATE_UP=xw timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/tests/test_gpu_backend test_gpu_golden_logits test_gpu_generate > "$OUT/${tool}_next.log" 2>&1
            echo "$tool next rc=$?"; grep -E "SUMMARY" "$OUT/${tool}_next.log"
        done ;;
    abdec|abtry) # decode at 4K, 32K and 128K: "bundle:LILAC_DECODE_TRY[:VAR=value+...]" entries of ABTRY (bundle
        # tree = .gpubundle, base = .gpubundle-base from tools/gpu_bundle_rev.sh, NAME = build/gb_NAME.tar.xz, another
        # gpu_bundle_rev.sh --xz output renamed; "-" = unset; VAR=value: more
        # environment for that entry), two rounds in alternating order, so a drift
        # of the machine shows in both: by default the baseline's lilac against the tree's
        [ -x .gpubundle-base/lilac ] || [ ! -f .gpubundle-base.tgz ] || tar -xzf .gpubundle-base.tgz
        case " ${ABTRY:-base:-} " in *" base:"*) [ -x .gpubundle-base/lilac ] || { echo "$s: no baseline bundle"; continue; } ;; esac
        for r in 1 2; do
            list=${ABTRY:-base:- tree:-}
            [ $r = 2 ] && list=$(echo $list | tr ' ' '\n' | tac | tr '\n' ' ')
            for v in $list; do
                d=$B; [ "${v%%:*}" = base ] && d=.gpubundle-base
                case ${v%%:*} in tree | base) ;; *) d=.gpubundle-${v%%:*} # another bundle: build/gb_NAME.tar.xz of .gpubundle-base
                    n=${v%%:*}; [ -x $d/lilac ] || { python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
                        build/gb_$n.tar.xz /tmp/gb_$n && mv /tmp/gb_$n/.gpubundle-base $d; } ;; esac
                t=${v#*:}; e=; case $t in *:*) e=$(echo "${t#*:}" | tr + ' '); t=${t%%:*} ;; esac; [ "$t" = - ] && t=
                echo "$v ($($d/lilac --version | head -1)), round $r" | tee -a "$OUT/abtry.log"
                env $e LD_LIBRARY_PATH=$PWD/$d/lib:$LD_LIBRARY_PATH LILAC_DECODE_TRY=$t timeout 150 $d/lilac bench --synthetic \
                    --decode "${DEC:-4096,32768,131072}" -n 256 --repeats 3 --no-profile 2>&1 | tee -a "$OUT/abtry.log" | grep -E "^\| [0-9]"
            done
        done ;;
    trysan) # the variants under the sanitizers: the engine's decode graph with all of them (4 steps at 4K, synthetic weights),
        # then the MoE one (moe_cluster_test) and the DeltaNet step (gdn_step_test) workshops
        [ -x build/kernels/moe_cluster_test ] || sh bench/kernels/build_moe_cluster.sh > "$OUT/build_moe_cluster.log" 2>&1
        [ -x build/kernels/gdn_step_test ] || sh bench/kernels/build_gdn_step.sh > "$OUT/build_gdn_step.log" 2>&1
        for tool in memcheck racecheck synccheck; do
            LILAC_DECODE_TRY=all timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/lilac bench --synthetic --decode 4096 -n 4 --repeats 1 --no-profile > /tmp/san.log 2>&1
            echo "$tool decode graph (all variants) rc=$?"; grep -E "SUMMARY" /tmp/san.log; cat /tmp/san.log >> "$OUT/trysan.log"
            LILAC_DECODE_TRY=all timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/moe_cluster_test --quick > /tmp/san.log 2>&1
            echo "$tool moe_cluster (all variants) rc=$?"; grep -E "SUMMARY" /tmp/san.log; cat /tmp/san.log >> "$OUT/trysan.log"
            LILAC_DECODE_TRY=all timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build/kernels/gdn_step_test --quick > /tmp/san.log 2>&1
            echo "$tool gdn_step (all variants) rc=$?"; grep -E "SUMMARY" /tmp/san.log; cat /tmp/san.log >> "$OUT/trysan.log"
        done ;;
    stasync) # the st.async exchange alone (st_async_test) per cluster size, plain and under synccheck: whether the size decides
        # lc_moe_slots' xchg fault (clusters of 16; the DeltaNet step's clusters of 4 pass)
        [ -x build/kernels/st_async_test ] || sh bench/kernels/build_st_async.sh > "$OUT/build_st_async.log" 2>&1
        for cfg in "4 0" "4 1" "8 0" "8 1" "16 0" "16 1" "16 1 1" "8 1 1"; do
            timeout 30 build/kernels/st_async_test $cfg
            timeout 120 compute-sanitizer --tool synccheck --error-exitcode 9 build/kernels/st_async_test $cfg > /tmp/san.log 2>&1
            echo "synccheck st_async_test $cfg rc=$?: $(grep -E 'SUMMARY|error' /tmp/san.log | head -2 | tr '\n' ' ')"
            cat /tmp/san.log >> "$OUT/stasync.log"
        done ;;
    onesan) # the decode graph with LILAC_DECODE_TRY=$SANTRY under memcheck and synccheck (4 steps at 4K, synthetic weights)
        for tool in memcheck synccheck; do
            LILAC_DECODE_TRY=$SANTRY timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/lilac bench --synthetic --decode 4096 -n 4 --repeats 1 --no-profile > /tmp/san.log 2>&1
            echo "$tool decode graph (LILAC_DECODE_TRY=$SANTRY) rc=$?"; grep -E "SUMMARY" /tmp/san.log; cat /tmp/san.log >> "$OUT/onesan.log"
        done ;;
    defsan) # the default decode graph under memcheck and synccheck, synccheck also in the barrier form (none), 4 steps at
        # 4K on synthetic weights; racecheck of the whole run passed 300 s, and filtered to the step's kernels
        # (--kernel-name) it ends in an internal sanitizer error for every form (2026-12-06): the workshops carry it
        # (moecl, gdnstep)
        k='regex=moe_slots|gdn_split|ring_gemv|attn_decode|combine|tq_gemv|lm_head|argmax|embed'
        for run in "memcheck - all" "synccheck - all" "synccheck none all" "racecheck - $k"; do
            set -- $run; t=$2; [ "$t" = - ] && t=
            f=; [ "$3" = all ] || f="--kernel-name $3"
            LILAC_DECODE_TRY=$t timeout 300 compute-sanitizer --tool $1 $f --error-exitcode 9 $B/lilac bench --synthetic --decode 4096 -n 4 --repeats 1 --no-profile > /tmp/san.log 2>&1
            echo "$1 decode graph (LILAC_DECODE_TRY=${t:-unset}${f:+, $3}) rc=$?"; grep -E "SUMMARY" /tmp/san.log; cat /tmp/san.log >> "$OUT/defsan.log"
        done ;;
    gputests) # every GPU test binary of the bundle, into one log; the summary lines here
        for t in $B/tests/test_gpu_*; do
            n=$(basename "$t")
            timeout 300 "$t" > /tmp/$n.log 2>&1; echo "$n rc=$?: $(tail -1 /tmp/$n.log)"
            grep -E "top-1|bit for bit|NOTE|FAIL" /tmp/$n.log | head -24
            cat /tmp/$n.log >> "$OUT/gputests.log"
        done ;;
    dec) timeout 120 $B/lilac bench --synthetic --decode 4K -n 256 --repeats 1 2>&1 | tee "$OUT/bench_4k.txt" ;;
    gemvab) for k in auto engine; do echo "LILAC_GEMV=$k"; LILAC_GEMV=$k timeout 150 $B/lilac bench --synthetic --decode 4096 -n 256 2>&1 | tee "$OUT/bench_4k_gemv_$k.txt"; done ;;
    esac
done
