/*
 * hf_config.c - a HuggingFace config.json's fields against [model]
 * (hf_config.h).
 */
#include "hf_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for a value as shown: a number, or a string or object cut short. */
#define SHOWN_MAX 96

/* v as the file writes it, so a message never shows a stand-in: a real
 * in the fewest digits that read back as the same double ("1e+300",
 * "2.0": a point kept, so 2.0 is not mistaken for the integer 2),
 * anything else as JSON ("\"two\"", true), "nothing" when absent. */
static const char *shown(json_t *v, char *out, size_t n)
{
    if (!v) {
        snprintf(out, n, "nothing");
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(out, n, "%.*g", digits, d);
            if (strtod(out, NULL) == d)
                break;
        }
        if (!strpbrk(out, ".en"))  /* not 1e+300, not inf or nan: 2 -> 2.0 */
            snprintf(out + strlen(out), n - strlen(out), ".0");
    } else {
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        snprintf(out, n, "%s", text ? text : "(unprintable)");
        if (text && strlen(text) >= n && n > 4)
            snprintf(out + n - 4, 4, "...");
        free(text);
    }
    return out;
}

int hf_config_int(json_t *root, const char *path, const char *json, const char *key, int want,
                  char *why, size_t n)
{
    json_t *v = json_object_get(root, json);
    if (json_is_integer(v) && json_integer_value(v) == want)
        return 0;
    char value[SHOWN_MAX];
    return reason_set(why, n, "%s: %s = %s%s, [model] %s = %d", path, json,
                      shown(v, value, sizeof value),
                      !v || json_is_integer(v) ? "" : " (not an integer)", key, want);
}

int hf_config_int_or(json_t *root, const char *path, const char *json, int dflt, const char *key,
                     int want, char *why, size_t n)
{
    if (json_object_get(root, json))
        return hf_config_int(root, path, json, key, want, why, n);
    if (dflt == want)
        return 0;
    return reason_set(why, n, "%s: no %s, so transformers' default %d, [model] %s = %d", path,
                      json, dflt, key, want);
}

int hf_config_context(json_t *root, const char *path, const char *json, int seq_len, char *why,
                      size_t n)
{
    json_t *v = json_object_get(root, json);
    if (json_is_integer(v) && json_integer_value(v) >= seq_len)
        return 0;
    char value[SHOWN_MAX];
    if (!json_is_integer(v))
        return reason_set(why, n, "%s: %s = %s, not an integer: the positions the model was "
                          "made for, at least [model] seq_len = %d", path, json,
                          shown(v, value, sizeof value), seq_len);
    return reason_set(why, n, "%s: %s = %s, shorter than [model] seq_len = %d", path, json,
                      shown(v, value, sizeof value), seq_len);
}

int hf_config_real(json_t *root, const char *path, const char *json, double dflt,
                   const char *trident, double want, char *why, size_t n)
{
    json_t *v = json_object_get(root, json);
    if (!v && dflt == want)
        return 0;
    if (json_is_number(v) && json_number_value(v) == want)
        return 0;
    char value[SHOWN_MAX];
    if (!v)
        return reason_set(why, n, "%s: no %s, so transformers' default %g, %s = %g", path, json,
                          dflt, trident, want);
    return reason_set(why, n, "%s: %s = %s, %s = %g", path, json, shown(v, value, sizeof value),
                      trident, want);
}

int hf_config_bool(json_t *root, const char *path, const char *json, int dflt,
                   const char *trident, int want, char *why, size_t n)
{
    json_t *v = json_object_get(root, json);
    if (!v && !dflt == !want)
        return 0;
    if (json_is_boolean(v) && !json_is_true(v) == !want)
        return 0;
    char value[SHOWN_MAX];
    if (!v)
        return reason_set(why, n, "%s: no %s, so transformers' default %s, %s = %s", path, json,
                          dflt ? "true" : "false", trident, want ? "true" : "false");
    return reason_set(why, n, "%s: %s = %s, %s = %s", path, json, shown(v, value, sizeof value),
                      trident, want ? "true" : "false");
}

int hf_config_word(json_t *root, const char *path, const char *json, const char *const *words,
                   const char *trident, char *why, size_t n)
{
    json_t *v = json_object_get(root, json);
    if (!v)
        return 0;
    for (int i = 0; words[i] && json_is_string(v); i++)
        if (!strcmp(json_string_value(v), words[i]))
            return 0;
    char value[SHOWN_MAX];
    return reason_set(why, n, "%s: %s = %s, %s", path, json, shown(v, value, sizeof value),
                      trident);
}

int hf_config_none(json_t *root, const char *path, const char *json, const char *trident,
                   char *why, size_t n)
{
    json_t *v = json_object_get(root, json);
    if (!v || json_is_null(v))
        return 0;
    char value[SHOWN_MAX];
    return reason_set(why, n, "%s: %s = %s, %s", path, json, shown(v, value, sizeof value),
                      trident);
}
