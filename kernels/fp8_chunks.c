/* fp8_chunks.c -- the chunk rule of FP8-O cuDNN graphs (fp8_chunks.h). */
#include "fp8_chunks.h"

#include <string.h>

int attn_fp8_chunks(int64_t b, int64_t hq, int64_t hkv, int64_t sqv, int sms, const char *want,
                    int *by_heads)
{
    int64_t n = 1, ask = 0;
    if (want != NULL && (strcmp(want, "1") == 0 || strcmp(want, "2") == 0 ||
                         strcmp(want, "4") == 0 || strcmp(want, "8") == 0))
        ask = want[0] - '0';
    const int64_t tiles = b * hq * ((sqv + 127) / 128);
    for (int64_t c = ask > 0 ? ask : 4; c >= 2; c /= 2) {
        if (b % c != 0 && hkv % c != 0)
            continue;
        if (ask > 0 || (sms > 0 && tiles / c >= 2 * (int64_t)sms)) {
            n = c;
            break;
        }
    }
    if (by_heads != NULL)
        *by_heads = n > 1 && b % n != 0;
    return (int)n;
}
