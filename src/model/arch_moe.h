/*
 * arch_moe.h - the rules a mixture of experts ([model] n_expert > 0;
 * doc/moe.md) puts on [model]'s keys and tp. An architecture with MoE
 * layers asks them from its check_keys (arch_llama.c); the layout's rules
 * about ep and cp are layout.c's, and config_rules.c refuses MoE keys set
 * on a dense model.
 */
#ifndef TRI_SRC_ARCH_MOE_H
#define TRI_SRC_ARCH_MOE_H

#include "arch.h"

/* 0 when a MoE model's keys hold (or the model is dense): top_k at most
 * n_expert, at least one MoE layer (moe_every <= n_layer), the experts'
 * widths divisible by tp and the shared expert's an int. Else 1 with the
 * key to change in p. Not collective. */
int arch_moe_check_keys(const Config *c, ArchKeyProblem *p);

#endif
