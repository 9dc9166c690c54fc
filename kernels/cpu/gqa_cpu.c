/*
 * gqa_cpu.c - grouped-query attention's key/value heads: expanded into
 * the (N, NH, 3, hs) q|k|v layout the attention kernels read, and their
 * gradients reduced back.
 *
 * Query head h reads key/value head h / (NH / NKV), as HuggingFace's
 * repeat_kv lays them out. The reduction sums a group's NH / NKV
 * gradients in head order in fp32 and rounds once.
 */
#include "cpu.h"

void gqa_expand_cpu(void *qkv, const void *q, const void *k, const void *v,
                    ops_dtype dt, int N, int NH, int NKV, int hs)
{
    int group = NH / NKV;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < NH; h++) {
            int64_t o = ((int64_t)n * NH + h) * 3 * hs;
            int64_t qi = ((int64_t)n * NH + h) * hs;
            int64_t ki = ((int64_t)n * NKV + h / group) * hs;
            for (int c = 0; c < hs; c++) {
                store_f32_cpu(qkv, dt, o + c, load_f32_cpu(q, dt, qi + c));
                store_f32_cpu(qkv, dt, o + hs + c, load_f32_cpu(k, dt, ki + c));
                store_f32_cpu(qkv, dt, o + 2 * hs + c, load_f32_cpu(v, dt, ki + c));
            }
        }
}

void gqa_reduce_cpu(void *dq, void *dk, void *dv, const void *dqkv, ops_dtype dt,
                    int N, int NH, int NKV, int hs)
{
    int group = NH / NKV;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < NH; h++) {
            int64_t o = ((int64_t)n * NH + h) * 3 * hs, qi = ((int64_t)n * NH + h) * hs;
            for (int c = 0; c < hs; c++)
                store_f32_cpu(dq, dt, qi + c, load_f32_cpu(dqkv, dt, o + c));
        }
        for (int g = 0; g < NKV; g++) {
            int64_t ki = ((int64_t)n * NKV + g) * hs;
            for (int c = 0; c < hs; c++) {
                float sk = 0.0f, sv = 0.0f;
                for (int j = 0; j < group; j++) {
                    int64_t o = ((int64_t)n * NH + g * group + j) * 3 * hs;
                    sk += load_f32_cpu(dqkv, dt, o + hs + c);
                    sv += load_f32_cpu(dqkv, dt, o + 2 * hs + c);
                }
                store_f32_cpu(dk, dt, ki + c, sk);
                store_f32_cpu(dv, dt, ki + c, sv);
            }
        }
    }
}
