/* test_fp8_chunks.c -- the chunk rule of FP8-O cuDNN graphs
 * (kernels/fp8_chunks.h): counts that divide the batch or the KV heads,
 * two waves of 128-row tiles a chunk by default, the knob's requests. */
#include "kernels/fp8_chunks.h"
#include "test.h"

/* the H200: 132 multiprocessors, two waves a chunk = 264 tiles */
#define SMS 132

static void large_shapes_should_get_four_or_two(void)
{
    int heads = -1;
    /* the 8k anchor: 2 x 16 x 64 = 2048 tiles, 512 a chunk; b = 2 does not
     * take 4, hkv = 16 does */
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, NULL, &heads) == 4 && heads == 1);
    /* a batch that divides is cut first */
    CHECK(attn_fp8_chunks(8, 16, 16, 8192, SMS, NULL, &heads) == 4 && heads == 0);
    /* Llama 4k prefill: 1024 tiles, 256 a chunk at 4 (under 264), 512 at 2 */
    CHECK(attn_fp8_chunks(1, 32, 8, 4096, SMS, NULL, &heads) == 2 && heads == 1);
    /* exactly two waves a chunk is enough: 4 x 132 x 2 = 1056 tiles */
    CHECK(attn_fp8_chunks(4, 33, 33, 1024, SMS, NULL, &heads) == 4 && heads == 0);
    CHECK(attn_fp8_chunks(4, 33, 33, 1023, SMS, NULL, &heads) == 4);
    /* a partial tile counts as one: 1025 rows are 9 tiles a head */
    CHECK(attn_fp8_chunks(1, 60, 4, 1025, SMS, NULL, &heads) == 2 && heads == 1);
}

static void small_or_indivisible_shapes_should_stay_whole(void)
{
    int heads = -1;
    CHECK(attn_fp8_chunks(1, 8, 8, 900, SMS, NULL, &heads) == 1 && heads == 0);
    /* MQA at b = 1: nothing divides */
    heads = -1;
    CHECK(attn_fp8_chunks(1, 64, 1, 65536, SMS, NULL, &heads) == 1 && heads == 0);
    /* an odd batch and odd KV heads */
    CHECK(attn_fp8_chunks(3, 9, 3, 65536, SMS, NULL, &heads) == 1);
    /* the device unknown: no chunks by default */
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, 0, NULL, &heads) == 1);
    /* just under two waves a chunk at 2 (526 tiles, 4 does not divide) */
    CHECK(attn_fp8_chunks(1, 526, 526, 128, SMS, NULL, &heads) == 1);
    CHECK(attn_fp8_chunks(1, 528, 528, 128, SMS, NULL, &heads) == 2);
}

static void the_knob_should_ask_whatever_the_waves(void)
{
    int heads = -1;
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, "8", &heads) == 8 && heads == 1);
    CHECK(attn_fp8_chunks(8, 16, 16, 128, SMS, "8", &heads) == 8 && heads == 0);
    /* 8 divides neither b = 2 nor hkv = 4: the next power of two that does */
    CHECK(attn_fp8_chunks(2, 16, 4, 8192, SMS, "8", &heads) == 4 && heads == 1);
    CHECK(attn_fp8_chunks(2, 8, 1, 64, SMS, "2", &heads) == 2 && heads == 0);
    /* "1": none, even where the default would cut */
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, "1", &heads) == 1 && heads == 0);
    /* nothing divides: none */
    CHECK(attn_fp8_chunks(1, 8, 1, 8192, SMS, "4", &heads) == 1);
    /* other texts are ignored: the default rule */
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, "3", &heads) == 4);
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, "16", &heads) == 4);
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, "", &heads) == 4);
    CHECK(attn_fp8_chunks(1, 8, 8, 900, SMS, "04", &heads) == 1);
    /* by_heads may be NULL */
    CHECK(attn_fp8_chunks(2, 16, 16, 8192, SMS, NULL, NULL) == 4);
}

int main(void)
{
    RUN(large_shapes_should_get_four_or_two);
    RUN(small_or_indivisible_shapes_should_stay_whole);
    RUN(the_knob_should_ask_whatever_the_waves);
    return test_summary();
}
