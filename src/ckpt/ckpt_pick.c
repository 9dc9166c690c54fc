/*
 * ckpt_pick.c - a checkpoint directory where a checkpoint is expected; see
 * ckpt_pick.h.
 */
#include "ckpt_pick.h"

#include <string.h>
#include <sys/stat.h>

#include "ckpt_files.h"

/* The directory `given` stands for, in dir (CONFIG_PATH_MAX bytes): 1 when
 * it is a directory, or a regular file named latest (its directory); 0
 * when it is anything else, which is opened as a checkpoint file. */
static int directory_meant(const char *given, char *dir)
{
    struct stat sb;
    if (strlen(given) >= CONFIG_PATH_MAX || stat(given, &sb) != 0)
        return 0;
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, CONFIG_PATH_MAX, "%s", given);
        return 1;
    }
    const char *slash = strrchr(given, '/');
    const char *base = slash ? slash + 1 : given;
    if (!S_ISREG(sb.st_mode) || strcmp(base, "latest") != 0)
        return 0;
    if (!slash)
        snprintf(dir, CONFIG_PATH_MAX, ".");
    else if (slash == given)
        snprintf(dir, CONFIG_PATH_MAX, "/");
    else
        snprintf(dir, CONFIG_PATH_MAX, "%.*s", (int)(slash - given), given);
    return 1;
}

int ckpt_pick(const char *given, const char *command, char *path, size_t size, FILE *note,
              FILE *err)
{
    CheckpointConfig c = {.resume = "auto"};
    if (!directory_meant(given, c.dir)) {
        snprintf(path, size, "%s", given);
        return 0;
    }
    CkptResume r;
    if (ckpt_files_resolve(&c, &r, err)) {
        ckpt_files_resume_free(&r);
        return 1;
    }
    if (r.n == 0) {
        fprintf(err, "trident %s: %s is a directory that holds no checkpoint (no "
                "step_NNNNNNNN.h5, no latest): name a checkpoint file, or a run's "
                "[checkpoint] dir\n", command, c.dir);
        ckpt_files_resume_free(&r);
        return 1;
    }
    ckpt_files_candidate(&r, 0, path, size);
    if (r.scanned)
        fprintf(note, "trident %s: %s is a checkpoint directory: taking its newest "
                "checkpoint, %s (%s)\n", command, c.dir, path, r.why);
    else
        fprintf(note, "trident %s: %s is a checkpoint directory: taking the checkpoint its "
                "latest names, %s\n", command, c.dir, path);
    ckpt_files_resume_free(&r);
    return 0;
}
