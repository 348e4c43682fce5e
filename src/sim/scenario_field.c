/*
 * scenario_field.c: reading one field of a scenario against its schema.
 *
 * Every reader takes the mapping and the key, checks the value's form,
 * unit and range, and on the first problem writes one line naming the
 * file, line, dotted field path and what was expected.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scenario_schema.h"

__attribute__((format(printf, 5, 0))) static int
vfail_at(dlcp_scn *s, const char *file, unsigned line, const char *field,
         const char *fmt, va_list ap) {
  int off =
      snprintf(s->err, s->errlen, "%s:%u: field '%s': ", file, line, field);
  if (off >= 0 && (size_t)off < s->errlen) {
    vsnprintf(s->err + off, s->errlen - (size_t)off, fmt, ap);
  }
  return DLCP_ERR_CONFIG;
}

/* printf-style (see the header) so the compiler checks every message's
 * arguments. */
int dlcp_scn_fail_at(dlcp_scn *s, const char *file, unsigned line,
                     const char *field, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rv = vfail_at(s, file, line, field, fmt, ap);
  va_end(ap);
  return rv;
}

int dlcp_scn_fail(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                  const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rv = vfail_at(s, n->file, n->line, field, fmt, ap);
  va_end(ap);
  return rv;
}

void dlcp_scn_join(char *out, size_t outlen, const char *path,
                   const char *key) {
  if (path[0]) {
    snprintf(out, outlen, "%s.%s", path, key);
  } else {
    snprintf(out, outlen, "%s", key);
  }
}

static int expect_map(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  if (n->kind != DLCP_SCN_MAP) {
    return dlcp_scn_fail(s, n, path, "expected a mapping of fields");
  }
  return 0;
}

/* Checks that |map| has only the keys listed (NULL-terminated). */
int dlcp_scn_check_keys(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                        const char *const *allowed) {
  int rv = expect_map(s, map, path);
  if (rv != 0) {
    return rv;
  }
  for (size_t i = 0; i < map->n; i++) {
    bool ok = false;
    for (const char *const *a = allowed; *a; a++) {
      ok = ok || strcmp(*a, map->keys[i]) == 0;
    }
    if (!ok) {
      char field[256], list[512];
      dlcp_scn_join(field, sizeof(field), path, map->keys[i]);
      size_t off = 0;
      list[0] = '\0';
      for (const char *const *a = allowed; *a && off < sizeof(list); a++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s",
                         a == allowed ? "" : ", ", *a);
        off += w > 0 ? (size_t)w : 0;
      }
      return dlcp_scn_fail(s, map->items[i], field,
                           "unknown field; expected one of: %s", list);
    }
  }
  return 0;
}

int dlcp_scn_scalar(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                    const char **out) {
  if (n->kind != DLCP_SCN_SCALAR) {
    return dlcp_scn_fail(s, n, field, "expected a single value, not a %s",
                         n->kind == DLCP_SCN_MAP ? "mapping" : "sequence");
  }
  *out = n->str;
  return 0;
}

/* The scalar value of |key| in |map|: returns 1 with |n|, its text |t|
 * and its dotted name |field| (256 bytes) set, 0 if the key is absent, or
 * the error if the value is not a scalar. */
static int scalar_field(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                        const char *key, char *field, const dlcp_scn_node **n,
                        const char **t) {
  *n = dlcp_scn_map_get(map, key);
  if (!*n) {
    return 0;
  }
  dlcp_scn_join(field, 256, path, key);
  int rv = dlcp_scn_scalar(s, *n, field, t);
  return rv != 0 ? rv : 1;
}

/* Splits "12.5us" into 12.5 and "us"; the number must be finite, >= 0. */
static bool split_number(const char *text, double *num, const char **unit) {
  char *end;
  errno = 0;
  *num = strtod(text, &end);
  if (end == text || errno != 0 || !isfinite(*num) || *num < 0) {
    return false;
  }
  while (*end == ' ') {
    end++;
  }
  *unit = end;
  return true;
}

int dlcp_scn_get_u64(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                     const char *key, uint64_t *out, uint64_t min,
                     uint64_t max) {
  const dlcp_scn_node *n;
  char field[256];
  const char *t = "";
  int rv = scalar_field(s, map, path, key, field, &n, &t);
  if (rv <= 0) {
    return rv;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(t, &end, 10);
  if (t[0] < '0' || t[0] > '9' || *end != '\0' || errno != 0 || v < min ||
      v > max) {
    return dlcp_scn_fail(s, n, field,
                         "expected an integer in [%llu, %llu], got '%s'",
                         (unsigned long long)min, (unsigned long long)max, t);
  }
  *out = v;
  return 0;
}

int dlcp_scn_get_u32(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                     const char *key, uint32_t *out, uint32_t min,
                     uint32_t max) {
  uint64_t v = *out;
  int rv = dlcp_scn_get_u64(s, map, path, key, &v, min, max);
  *out = (uint32_t)v;
  return rv;
}

int dlcp_scn_get_double(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                        const char *key, double *out, double min, double max) {
  const dlcp_scn_node *n;
  char field[256];
  const char *t = "";
  int rv = scalar_field(s, map, path, key, field, &n, &t);
  if (rv <= 0) {
    return rv;
  }
  double v;
  const char *unit;
  if (!split_number(t, &v, &unit) || *unit != '\0' || v < min || v > max) {
    return dlcp_scn_fail(s, n, field, "expected a number in [%g, %g], got '%s'",
                         min, max, t);
  }
  *out = v;
  return 0;
}

int dlcp_scn_get_bool(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, bool *out) {
  const dlcp_scn_node *n;
  char field[256];
  const char *t = "";
  int rv = scalar_field(s, map, path, key, field, &n, &t);
  if (rv <= 0) {
    return rv;
  }
  if (!strcmp(t, "true") || !strcmp(t, "yes") || !strcmp(t, "on")) {
    *out = true;
  } else if (!strcmp(t, "false") || !strcmp(t, "no") || !strcmp(t, "off")) {
    *out = false;
  } else {
    return dlcp_scn_fail(s, n, field, "expected true or false, got '%s'", t);
  }
  return 0;
}

/* Parses a size: bytes, or with B, KB, MB, GB (powers of 1000), KiB, MiB,
 * GiB (powers of 1024) or pkts (times the packet size mss + header). */
int dlcp_scn_parse_size(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                        uint64_t *out, uint64_t min, uint64_t max) {
  const char *t = "";
  int rv = dlcp_scn_scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  static const struct {
    const char *unit;
    double mult;
  } units[] = {
      {"", 1},     {"B", 1},        {"KB", 1e3},        {"MB", 1e6},
      {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"pkts", 0}};
  double v;
  const char *unit;
  if (split_number(t, &v, &unit)) {
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
      if (strcmp(unit, units[i].unit) == 0) {
        double mult = units[i].mult > 0 ? units[i].mult : (double)s->mtu;
        double bytes = v * mult;
        if (bytes == floor(bytes) && bytes >= (double)min &&
            bytes <= (double)max) {
          *out = (uint64_t)bytes;
          return 0;
        }
        break;
      }
    }
  }
  return dlcp_scn_fail(
      s, n, field,
      "expected a whole number of bytes in [%llu, "
      "%llu], optionally with a unit B, KB, MB, GB, KiB, MiB, GiB "
      "or pkts, got '%s'",
      (unsigned long long)min, (unsigned long long)max, t);
}

int dlcp_scn_get_size(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, uint64_t *out, uint64_t min,
                      uint64_t max) {
  const dlcp_scn_node *n = dlcp_scn_map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  dlcp_scn_join(field, sizeof(field), path, key);
  return dlcp_scn_parse_size(s, n, field, out, min, max);
}

int dlcp_scn_parse_time(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                        dlcp_sim_ps *out) {
  const char *t = "";
  int rv = dlcp_scn_scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  static const struct {
    const char *unit;
    double ps;
  } units[] = {{"ps", 1}, {"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}};
  double v;
  const char *unit;
  if (split_number(t, &v, &unit)) {
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
      if (strcmp(unit, units[i].unit) == 0 && v * units[i].ps < 1e18) {
        *out = (dlcp_sim_ps)llround(v * units[i].ps);
        return 0;
      }
    }
  }
  return dlcp_scn_fail(s, n, field,
                       "expected a duration below 1000000 s with a unit "
                       "ps, ns, us, ms or s (e.g. 24us), got '%s'",
                       t);
}

int dlcp_scn_get_time(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, dlcp_sim_ps *out) {
  const dlcp_scn_node *n = dlcp_scn_map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  dlcp_scn_join(field, sizeof(field), path, key);
  return dlcp_scn_parse_time(s, n, field, out);
}

int dlcp_scn_get_rate(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, uint64_t *out) {
  const dlcp_scn_node *n;
  char field[256];
  const char *t = "";
  int rv = scalar_field(s, map, path, key, field, &n, &t);
  if (rv <= 0) {
    return rv;
  }
  static const struct {
    const char *unit;
    double bps;
  } units[] = {{"bps", 1},    {"Kbps", 1e3},  {"Mbps", 1e6},
               {"Gbps", 1e9}, {"Tbps", 1e12}, {"K", 1e3},
               {"M", 1e6},    {"G", 1e9},     {"T", 1e12}};
  double v;
  const char *unit;
  if (split_number(t, &v, &unit)) {
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
      double bps = v * units[i].bps;
      if (strcmp(unit, units[i].unit) == 0 && bps >= 1e3 && bps <= 1e13) {
        *out = (uint64_t)llround(bps);
        return 0;
      }
    }
  }
  return dlcp_scn_fail(
      s, n, field,
      "expected a rate between 1 Kbps and 10 Tbps with "
      "a unit bps, Kbps, Mbps, Gbps or Tbps (e.g. 100Gbps), got '%s'",
      t);
}

int dlcp_scn_get_name(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, char *out, bool required,
                      const dlcp_scn_node *owner) {
  const dlcp_scn_node *n = dlcp_scn_map_get(map, key);
  char field[256];
  dlcp_scn_join(field, sizeof(field), path, key);
  if (!n) {
    if (required) {
      return dlcp_scn_fail(s, owner, field,
                           "expected this field to be present");
    }
    return 0;
  }
  const char *t = "";
  int rv = dlcp_scn_scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  if (t[0] == '\0' || strlen(t) >= DLCP_SIM_NAME_MAX) {
    return dlcp_scn_fail(s, n, field, "expected a name of 1..%u characters",
                         DLCP_SIM_NAME_MAX - 1);
  }
  snprintf(out, DLCP_SIM_NAME_MAX, "%s", t);
  return 0;
}

/* Matches a scalar against a list of words; returns the index. */
int dlcp_scn_get_enum(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, const char *const *words, int *out) {
  const dlcp_scn_node *n;
  char field[256];
  const char *t = "";
  int rv = scalar_field(s, map, path, key, field, &n, &t);
  if (rv <= 0) {
    return rv;
  }
  char list[256] = "";
  size_t off = 0;
  for (int i = 0; words[i]; i++) {
    if (strcmp(words[i], t) == 0) {
      *out = i;
      return 0;
    }
    int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
                     words[i]);
    off += w > 0 && (size_t)w < sizeof(list) - off ? (size_t)w : 0;
  }
  return dlcp_scn_fail(s, n, field, "expected one of %s, got '%s'", list, t);
}

void dlcp_scn_where(char *out, const dlcp_scn_node *n) {
  snprintf(out, DLCP_SIM_WHERE_MAX, "%s:%u", n->file, n->line);
}

void dlcp_scn_set_field(char *out, const char *path) {
  snprintf(out, DLCP_SIM_WHERE_MAX, "%s", path);
}

/* A mapping or a sequence of mappings (so "incast: {...}" and
 * "incast: [{...}, {...}]" both work). */
int dlcp_scn_for_each_map(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                          int (*fn)(dlcp_scn *, const dlcp_scn_node *,
                                    const char *)) {
  if (n->kind == DLCP_SCN_MAP) {
    return fn(s, n, path);
  }
  if (n->kind != DLCP_SCN_SEQ) {
    return dlcp_scn_fail(s, n, path,
                         "expected a mapping or a list of mappings");
  }
  for (size_t i = 0; i < n->n; i++) {
    char p[256];
    snprintf(p, sizeof(p), "%s[%zu]", path, i);
    int rv = fn(s, n->items[i], p);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

/* Fails on the first of |required| (NULL-terminated) missing from |n|. */
int dlcp_scn_require(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                     const char *const *required) {
  for (const char *const *r = required; *r; r++) {
    if (!dlcp_scn_map_get(n, *r)) {
      char field[256];
      dlcp_scn_join(field, sizeof(field), path, *r);
      return dlcp_scn_fail(s, n, field, "expected this field to be present");
    }
  }
  return 0;
}

const char *const dlcp_scn_lb_words[] = {"ecmp", "spray", "source", NULL};
