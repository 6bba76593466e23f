/* consumer.c -- a program of another project using the installed client:
 * asks a daemon that is not there and prints the answer (the default
 * tactic, a fallback), which shows header, library and link all work. */
#include <attune.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    /* argv[1]: a URL where nothing listens */
    attune_client *c = attune_client_new(argc > 1 ? argv[1] : "http://127.0.0.1:9", 200);
    if (c == NULL)
        return 2;
    attune_shape_q q = {.device = "cpu", .b = 1, .hq = 8, .hkv = 1, .sq = 50, .skv = 1018,
                        .d = 256, .dtype = "f16", .causal = 0};
    attune_answer a;
    int rc = attune_lookup(c, &q, 0, &a);
    printf("%d %s %s\n", rc, a.tactic, a.source);
    attune_client_free(c);
    return 0;
}
