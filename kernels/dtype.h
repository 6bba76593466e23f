/* dtype.h -- f16, bf16 and e4m3 <-> float conversions in software, and typed
 * element access to buffers stored in an attn_dtype.
 *
 * Conversions are exact where they can be: f16 and bf16 -> float is exact
 * for every bit pattern; float -> f16 and float -> bf16 round to nearest,
 * ties to even, independent of the FPU's rounding mode and of any hardware
 * half support. Subnormals are produced and read, values beyond the largest
 * finite half round to +-Inf (as IEEE 754 nearest rounding does), -0 stays
 * -0, and NaN stays NaN: quiet, sign and the leading payload bits kept.
 *
 * e4m3 (FP8, the OCP "fn" form) saturates instead: float -> e4m3 rounds to
 * nearest even and clamps to +-448 (infinities too, as PTX's
 * cvt.rn.satfinite does), NaN becomes S.1111.111; e4m3 -> float is exact.
 * An e4m3 element is the stored value: its tensor's descale factor is the
 * caller's to apply.
 *
 * Buffers are flat arrays of elements of the given dtype (uint16_t for f16
 * and bf16, uint8_t for e4m3, float for f32); indices are element indices,
 * not bytes. */
#ifndef DTYPE_H
#define DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- scalar conversions */

uint16_t dtype_f32_to_f16(float f);  /* round to nearest even */
float dtype_f16_to_f32(uint16_t h);  /* exact */
uint16_t dtype_f32_to_bf16(float f); /* round to nearest even */
float dtype_bf16_to_f32(uint16_t h); /* exact */
uint8_t dtype_f32_to_e4m3(float f);  /* round to nearest even, saturate to 448 */
float dtype_e4m3_to_f32(uint8_t x);  /* exact */

/* Largest finite e4m3 value. */
#define DTYPE_E4M3_MAX 448.0f

/* f rounded to what a buffer of dtype t would store (identity for f32). */
float dtype_round(attn_dtype t, float f);

/* ---- element access */

/* Element i of buf as float (exact: every stored value is a float). */
float dtype_load(const void *buf, attn_dtype t, size_t i);

/* Element i of buf as double (exact). */
double dtype_load_f64(const void *buf, attn_dtype t, size_t i);

/* Store f into element i of buf, rounding to nearest even. */
void dtype_store(void *buf, attn_dtype t, size_t i, float f);

/* Bulk forms: n elements starting at element 0 of src / dst. */
void dtype_load_n(const void *src, attn_dtype t, float *dst, size_t n);
void dtype_store_n(void *dst, attn_dtype t, const float *src, size_t n);

/* Fill n elements of buf with a quiet NaN of dtype t. */
void dtype_fill_nan(void *buf, attn_dtype t, size_t n);

#ifdef __cplusplus
}
#endif

#endif
