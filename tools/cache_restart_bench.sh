#!/bin/sh
# cache_restart_bench.sh — save/restore time and size of prefix-cache snapshots
# (serve --cache-dir) on the tiny model, CPU: one long chat, SIGTERM (the slots
# are written), restart, the same chat (its snapshot is loaded).  WORDS sets the
# prompt length (700: about 4K tokens; 1300: about 8K).  LILAC, LILAC_FLAGS,
# MODEL and CTX choose the binary, its global flags, the model and the
# context (the GPU run: bench/kernels/run_session.sh gpucache).  Run from the root.
set -e
D=$(mktemp -d /tmp/snapbench.XXXXXX)
P=18555
TEXT=$(python3 -c "print(' '.join('word%d' % i for i in range(${WORDS:-700})))")
BODY=$(python3 -c "import json,sys; print(json.dumps({'messages':[{'role':'user','content':sys.argv[1]}],'max_tokens':4,'temperature':0}))" "$TEXT")
run() {
  ${LILAC:-./lilac} ${LILAC_FLAGS:---threads 2} serve --model ${MODEL:-tests/fixtures/tiny} --port $P --ctx ${CTX:-8192} --slots 8 --cache-dir $D > $D/log.$1 2>&1 &
  pid=$!
  until grep -q listening $D/log.$1; do sleep 0.1; done
  curl -s localhost:$P/v1/chat/completions -H 'Content-Type: application/json' -d "$BODY" | python3 -c "import json,sys; u=json.load(sys.stdin)['usage']; print('prompt', u['prompt_tokens'], 'cached', u['prompt_tokens_details']['cached_tokens'])"
  kill -TERM $pid; wait $pid
  grep "prefix cache on disk" $D/log.$1 | tail -1
}
run 1
ls -l $D/*.lsnap | awk '{print $5, $9}'
run 2
rm -rf $D
