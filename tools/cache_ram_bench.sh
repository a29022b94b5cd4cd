#!/bin/sh
# cache_ram_bench.sh — time to keep a prefix-cache snapshot in host memory
# and to restore it (serve --cache-ram) on the tiny model, CPU: a long chat
# with one slot, another chat (the first one's snapshots go to RAM), the
# first chat again (restored from RAM: all its prompt reused); the log's
# last line gives the times.  WORDS sets the prompt length (700: about 4K
# tokens; 1300: about 8K).  LILAC, LILAC_FLAGS, MODEL and CTX choose the
# binary, its global flags, the model and the context, CACHE_RAM the tier's
# bound (default 1G) (the GPU run:
# bench/kernels/run_session.sh gpucache).  Run from the repository root.
set -e
D=$(mktemp -d /tmp/rambench.XXXXXX)
P=18556
body() {
  python3 -c "import json,sys; print(json.dumps({'messages':[{'role':'user','content':sys.argv[1] + ' ' + ' '.join('word%d' % i for i in range(int(sys.argv[2])))}],'max_tokens':4,'temperature':0}))" "$1" "${WORDS:-700}"
}
A=$(body first)
B=$(body second)
${LILAC:-./lilac} ${LILAC_FLAGS:---threads 2} serve --model ${MODEL:-tests/fixtures/tiny} --port $P --ctx ${CTX:-8192} --slots 1 --cache-ram ${CACHE_RAM:-1G} > $D/log 2>&1 &
pid=$!
until grep -q listening $D/log; do sleep 0.1; done
ask() {
  curl -s localhost:$P/v1/chat/completions -H 'Content-Type: application/json' -d "$1" | python3 -c "import json,sys; u=json.load(sys.stdin)['usage']; print('$2: prompt', u['prompt_tokens'], 'cached', u['prompt_tokens_details']['cached_tokens'])"
}
ask "$A" A
ask "$B" B
ask "$A" "A again"
curl -s localhost:$P/health | python3 -c "import json,sys; t=json.load(sys.stdin)['cache']['tiers']['ram']; print('ram tier:', t)"
kill -TERM $pid; wait $pid
grep "prefix cache in RAM" $D/log | tail -1
rm -rf $D
