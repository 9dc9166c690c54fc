/*
 * plan_reason.h - why a layout search (`trident plan --mem`, `--hw`)
 * picked context or expert parallelism: the line plan prints under its
 * best layout when that layout has cp > 1 or ep > 1. Not collective,
 * every function.
 */
#ifndef TRI_SRC_PLAN_REASON_H
#define TRI_SRC_PLAN_REASON_H

#include <stdio.h>

#include "config.h"

/* After a search whose best layout is `best`: when it has cp > 1, one line
 * saying why: no layout at cp 1 fits mem_gib (least_cp1_gib: the least
 * memory a rank needs at cp 1; 0 when no cp 1 layout was valid), or else
 * it is `better` ("less work", "faster") than those that do. Nothing for
 * cp 1. */
void plan_print_cp_reason(const Config *best, double least_cp1_gib, double mem_gib,
                          const char *better, FILE *out);

/* The same for expert parallelism: a line when best has ep > 1, with
 * least_ep1_gib the least memory a rank needs at ep 1. */
void plan_print_ep_reason(const Config *best, double least_ep1_gib, double mem_gib,
                          const char *better, FILE *out);

#endif
