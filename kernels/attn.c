/* attn.c -- caller buffers: contiguous views and their checks (the words,
 * shapes, tactics and stacks, are common/shape.c, tactic.c, device_id.c). */
#include "attn.h"

#include <string.h>

/* ---- caller buffers */

void attn_io_contiguous(const attn_shape *s, const void *q, const void *k, const void *v,
                        void *o, attn_io *io)
{
    const int64_t d = s->d;
    memset(io, 0, sizeof *io);
    io->q = (attn_tensor){(void *)q, s->hq * s->sq * d, s->sq * d, d};
    io->o = (attn_tensor){o, s->hq * s->sq * d, s->sq * d, d};
    io->k = (attn_tensor){(void *)k, s->hkv * s->skv * d, s->skv * d, d};
    io->v = (attn_tensor){(void *)v, s->hkv * s->skv * d, s->skv * d, d};
    io->sq = s->sq;
    io->skv = s->skv;
}

/* 0 when view t has data and non-negative strides. */
static int tensor_ok(const attn_tensor *t)
{
    return t->data != NULL && t->sb >= 0 && t->sh >= 0 && t->ss >= 0;
}

int attn_io_check(const attn_shape *s, const attn_io *io, attn_shape *run, char *err,
                  size_t errlen)
{
    if (s == NULL || io == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no shape or no buffers");
    static const char *const names[4] = {"q", "k", "v", "out"};
    const attn_tensor *t[4] = {&io->q, &io->k, &io->v, &io->o};
    for (int i = 0; i < 4; i++)
        if (!tensor_ok(t[i]))
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s: NULL data or a negative stride", names[i]);
    const int64_t sq = io->sq != 0 ? io->sq : s->sq, skv = io->skv != 0 ? io->skv : s->skv;
    if (sq < 1 || sq > s->sq)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "sq=%lld outside 1..%lld (the plan's)", (long long)sq,
                           (long long)s->sq);
    if (skv < 1 || skv > s->skv)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "skv=%lld outside 1..%lld (the plan's)", (long long)skv,
                           (long long)s->skv);
    if (run != NULL) {
        *run = *s;
        run->sq = sq;
        run->skv = skv;
    }
    return 0;
}
