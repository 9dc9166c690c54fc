/*
 * inspect.h - `trident inspect FILE`: a checkpoint's root attributes with
 * the verdict of their range checks and checksum, every dataset with its
 * shape and the verdict of its checksum, whether every dataset the model
 * of the root attributes needs is there, and the config it stores; read on
 * one rank without a model or a config; then one verdict line. A run's
 * checkpoint directory, or its latest, stands for its newest checkpoint
 * (ckpt_pick.h).
 */
#ifndef TRI_SRC_INSPECT_H
#define TRI_SRC_INSPECT_H

#include <stdio.h>

/* Prints the root attributes (with the model's arch, n_kv_head and ffn_dim
 * from the stored config) and every dataset with its shape to out,
 * verifying every checksum, and checks that the file holds every dataset
 * its model needs. Returns non-zero, with the reasons on err, when the
 * file cannot be opened, a root attribute is missing, out of range or
 * does not match their checksum, a dataset the model needs is missing or
 * misshapen, or any dataset is corrupt or unreadable. Ends with the
 * line "verdict: good: step S, ARCH, ...M parameters in N tensors, all M
 * checksums verified" or "verdict: NOT usable: ...". Not collective (one
 * rank). */
int inspect_checkpoint(const char *path, FILE *out, FILE *err);

#endif
