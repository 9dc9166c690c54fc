/*
 * config.h - the run's configuration, as types: every section and key
 * that jobs/configs/tiny.ini documents, and their enums.
 *
 * A run is defined by its config (doc/design.md, invariant 1). Loading,
 * setting, validating and printing one are config_load.h's: this header
 * holds only what everyone reads, so that the files the loader calls
 * (the architectures' key checks among them) may include it without an
 * include circle. Nothing here is a function.
 */
#ifndef TRI_SRC_CONFIG_H
#define TRI_SRC_CONFIG_H

#include <stdio.h>

#define CONFIG_PATH_MAX 1024

typedef enum {
    SCHED_1F1B = 0, SCHED_GPIPE = 1, SCHED_INTERLEAVED = 2, SCHED_ZB1 = 3
} ScheduleKind;
typedef enum { DEVICE_AUTO = 0, DEVICE_CPU = 1, DEVICE_CUDA = 2 } DeviceChoice;
typedef enum { DATA_TEXT = 0, DATA_TOKENS = 1, DATA_INDEXED = 2 } DataFormat;
typedef enum {
    INIT_GPT2 = 0, INIT_NORMAL, INIT_HE_NORMAL, INIT_HE_UNIFORM,
    INIT_XAVIER_NORMAL, INIT_XAVIER_UNIFORM, INIT_ZEROS
} InitScheme;
typedef enum { FAN_IN = 0, FAN_OUT = 1 } FanMode;
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_FULL = 1, RECOMPUTE_EVERY = 2 } RecomputeKind;
typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1, PRECISION_FP16 = 2 } Precision;
/* [train] offload: where the optimizer state lives (offload.h). */
typedef enum { OFFLOAD_NONE = 0, OFFLOAD_OPTIMIZER = 1 } OffloadKind;
typedef enum { ARCH_GPT2 = 0, ARCH_LLAMA = 1 } ModelArch;
/* [model] moe_router: softmax over the experts, top-k, weights
 * renormalised over the k (Mixtral; Qwen-MoE's norm_topk_prob = true), or
 * the top-k softmax probabilities as they are (Qwen2-MoE's default,
 * DeepSeek-V2). */
typedef enum { MOE_ROUTER_SOFTMAX_TOPK_NORM = 0, MOE_ROUTER_SOFTMAX_TOPK = 1 } MoeRouter;
/* [model] tie_embeddings = auto: tied for gpt2, untied for llama. */
#define TIE_AUTO (-1)
/* [log] sample_tokens = auto (its default): config_load makes it
 * SAMPLE_TOKENS_DEFAULT, or 0 where the layout cannot generate. */
#define SAMPLE_AUTO (-1)
#define SAMPLE_TOKENS_DEFAULT 200

typedef struct {
    int n_layer, n_embd, n_head, seq_len, vocab_size;
    int vocab_used;                 /* the tokenizer's ids; vocab_size may pad
                                       beyond them; 0: all of vocab_size */
    InitScheme init;
    double init_std;
    FanMode init_fan;
    int tie_embeddings;      /* TIE_AUTO until config_load resolves it */
    ModelArch arch;
    int n_kv_head;           /* 0: n_head (llama only; arch.h resolves it) */
    int ffn_dim;             /* 0: 4 * n_embd (llama only) */
    double norm_eps;         /* RMSNorm epsilon (llama only) */
    double rope_theta;       /* rotary base (llama only) */
    /* Mixture of experts (llama only; doc/moe.md): 0 experts is the dense
     * model. A layer L is MoE when (L + 1) % moe_every == 0. */
    int n_expert;            /* routed experts of a MoE layer; 0: dense */
    int top_k;               /* experts each token goes to */
    int moe_ffn_dim;         /* an expert's SwiGLU width; 0: ffn_dim */
    int n_shared_expert;     /* experts every token goes through, as one
                                gated SwiGLU of n_shared_expert *
                                moe_ffn_dim (Qwen2-MoE) */
    int moe_every;           /* every how-many-th layer is MoE */
    MoeRouter moe_router;    /* how the router weighs its top-k */
    double moe_aux_loss;     /* load-balancing loss weight */
    double moe_z_loss;       /* router z-loss weight */
    double moe_capacity;     /* capacity factor; 0: dropless */
} ModelConfig;

typedef struct {
    int dp, pp, tp;          /* dp = 0: world / (pp * cp * tp) */
    int cp;                  /* context parallelism: each sequence cut over
                                cp ranks (layout.h) */
    int ep;                  /* expert parallelism: each MoE layer's experts
                                split over ep of the DP ranks (layout.h) */
    ScheduleKind schedule;
    int virtual_stages;      /* chunks of layers per stage: >= 2 with
                                the interleaved schedule, else 1 */
    int zero;                /* 0..3 */
    int node_size;           /* 0: the real node (shared-memory split) */
    DeviceChoice device;     /* auto: a GPU per rank when built with CUDA
                                and GPUs are visible, else the CPU */
    int overlap;             /* start DP reductions during the backward */
    int sequence_parallel;   /* norms and residuals on 1/tp of the tokens
                                (model.c); nothing with tp = 1 */
} ParallelConfig;

typedef struct {
    int micro_batch, grad_accum, steps;
    double lr, min_lr;
    int warmup;
    int decay_steps;                /* the cosine reaches min_lr here; 0: at steps */
    double weight_decay, beta1, beta2, eps;
    double clip_norm, clip_value;   /* 0 disables */
    Precision precision;            /* the compute dtype: model_dtype */
    RecomputeKind recompute;
    int recompute_every;            /* K of every:K */
    OffloadKind offload;            /* optimizer: master and moments in host
                                       memory on a GPU (offload.h) */
    unsigned long long seed;
    int loss_scale_window;          /* clean fp16 steps before doubling */
    int loss_scale_hysteresis;      /* overflows tolerated before halving */
    double loss_scale_min;          /* below this the run stops */
} TrainConfig;

typedef struct {
    char train[CONFIG_PATH_MAX];
    char val[CONFIG_PATH_MAX];      /* empty: hold out the tail of train */
    double val_fraction;            /* share of train held out when val is empty */
    DataFormat format;
    char tokenizer[CONFIG_PATH_MAX]; /* empty: none; else its vocabulary must fit vocab_size */
} DataConfig;

typedef struct {
    char dir[CONFIG_PATH_MAX];      /* empty: no checkpoints */
    int every;                      /* 0: only at the end and on signals */
    int keep;
    char resume[CONFIG_PATH_MAX];   /* "auto", "none" or a path */
    int async;                      /* saves written by a background thread */
    char init_from[CONFIG_PATH_MAX];/* a HuggingFace directory or an llm.c
                                       .bin a fresh run starts from; "": none */
} CheckpointConfig;

typedef struct {
    int every, batches, patience;
    double min_delta;
} EvalConfig;

typedef struct {
    int every;
    char metrics[CONFIG_PATH_MAX];  /* JSON Lines file; empty: none; "auto"
                                       (until config_load resolves it):
                                       metrics.jsonl in [checkpoint] dir */
    int sample_tokens;              /* tokens generated at the end; 0: none;
                                       SAMPLE_AUTO until resolved */
    int profile;                    /* print a per-op time breakdown */
} LogConfig;

typedef struct {
    double timeout;                 /* seconds without progress before the
                                       watchdog ends the job; 0: never */
} FaultConfig;

typedef struct {
    ModelConfig model;
    ParallelConfig parallel;
    TrainConfig train;
    DataConfig data;
    CheckpointConfig checkpoint;
    EvalConfig eval;
    LogConfig log;
    FaultConfig fault;
    char source[CONFIG_PATH_MAX];   /* file name, or "(built-in tiny.ini)" */
} Config;

/* A rule broken on keys: the key the user should change, and why. The
 * rule's owner fills it (an architecture's check_keys, layout.c's rules);
 * config_validate words it as "[section] key = value: why". */
typedef struct {
    const char *section, *key;
    char why[256];
} ConfigKeyProblem;

#endif
