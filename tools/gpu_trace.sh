export LD_LIBRARY_PATH=$PWD/.gpubundle/lib
B=.gpubundle/lilac
LILAC_TRACE=1 $B --backend cpu score --model tests/fixtures/tiny --ids 1,2,3,4 > /dev/null 2> $OUT/cpu4.txt
LILAC_TRACE=1 $B --backend cuda score --model tests/fixtures/tiny --ids 1,2,3,4 > /dev/null 2> $OUT/gpu4.txt
LILAC_TRACE=1 $B --backend cuda score --model tests/fixtures/tiny --ids 1 > /dev/null 2> $OUT/gpu1.txt
LILAC_TRACE=1 $B --backend cpu score --model tests/fixtures/tiny --ids 1 > /dev/null 2> $OUT/cpu1.txt
paste -d'\n' $OUT/cpu4.txt $OUT/gpu4.txt | head -60
