/* predict_cost.c -- the cost pieces of the prediction model (predict_cost.h). */
#include "predict_cost.h"

#include <math.h>

double predict_visible_pairs(int64_t sq, int64_t skv, int causal)
{
    if (!causal)
        return (double)sq * (double)skv;
    /* row i sees clamp(i + c, 0, skv) keys, c = skv - sq + 1: none before
     * row lo, all from row sq - 1 on (>= lo since skv >= 1) */
    int64_t c = skv - sq + 1;
    int64_t lo = c > 0 ? 0 : 1 - c, full = sq - 1;
    double n = (double)(full - lo);
    double pairs = n * (double)c + ((double)lo + (double)(full - 1)) * n / 2.0;
    pairs += (double)(sq - full) * (double)skv;
    return pairs;
}

double predict_useful_flops(const attn_shape *s)
{
    return 4.0 * (double)s->b * (double)s->hq * predict_visible_pairs(s->sq, s->skv, s->causal) *
           (double)s->d;
}

void predict_work(const attn_shape *s, const attn_cost *c, double *flops, double *bytes)
{
    double grow = c->rows / (double)s->sq * c->keys / (double)s->skv;
    double pairs = predict_visible_pairs(s->sq, s->skv, s->causal && c->causal_skip) * grow;
    *flops = 4.0 * (double)s->b * (double)s->hq * pairs * (double)c->head_dim;
    *bytes = c->bytes;
}

double predict_wave_eff(const attn_shape *s, const attn_cost *c, int sms, double causal_tail)
{
    if (sms <= 0 || !c->quantized || !(c->blocks > 0) || !(c->blocks_sm > 0))
        return 1.0;
    double waves = c->blocks / ((double)sms * c->blocks_sm);
    if (!s->causal)
        return waves / ceil(waves);
    double tm = c->row_tile > 0 ? c->row_tile : (double)s->sq;
    double n = ceil((double)s->sq / tm), d = (double)(s->skv - s->sq);
    double wmin = fmin(fmax((d + tm) / (double)s->skv, 0.0), 1.0);
    double f = fmin(fmax((d + tm * (n + 1) / 2) / (double)s->skv, wmin), 1.0);
    double tail = c->longest_first ? 0.0 : causal_tail;
    double time = ceil(waves) * wmin + waves * (f - wmin) + tail * (1 - wmin);
    return waves * f / time;
}

double predict_overlap(double a, double b, double p)
{
    double m = fmax(a, b);
    if (!(p > 0) || !(m > 0))
        return m;
    double x = fmin(a, b) / m;
    return x > 0 ? m * pow(1.0 + pow(x, p), 1.0 / p) : m;
}

double predict_cost_us(const attn_shape *s, const attn_cost *c, const predict_rates *r)
{
    double fl, by;
    predict_work(s, c, &fl, &by);
    double share = c->byte_share > 0 ? c->byte_share : 1.0;
    double fshare = c->flop_share > 0 ? c->flop_share : 1.0;
    double waves = r->sms > 0 ? c->waves : 0;
    return predict_overlap(fl / r->flops / fshare / predict_wave_eff(s, c, r->sms, r->causal_tail),
                           by / (r->bytes * share), r->overlap_p) +
           waves * r->wave_lat * r->lat_us + r->lat_us * c->launches +
           c->copy_bytes / r->bytes + (r->sms > 0 ? c->copies * r->lat_us : 0);
}
