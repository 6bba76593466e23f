/* cuda_fused_persist_sm90a.cu -- the persist=1 tactics (version 3.28):
 * cuda_fused_sm90a.cu's kernels built again with a persistent grid, one
 * block per SM taking the blocks' work in turn (that file's SM90_PERSIST
 * says how). Its one entry point, cuda_fused_sm90a_persist_launch, is
 * where cuda_fused_sm90a_launch sends a tactic with persist=1; the
 * listing, workspace and cut stay that file's. A second unit rather than
 * a template parameter, so the other tactics' code stays byte for byte
 * what was measured (bench/sass_diff.sh). */
#define SM90_PERSIST_UNIT 1
#include "cuda_fused_sm90a.cu"
