/*
 * hf_config.c - a HuggingFace config.json's fields against [model]
 * (hf_config.h).
 */
#include "hf_config.h"

static long long integer_or_missing(json_t *v)
{
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1LL;
}

int hf_config_int(json_t *root, const char *path, const char *json, const char *key, int want,
                  char *why, size_t n)
{
    json_t *v = json_object_get(root, json);
    if (json_is_integer(v) && json_integer_value(v) == want)
        return 0;
    return reason_set(why, n, "%s: %s = %lld, [model] %s = %d", path, json,
                      integer_or_missing(v), key, want);
}

int hf_config_context(json_t *root, const char *path, const char *json, int seq_len, char *why,
                      size_t n)
{
    json_t *v = json_object_get(root, json);
    if (json_is_integer(v) && json_integer_value(v) >= seq_len)
        return 0;
    return reason_set(why, n, "%s: %s = %lld, shorter than [model] seq_len = %d", path, json,
                      integer_or_missing(v), seq_len);
}
