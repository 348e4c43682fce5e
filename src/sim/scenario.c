/*
 * scenario.c: reading scenarios.
 *
 * libyaml parses the document into its node graph; we copy that into a
 * small tree of our own (maps, sequences, scalars, each with the file and
 * line it came from) so that --set overrides can replace or add subtrees
 * with their own origin before anything is interpreted.  The tree is then
 * walked against a fixed schema: every map's keys are checked against the
 * fields it may contain, every scalar is parsed with its unit and range,
 * and the first problem stops the load with one line naming the file,
 * line, dotted field path and what was expected.  Nothing the user wrote
 * is ignored silently.
 */
#include "sim/scenario.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "coll/coll.h"

typedef enum ykind { Y_SCALAR, Y_MAP, Y_SEQ } ykind;

typedef struct ynode {
  ykind kind;
  char *str;            /* scalar text */
  char **keys;          /* map keys (n of them) */
  struct ynode **items; /* map values or sequence items */
  size_t n, cap;
  const char *file; /* not owned */
  unsigned line;
} ynode;

#define MAX_DEPTH 32

typedef struct scn {
  dlcp_sim_config *cfg;
  char *err;
  size_t errlen;
  uint32_t mtu; /* mss + header, for sizes given in packets */
  char dir[512]; /* the scenario file's directory, for relative paths */
} scn;

static void ynode_free(ynode *n) {
  if (!n) {
    return;
  }
  free(n->str);
  for (size_t i = 0; i < n->n; i++) {
    if (n->keys) {
      free(n->keys[i]);
    }
    ynode_free(n->items[i]);
  }
  free(n->keys);
  free(n->items);
  free(n);
}

static ynode *ynode_new(ykind kind, const char *file, unsigned line) {
  ynode *n = calloc(1, sizeof(*n));
  if (n) {
    n->kind = kind;
    n->file = file;
    n->line = line;
  }
  return n;
}

static int ynode_push(ynode *parent, char *key, ynode *child) {
  if (parent->n == parent->cap) {
    size_t ncap = parent->cap ? parent->cap * 2 : 8;
    ynode **items = realloc(parent->items, ncap * sizeof(*items));
    if (!items) {
      return DLCP_ERR_NOMEM;
    }
    parent->items = items;
    if (parent->kind == Y_MAP) {
      char **keys = realloc(parent->keys, ncap * sizeof(*keys));
      if (!keys) {
        return DLCP_ERR_NOMEM;
      }
      parent->keys = keys;
    }
    parent->cap = ncap;
  }
  if (parent->kind == Y_MAP) {
    parent->keys[parent->n] = key;
  }
  parent->items[parent->n++] = child;
  return 0;
}

/* printf-style so the compiler checks every message's arguments. */
__attribute__((format(printf, 5, 6))) static int
fail_at(scn *s, const char *file, unsigned line, const char *field,
        const char *fmt, ...) {
  int off = snprintf(s->err, s->errlen, "%s:%u: field '%s': ", file, line,
                     field);
  if (off >= 0 && (size_t)off < s->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err + off, s->errlen - (size_t)off, fmt, ap);
    va_end(ap);
  }
  return DLCP_ERR_CONFIG;
}

__attribute__((format(printf, 4, 5))) static int
fail(scn *s, const ynode *n, const char *field, const char *fmt, ...) {
  int off = snprintf(s->err, s->errlen, "%s:%u: field '%s': ", n->file,
                     n->line, field);
  if (off >= 0 && (size_t)off < s->errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err + off, s->errlen - (size_t)off, fmt, ap);
    va_end(ap);
  }
  return DLCP_ERR_CONFIG;
}

/* Copies libyaml node |id| into our tree. */
static int convert(scn *s, yaml_document_t *doc, int id, const char *file,
                   int depth, ynode **out) {
  yaml_node_t *yn = yaml_document_get_node(doc, id);
  *out = NULL;
  if (!yn) {
    return 0;
  }
  unsigned line = (unsigned)yn->start_mark.line + 1;
  if (depth > MAX_DEPTH) {
    return fail_at(s, file, line, "(document)",
                   "expected at most %d levels of nesting", MAX_DEPTH);
  }
  switch (yn->type) {
  case YAML_SCALAR_NODE: {
    ynode *n = ynode_new(Y_SCALAR, file, line);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    n->str = strndup((const char *)yn->data.scalar.value,
                     yn->data.scalar.length);
    if (!n->str) {
      ynode_free(n);
      return DLCP_ERR_NOMEM;
    }
    *out = n;
    return 0;
  }
  case YAML_SEQUENCE_NODE: {
    ynode *n = ynode_new(Y_SEQ, file, line);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    for (yaml_node_item_t *it = yn->data.sequence.items.start;
         it < yn->data.sequence.items.top; it++) {
      ynode *child;
      int rv = convert(s, doc, *it, file, depth + 1, &child);
      if (rv == 0 && child) {
        rv = ynode_push(n, NULL, child);
        if (rv != 0) {
          ynode_free(child);
        }
      }
      if (rv != 0) {
        ynode_free(n);
        return rv;
      }
    }
    *out = n;
    return 0;
  }
  case YAML_MAPPING_NODE: {
    ynode *n = ynode_new(Y_MAP, file, line);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    for (yaml_node_pair_t *p = yn->data.mapping.pairs.start;
         p < yn->data.mapping.pairs.top; p++) {
      yaml_node_t *kn = yaml_document_get_node(doc, p->key);
      if (!kn || kn->type != YAML_SCALAR_NODE) {
        ynode_free(n);
        return fail_at(s, file, kn ? (unsigned)kn->start_mark.line + 1 : line,
                       "(key)", "expected a plain scalar as a mapping key");
      }
      char *key = strndup((const char *)kn->data.scalar.value,
                          kn->data.scalar.length);
      ynode *child = NULL;
      int rv = key ? convert(s, doc, p->value, file, depth + 1, &child)
                   : DLCP_ERR_NOMEM;
      for (size_t i = 0; rv == 0 && i < n->n; i++) {
        if (strcmp(n->keys[i], key) == 0) {
          rv = fail_at(s, file, (unsigned)kn->start_mark.line + 1, key,
                       "expected each key once in a mapping");
        }
      }
      if (rv == 0 && child) {
        rv = ynode_push(n, key, child);
      }
      if (rv != 0 || !child) {
        free(key);
        ynode_free(child);
      }
      if (rv != 0) {
        ynode_free(n);
        return rv;
      }
    }
    *out = n;
    return 0;
  }
  case YAML_NO_NODE:
    break;
  }
  return 0;
}

/* Parses |text| as one YAML document into *out (NULL if empty). */
static int parse_yaml(scn *s, const char *text, size_t len, const char *file,
                      unsigned line_base, ynode **out) {
  yaml_parser_t parser;
  yaml_document_t doc;
  *out = NULL;
  if (!yaml_parser_initialize(&parser)) {
    return DLCP_ERR_NOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    unsigned line = (unsigned)parser.problem_mark.line + 1 + line_base;
    if (line_base) {
      line = line_base;
    }
    snprintf(s->err, s->errlen, "%s:%u: YAML syntax error: %s%s%s", file, line,
             parser.problem ? parser.problem : "unknown problem",
             parser.context ? " " : "", parser.context ? parser.context : "");
    yaml_parser_delete(&parser);
    return DLCP_ERR_CONFIG;
  }
  int rv = 0;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (root) {
    rv = convert(s, &doc, 1, file, 0, out);
    if (rv == 0 && *out && line_base) {
      /* Overrides report their position, not a line inside the value. */
      ynode *stack[64];
      size_t top = 0;
      stack[top++] = *out;
      while (top) {
        ynode *n = stack[--top];
        n->line = line_base;
        for (size_t i = 0; i < n->n && top < 64; i++) {
          stack[top++] = n->items[i];
        }
      }
    }
  }
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  return rv;
}

static ynode *map_get(const ynode *map, const char *key) {
  if (!map || map->kind != Y_MAP) {
    return NULL;
  }
  for (size_t i = 0; i < map->n; i++) {
    if (strcmp(map->keys[i], key) == 0) {
      return map->items[i];
    }
  }
  return NULL;
}

/* Applies "a.b.c=value" to the tree rooted at *root. */
static int apply_set(scn *s, ynode **root, const char *set, unsigned index) {
  static const char file[] = "--set";
  const char *eq = strchr(set, '=');
  if (!eq || eq == set) {
    return fail_at(s, file, index, set, "expected KEY=VALUE");
  }
  char *path = strndup(set, (size_t)(eq - set));
  if (!path) {
    return DLCP_ERR_NOMEM;
  }
  ynode *value = NULL;
  const char *vtext = eq + 1;
  int rv = parse_yaml(s, vtext, strlen(vtext), file, index, &value);
  if (rv == 0 && !value) {
    value = ynode_new(Y_SCALAR, file, index);
    if (value) {
      value->str = strdup("");
    }
    if (!value || !value->str) {
      rv = DLCP_ERR_NOMEM;
    }
  }
  if (rv != 0) {
    ynode_free(value);
    free(path);
    return rv;
  }
  if (!*root) {
    *root = ynode_new(Y_MAP, file, index);
    if (!*root) {
      ynode_free(value);
      free(path);
      return DLCP_ERR_NOMEM;
    }
  }
  ynode *cur = *root;
  char *save = NULL;
  char *tok = strtok_r(path, ".", &save);
  while (tok) {
    char *next = strtok_r(NULL, ".", &save);
    ynode **slot = NULL;
    if (cur->kind == Y_MAP) {
      for (size_t i = 0; i < cur->n; i++) {
        if (strcmp(cur->keys[i], tok) == 0) {
          slot = &cur->items[i];
        }
      }
      if (!slot) {
        char *key = strdup(tok);
        ynode *child = next ? ynode_new(Y_MAP, file, index) : value;
        if (!key || !child || ynode_push(cur, key, child) != 0) {
          free(key);
          if (child != value) {
            ynode_free(child);
          }
          ynode_free(value);
          free(path);
          return DLCP_ERR_NOMEM;
        }
        if (!next) {
          free(path);
          return 0;
        }
        cur = child;
        tok = next;
        continue;
      }
    } else if (cur->kind == Y_SEQ) {
      char *end;
      unsigned long i = strtoul(tok, &end, 10);
      if (*end != '\0' || i >= cur->n) {
        rv = fail_at(s, file, index, set,
                     "expected an index below %zu at '%s'", cur->n, tok);
        break;
      }
      slot = &cur->items[i];
    } else {
      rv = fail_at(s, file, index, set,
                   "expected a mapping or sequence at '%s'", tok);
      break;
    }
    if (!next) {
      ynode_free(*slot);
      *slot = value;
      free(path);
      return 0;
    }
    cur = *slot;
    tok = next;
  }
  if (rv == 0) {
    rv = fail_at(s, file, index, set, "expected a non-empty key");
  }
  ynode_free(value);
  free(path);
  return rv;
}

/* ---- schema helpers ---------------------------------------------------- */

static void join(char *out, size_t outlen, const char *path, const char *key) {
  if (path[0]) {
    snprintf(out, outlen, "%s.%s", path, key);
  } else {
    snprintf(out, outlen, "%s", key);
  }
}

static int expect_map(scn *s, const ynode *n, const char *path) {
  if (n->kind != Y_MAP) {
    return fail(s, n, path, "expected a mapping of fields");
  }
  return 0;
}

/* Checks that |map| has only the keys listed (NULL-terminated). */
static int check_keys(scn *s, const ynode *map, const char *path,
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
      join(field, sizeof(field), path, map->keys[i]);
      size_t off = 0;
      list[0] = '\0';
      for (const char *const *a = allowed; *a && off < sizeof(list); a++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s",
                         a == allowed ? "" : ", ", *a);
        off += w > 0 ? (size_t)w : 0;
      }
      return fail(s, map->items[i], field,
                  "unknown field; expected one of: %s", list);
    }
  }
  return 0;
}

static int scalar(scn *s, const ynode *n, const char *field,
                  const char **out) {
  if (n->kind != Y_SCALAR) {
    return fail(s, n, field, "expected a single value, not a %s",
                n->kind == Y_MAP ? "mapping" : "sequence");
  }
  *out = n->str;
  return 0;
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

static int get_u64(scn *s, const ynode *map, const char *path,
                   const char *key, uint64_t *out, uint64_t min,
                   uint64_t max) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(t, &end, 10);
  if (t[0] < '0' || t[0] > '9' || *end != '\0' || errno != 0 || v < min ||
      v > max) {
    return fail(s, n, field, "expected an integer in [%llu, %llu], got '%s'",
                (unsigned long long)min, (unsigned long long)max, t);
  }
  *out = v;
  return 0;
}

static int get_u32(scn *s, const ynode *map, const char *path,
                   const char *key, uint32_t *out, uint32_t min,
                   uint32_t max) {
  uint64_t v = *out;
  int rv = get_u64(s, map, path, key, &v, min, max);
  *out = (uint32_t)v;
  return rv;
}

static int get_double(scn *s, const ynode *map, const char *path,
                      const char *key, double *out, double min, double max) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  double v;
  const char *unit;
  if (!split_number(t, &v, &unit) || *unit != '\0' || v < min || v > max) {
    return fail(s, n, field, "expected a number in [%g, %g], got '%s'", min,
                max, t);
  }
  *out = v;
  return 0;
}

static int get_bool(scn *s, const ynode *map, const char *path,
                    const char *key, bool *out) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  if (!strcmp(t, "true") || !strcmp(t, "yes") || !strcmp(t, "on")) {
    *out = true;
  } else if (!strcmp(t, "false") || !strcmp(t, "no") || !strcmp(t, "off")) {
    *out = false;
  } else {
    return fail(s, n, field, "expected true or false, got '%s'", t);
  }
  return 0;
}

/* Parses a size: bytes, or with B, KB, MB, GB (powers of 1000), KiB, MiB,
 * GiB (powers of 1024) or pkts (times the packet size mss + header). */
static int parse_size(scn *s, const ynode *n, const char *field,
                      uint64_t *out, uint64_t min, uint64_t max) {
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  static const struct {
    const char *unit;
    double mult;
  } units[] = {{"", 1},      {"B", 1},           {"KB", 1e3},
               {"MB", 1e6},  {"GB", 1e9},        {"KiB", 1024.0},
               {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"pkts", 0}};
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
  return fail(s, n, field, "expected a whole number of bytes in [%llu, "
              "%llu], optionally with a unit B, KB, MB, GB, KiB, MiB, GiB "
              "or pkts, got '%s'", (unsigned long long)min,
              (unsigned long long)max, t);
}

static int get_size(scn *s, const ynode *map, const char *path,
                    const char *key, uint64_t *out, uint64_t min,
                    uint64_t max) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  return parse_size(s, n, field, out, min, max);
}

static int parse_time(scn *s, const ynode *n, const char *field,
                      dlcp_sim_ps *out) {
  const char *t = "";
  int rv = scalar(s, n, field, &t);
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
  return fail(s, n, field, "expected a duration below 1000000 s with a unit "
              "ps, ns, us, ms or s (e.g. 24us), got '%s'", t);
}

static int get_time(scn *s, const ynode *map, const char *path,
                    const char *key, dlcp_sim_ps *out) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  return parse_time(s, n, field, out);
}

static int get_rate(scn *s, const ynode *map, const char *path,
                    const char *key, uint64_t *out) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  static const struct {
    const char *unit;
    double bps;
  } units[] = {{"bps", 1},    {"Kbps", 1e3}, {"Mbps", 1e6}, {"Gbps", 1e9},
               {"Tbps", 1e12}, {"K", 1e3},   {"M", 1e6},    {"G", 1e9},
               {"T", 1e12}};
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
  return fail(s, n, field, "expected a rate between 1 Kbps and 10 Tbps with "
              "a unit bps, Kbps, Mbps, Gbps or Tbps (e.g. 100Gbps), got '%s'",
              t);
}

static int get_name(scn *s, const ynode *map, const char *path,
                    const char *key, char *out, bool required,
                    const ynode *owner) {
  const ynode *n = map_get(map, key);
  char field[256];
  join(field, sizeof(field), path, key);
  if (!n) {
    if (required) {
      return fail(s, owner, field, "expected this field to be present");
    }
    return 0;
  }
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  if (t[0] == '\0' || strlen(t) >= DLCP_SIM_NAME_MAX) {
    return fail(s, n, field, "expected a name of 1..%u characters",
                DLCP_SIM_NAME_MAX - 1);
  }
  snprintf(out, DLCP_SIM_NAME_MAX, "%s", t);
  return 0;
}

/* Matches a scalar against a list of words; returns the index. */
static int get_enum(scn *s, const ynode *map, const char *path,
                    const char *key, const char *const *words, int *out) {
  const ynode *n = map_get(map, key);
  if (!n) {
    return 0;
  }
  char field[256];
  join(field, sizeof(field), path, key);
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
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
  return fail(s, n, field, "expected one of %s, got '%s'", list, t);
}

static void where(char *out, const ynode *n) {
  snprintf(out, DLCP_SIM_WHERE_MAX, "%s:%u", n->file, n->line);
}

static void set_field(char *out, const char *path) {
  snprintf(out, DLCP_SIM_WHERE_MAX, "%s", path);
}

/* A mapping or a sequence of mappings (so "incast: {...}" and
 * "incast: [{...}, {...}]" both work). */
static int for_each_map(scn *s, const ynode *n, const char *path,
                        int (*fn)(scn *, const ynode *, const char *)) {
  if (n->kind == Y_MAP) {
    return fn(s, n, path);
  }
  if (n->kind != Y_SEQ) {
    return fail(s, n, path, "expected a mapping or a list of mappings");
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

static const char *const lb_words[] = {"ecmp", "spray", "source", NULL};

/* ---- sections ---------------------------------------------------------- */

static int topo_node(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"name", "kind", "group", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_topo_config *t = &s->cfg->topo;
  dlcp_sim_topo_node *nodes =
      realloc(t->nodes, (t->nnodes + 1) * sizeof(*nodes));
  if (!nodes) {
    return DLCP_ERR_NOMEM;
  }
  t->nodes = nodes;
  dlcp_sim_topo_node *node = &nodes[t->nnodes];
  memset(node, 0, sizeof(*node));
  node->group = t->nnodes;
  where(node->where, n);
  set_field(node->field, path);
  t->nnodes++;
  static const char *const kinds[] = {"host", "switch", NULL};
  int kind = -1;
  rv = get_name(s, n, path, "name", node->name, true, n);
  if (rv == 0) {
    rv = get_enum(s, n, path, "kind", kinds, &kind);
  }
  if (rv == 0 && kind < 0) {
    char field[256];
    join(field, sizeof(field), path, "kind");
    rv = fail(s, n, field, "expected host or switch");
  }
  node->is_host = kind == 0;
  if (rv == 0) {
    rv = get_u32(s, n, path, "group", &node->group, 0, UINT32_MAX - 1);
  }
  return rv;
}

static int topo_link(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"a", "b", "rate", "delay", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_topo_config *t = &s->cfg->topo;
  dlcp_sim_topo_link *links =
      realloc(t->links, (t->nlinks + 1) * sizeof(*links));
  if (!links) {
    return DLCP_ERR_NOMEM;
  }
  t->links = links;
  dlcp_sim_topo_link *l = &links[t->nlinks++];
  memset(l, 0, sizeof(*l));
  l->rate_bps = t->host_rate_bps;
  l->delay_ps = t->link_delay_ps;
  where(l->where, n);
  set_field(l->field, path);
  rv = get_name(s, n, path, "a", l->a, true, n);
  if (rv == 0) {
    rv = get_name(s, n, path, "b", l->b, true, n);
  }
  if (rv == 0) {
    rv = get_rate(s, n, path, "rate", &l->rate_bps);
  }
  if (rv == 0) {
    rv = get_time(s, n, path, "delay", &l->delay_ps);
  }
  return rv;
}

static int section_topology(scn *s, const ynode *n) {
  static const char *const keys[] = {
      "kind",        "hosts_per_tor", "tors",       "spines", "k",
      "host_rate",   "fabric_rate",   "link_rate",  "link_delay",
      "base_rtt",    "nodes",         "links",      NULL};
  const char *p = "topology";
  int rv = check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_topo_config *t = &s->cfg->topo;
  static const char *const kinds[] = {"leaf_spine", "fat_tree", "explicit",
                                      NULL};
  int kind = (int)t->kind;
  if ((rv = get_enum(s, n, p, "kind", kinds, &kind)) != 0) {
    return rv;
  }
  t->kind = (dlcp_sim_topo_kind)kind;
  uint64_t link_rate = 0;
  if ((rv = get_u32(s, n, p, "hosts_per_tor", &t->hosts_per_tor, 1, 4096)) ||
      (rv = get_u32(s, n, p, "tors", &t->tors, 1, 4096)) ||
      (rv = get_u32(s, n, p, "spines", &t->spines, 1, 1024)) ||
      (rv = get_u32(s, n, p, "k", &t->k, 2, 64)) ||
      (rv = get_rate(s, n, p, "link_rate", &link_rate))) {
    return rv;
  }
  if (link_rate) {
    t->host_rate_bps = t->fabric_rate_bps = link_rate;
  }
  if ((rv = get_rate(s, n, p, "host_rate", &t->host_rate_bps)) ||
      (rv = get_rate(s, n, p, "fabric_rate", &t->fabric_rate_bps)) ||
      (rv = get_time(s, n, p, "link_delay", &t->link_delay_ps)) ||
      (rv = get_time(s, n, p, "base_rtt", &t->base_rtt_ps))) {
    return rv;
  }
  if (t->kind == DLCP_SIM_TOPO_FAT_TREE && t->k % 2 != 0) {
    const ynode *kn = map_get(n, "k");
    return fail(s, kn ? kn : n, "topology.k", "expected an even k in [2, 64]");
  }
  if (t->kind == DLCP_SIM_TOPO_LEAF_SPINE && t->hosts_per_tor * t->tors >
                                                 65536) {
    return fail(s, n, "topology.tors", "expected at most 65536 hosts");
  }
  const ynode *nodes = map_get(n, "nodes");
  const ynode *links = map_get(n, "links");
  if (t->kind == DLCP_SIM_TOPO_EXPLICIT) {
    if (!nodes || nodes->kind != Y_SEQ || !links || links->kind != Y_SEQ) {
      return fail(s, nodes ? nodes : n, "topology.nodes",
                  "expected lists 'nodes' and 'links' for an explicit "
                  "topology");
    }
    if ((rv = for_each_map(s, nodes, "topology.nodes", topo_node)) ||
        (rv = for_each_map(s, links, "topology.links", topo_link))) {
      return rv;
    }
  } else if (nodes || links) {
    return fail(s, nodes ? nodes : links, nodes ? "topology.nodes"
                                                : "topology.links",
                "expected kind: explicit for a node/link list");
  }
  return 0;
}

/* transport.pias.thresholds: an increasing list of 1..7 sizes. */
static int pias_thresholds(scn *s, const ynode *n) {
  static const char field[] = "transport.pias.thresholds";
  dlcp_sim_pias_config *c = &s->cfg->transport.pias;
  if (n->kind != Y_SEQ || n->n < 1 || n->n > DLCP_SIM_MAX_QUEUES - 1) {
    return fail(s, n, field, "expected a list of 1 to %u sizes",
                DLCP_SIM_MAX_QUEUES - 1);
  }
  for (size_t i = 0; i < n->n; i++) {
    int rv = parse_size(s, n->items[i], "transport.pias.thresholds[]",
                        &c->thresholds_bytes[i], 1, 1ull << 50);
    if (rv != 0) {
      return rv;
    }
    if (i > 0 && c->thresholds_bytes[i] <= c->thresholds_bytes[i - 1]) {
      return fail(s, n->items[i], "transport.pias.thresholds[]",
                  "expected increasing thresholds");
    }
  }
  c->nthresholds = (uint32_t)n->n;
  return 0;
}

/* transport.pias / pfabric / ndp: the baselines' own parameters. */
static int section_baselines(scn *s, const ynode *n) {
  static const char *const pias_keys[] = {"thresholds", NULL};
  static const char *const pfabric_keys[] = {"init_cwnd", "rto",
                                             "probe_after", NULL};
  static const char *const ndp_keys[] = {"init_window", "rto", NULL};
  dlcp_sim_transport_config *t = &s->cfg->transport;
  const ynode *v;
  int rv = 0;
  if ((v = map_get(n, "pias"))) {
    const ynode *th = map_get(v, "thresholds");
    if ((rv = check_keys(s, v, "transport.pias", pias_keys)) ||
        (th && (rv = pias_thresholds(s, th)))) {
      return rv;
    }
  }
  if ((v = map_get(n, "pfabric"))) {
    const char *p = "transport.pfabric";
    dlcp_sim_pfabric_config *c = &t->pfabric;
    if ((rv = check_keys(s, v, p, pfabric_keys)) ||
        (rv = get_u32(s, v, p, "init_cwnd", &c->init_cwnd_pkts, 0,
                      1000000)) ||
        (rv = get_time(s, v, p, "rto", &c->rto_ps)) ||
        (rv = get_u32(s, v, p, "probe_after", &c->probe_after, 1, 1000))) {
      return rv;
    }
  }
  if ((v = map_get(n, "ndp"))) {
    const char *p = "transport.ndp";
    dlcp_sim_ndp_config *c = &t->ndp;
    if ((rv = check_keys(s, v, p, ndp_keys)) ||
        (rv = get_u32(s, v, p, "init_window", &c->init_window_pkts, 0,
                      1000000)) ||
        (rv = get_time(s, v, p, "rto", &c->rto_ps))) {
      return rv;
    }
  }
  return 0;
}

static int section_transport(scn *s, const ynode *n) {
  static const char *const keys[] = {
      "kind",         "mss",         "header",           "ack_size",
      "load_balancing", "rto_min",   "rto_init",         "rto_max",
      "init_cwnd",    "dupack_threshold", "delayed_ack", "delayed_ack_timeout",
      "g",            "alpha_init",  "loss_bound",       "paths",
      "importance",   "layers",      "segment_size",     "t_low",
      "t_high",       "ack_every",   "burst",            "probe_timeout",
      "min_drain",    "pias",        "pfabric",          "ndp",
      NULL};
  const char *p = "transport";
  int rv = check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_transport_config *t = &s->cfg->transport;
  dlcp_sim_dctcp_config *d = &t->dctcp;
  static const char *const kinds[] = {"dctcp", "mlt",     "tcp",
                                      "pias",  "pfabric", "ndp", NULL};
  static const char *const importance[] = {"all", "none", "magnitude", NULL};
  dlcp_sim_mlt_config *m = &t->mlt;
  int kind = (int)t->kind, lb = (int)t->lb, imp = (int)m->importance;
  if ((rv = get_enum(s, n, p, "kind", kinds, &kind)) ||
      (rv = get_u32(s, n, p, "mss", &t->mss_bytes, 64, 9000)) ||
      (rv = get_u32(s, n, p, "header", &t->header_bytes, 0, 512)) ||
      (rv = get_u32(s, n, p, "ack_size", &t->ack_bytes, 20, 1500)) ||
      (rv = get_enum(s, n, p, "load_balancing", lb_words, &lb)) ||
      (rv = get_time(s, n, p, "rto_min", &d->rto_min_ps)) ||
      (rv = get_time(s, n, p, "rto_init", &d->rto_init_ps)) ||
      (rv = get_time(s, n, p, "rto_max", &d->rto_max_ps)) ||
      (rv = get_u32(s, n, p, "init_cwnd", &d->init_cwnd_pkts, 1, 1000000)) ||
      (rv = get_u32(s, n, p, "dupack_threshold", &d->dupack_threshold, 1,
                    1000)) ||
      (rv = get_bool(s, n, p, "delayed_ack", &d->delayed_ack)) ||
      (rv = get_time(s, n, p, "delayed_ack_timeout", &d->delayed_ack_ps)) ||
      (rv = get_double(s, n, p, "g", &d->g, 0.0, 1.0)) ||
      (rv = get_double(s, n, p, "alpha_init", &d->alpha_init, 0.0, 1.0)) ||
      (rv = get_double(s, n, p, "loss_bound", &m->loss_bound, 0.0,
                       0.999999)) ||
      (rv = get_u32(s, n, p, "paths", &m->npaths, 1, 256)) ||
      (rv = get_enum(s, n, p, "importance", importance, &imp)) ||
      (rv = get_u32(s, n, p, "layers", &m->layers, 0, 65535)) ||
      (rv = get_u32(s, n, p, "segment_size", &m->segment_bytes, 0, 9000)) ||
      (rv = get_time(s, n, p, "t_low", &m->t_low_ps)) ||
      (rv = get_time(s, n, p, "t_high", &m->t_high_ps)) ||
      (rv = get_u32(s, n, p, "ack_every", &m->ack_every, 1, 1000000)) ||
      (rv = get_u32(s, n, p, "burst", &m->burst_pkts, 1, 1000000)) ||
      (rv = get_time(s, n, p, "probe_timeout", &m->probe_timeout_ps)) ||
      (rv = get_time(s, n, p, "min_drain", &m->min_drain_ps))) {
    return rv;
  }
  m->importance = (dlcp_sim_mlt_importance)imp;
  if (m->segment_bytes != 0 && m->segment_bytes < 64) {
    return fail(s, map_get(n, "segment_size"), "transport.segment_size",
                "expected 0 (derived from the MTU) or 64..9000 bytes");
  }
  if (m->t_high_ps / 1000 <= m->t_low_ps / 1000) {
    return fail(s, n, "transport.t_high",
                "expected t_high > t_low (at nanosecond resolution)");
  }
  if (m->probe_timeout_ps < DLCP_SIM_PS_PER_NS) {
    return fail(s, n, "transport.probe_timeout", "expected at least 1ns");
  }
  t->kind = (dlcp_sim_transport_kind)kind;
  t->lb = (dlcp_sim_lb)lb;
  if (d->rto_min_ps == 0 || d->rto_init_ps == 0 ||
      d->rto_max_ps < d->rto_min_ps) {
    return fail(s, n, "transport.rto_max",
                "expected 0 < rto_min <= rto_max and rto_init > 0");
  }
  s->mtu = t->mss_bytes + t->header_bytes;
  return section_baselines(s, n);
}

/* Fails on the first of |required| (NULL-terminated) missing from |n|. */
static int require(scn *s, const ynode *n, const char *path,
                   const char *const *required) {
  for (const char *const *r = required; *r; r++) {
    if (!map_get(n, *r)) {
      char field[256];
      join(field, sizeof(field), path, *r);
      return fail(s, n, field, "expected this field to be present");
    }
  }
  return 0;
}

/* switch.red: {min, max, max_p}, min < max. */
static int switch_red(scn *s, const ynode *n) {
  static const char *const keys[] = {"min", "max", "max_p", NULL};
  static const char *const required[] = {"min", "max", "max_p", NULL};
  const char *p = "switch.red";
  dlcp_sim_switch_config *w = &s->cfg->sw;
  int rv = check_keys(s, n, p, keys);
  if (rv || (rv = require(s, n, p, required)) ||
      (rv = get_size(s, n, p, "min", &w->red_min_bytes, 0, 1ull << 40)) ||
      (rv = get_size(s, n, p, "max", &w->red_max_bytes, 1, 1ull << 40)) ||
      (rv = get_double(s, n, p, "max_p", &w->red_max_p, 0.0, 1.0))) {
    return rv;
  }
  if (w->red_min_bytes >= w->red_max_bytes) {
    return fail(s, map_get(n, "max"), "switch.red.max",
                "expected max > min");
  }
  return 0;
}

/* switch.pfc: {priorities: all | [queue...], xoff, xon, headroom}. */
static int switch_pfc(scn *s, const ynode *n) {
  static const char *const keys[] = {"priorities", "xoff", "xon", "headroom",
                                     NULL};
  static const char *const required[] = {"priorities", "xoff", "headroom",
                                         NULL};
  const char *p = "switch.pfc";
  dlcp_sim_pfc_config *c = &s->cfg->sw.pfc;
  int rv = check_keys(s, n, p, keys);
  if (rv || (rv = require(s, n, p, required)) ||
      (rv = get_size(s, n, p, "xoff", &c->xoff_bytes, 1, 1ull << 40)) ||
      (rv = get_size(s, n, p, "headroom", &c->headroom_bytes, 0,
                     1ull << 40))) {
    return rv;
  }
  c->xon_bytes = c->xoff_bytes > 2 * s->mtu ? c->xoff_bytes - 2 * s->mtu : 0;
  if ((rv = get_size(s, n, p, "xon", &c->xon_bytes, 0, c->xoff_bytes))) {
    return rv;
  }
  const ynode *pr = map_get(n, "priorities");
  c->prio_mask = 0;
  if (pr->kind == Y_SCALAR && strcmp(pr->str, "all") == 0) {
    c->prio_mask = 0xFF;
    return 0;
  }
  if (pr->kind != Y_SEQ || pr->n == 0) {
    return fail(s, pr, "switch.pfc.priorities",
                "expected all, or a list of queue indices 0..7");
  }
  for (size_t i = 0; i < pr->n; i++) {
    uint64_t q = 0;
    const char *t = "";
    char *end;
    if ((rv = scalar(s, pr->items[i], "switch.pfc.priorities[]", &t))) {
      return rv;
    }
    q = strtoull(t, &end, 10);
    if (t[0] < '0' || t[0] > '9' || *end || q >= DLCP_SIM_MAX_QUEUES) {
      return fail(s, pr->items[i], "switch.pfc.priorities[]",
                  "expected a queue index in [0, 7], got '%s'", t);
    }
    c->prio_mask |= (uint8_t)(1u << q);
  }
  return 0;
}

static int section_switch(scn *s, const ynode *n) {
  static const char *const keys[] = {"queues",   "port_buffer", "shared_buffer",
                                     "dt_alpha", "ecn_threshold", "trimming",
                                     "trim_size", "scheduling", "red",
                                     "pfc",       NULL};
  static const char *const scheduling[] = {"strict", "pfabric", NULL};
  const char *p = "switch";
  int rv = check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_switch_config *w = &s->cfg->sw;
  uint64_t trim = w->trim_bytes;
  int sched = w->pfabric ? 1 : 0;
  if ((rv = get_u32(s, n, p, "queues", &w->nqueues, 1, DLCP_SIM_MAX_QUEUES)) ||
      (rv = get_size(s, n, p, "port_buffer", &w->port_buffer_bytes, 1500,
                     1ull << 40)) ||
      (rv = get_size(s, n, p, "shared_buffer", &w->shared_buffer_bytes, 0,
                     1ull << 40)) ||
      (rv = get_double(s, n, p, "dt_alpha", &w->dt_alpha, 1.0 / 64, 64)) ||
      (rv = get_bool(s, n, p, "trimming", &w->trimming)) ||
      (rv = get_size(s, n, p, "trim_size", &trim, 20, 1500)) ||
      (rv = get_enum(s, n, p, "scheduling", scheduling, &sched))) {
    return rv;
  }
  w->trim_bytes = (uint32_t)trim;
  w->pfabric = sched == 1;
  const ynode *sub;
  if ((sub = map_get(n, "red")) && (rv = switch_red(s, sub))) {
    return rv;
  }
  if ((sub = map_get(n, "pfc")) && (rv = switch_pfc(s, sub))) {
    return rv;
  }
  const ynode *e = map_get(n, "ecn_threshold");
  if (e) {
    /* One value for every queue, or a list with one value per queue;
     * "off" disables marking (and so selective dropping). */
    size_t count = e->kind == Y_SEQ ? e->n : 1;
    if (e->kind == Y_MAP || (e->kind == Y_SEQ && e->n != w->nqueues)) {
      return fail(s, e, "switch.ecn_threshold",
                  "expected one size, or a list of %u sizes (one per queue)",
                  w->nqueues);
    }
    for (size_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
      const ynode *v = e->kind == Y_SEQ ? e->items[i < count ? i : count - 1]
                                        : e;
      char field[64];
      snprintf(field, sizeof(field), "switch.ecn_threshold%s",
               e->kind == Y_SEQ ? "[]" : "");
      if (v->kind == Y_SCALAR && strcmp(v->str, "off") == 0) {
        w->ecn_threshold_bytes[i] = UINT64_MAX;
        continue;
      }
      if ((rv = parse_size(s, v, field, &w->ecn_threshold_bytes[i], 0,
                           1ull << 40)) != 0) {
        return rv;
      }
    }
  }
  return 0;
}

static int section_host(scn *s, const ynode *n) {
  static const char *const keys[] = {"nic_buffer", "nic_ecn_threshold", NULL};
  const char *p = "host";
  int rv = check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_host_config *h = &s->cfg->host;
  if ((rv = get_size(s, n, p, "nic_buffer", &h->nic_buffer_bytes, 1500,
                     1ull << 40))) {
    return rv;
  }
  const ynode *e = map_get(n, "nic_ecn_threshold");
  if (e && !(e->kind == Y_SCALAR && strcmp(e->str, "off") == 0)) {
    rv = parse_size(s, e, "host.nic_ecn_threshold",
                    &h->nic_ecn_threshold_bytes, 0, 1ull << 40);
  }
  return rv;
}

static int flow_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"src",      "dst",  "size",
                                     "start",    "priority", "load_balancing",
                                     "path",     NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  if ((rv = dlcp_sim_config_add_flow(c, "", "", 0, 0, 0)) != 0) {
    return rv;
  }
  dlcp_sim_flow_spec *f = &c->flows[c->nflows - 1];
  where(f->where, n);
  set_field(f->field, path);
  if ((rv = get_name(s, n, path, "src", f->src, true, n)) ||
      (rv = get_name(s, n, path, "dst", f->dst, true, n))) {
    return rv;
  }
  if (!map_get(n, "size")) {
    char field[256];
    join(field, sizeof(field), path, "size");
    return fail(s, n, field, "expected this field to be present");
  }
  int lb = -1;
  if ((rv = get_size(s, n, path, "size", &f->size_bytes, 1, 1ull << 40)) ||
      (rv = get_time(s, n, path, "start", &f->start_ps)) ||
      (rv = get_u32(s, n, path, "priority", &f->prio, 0,
                    DLCP_SIM_MAX_QUEUES - 1)) ||
      (rv = get_enum(s, n, path, "load_balancing", lb_words, &lb)) ||
      (rv = get_u32(s, n, path, "path", &f->path, 0, 1u << 30))) {
    return rv;
  }
  f->lb = lb;
  return 0;
}

static int incast_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"receiver", "senders", "size", "start",
                                     "priority", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_incast_spec *arr =
      realloc(c->incasts, (c->nincasts + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->incasts = arr;
  dlcp_sim_incast_spec *in = &arr[c->nincasts++];
  memset(in, 0, sizeof(*in));
  where(in->where, n);
  set_field(in->field, path);
  char field[256];
  if ((rv = get_name(s, n, path, "receiver", in->receiver, true, n))) {
    return rv;
  }
  const ynode *snd = map_get(n, "senders");
  join(field, sizeof(field), path, "senders");
  if (!snd) {
    return fail(s, n, field, "expected this field to be present");
  }
  if (snd->kind == Y_SEQ) {
    in->senders = calloc(snd->n + 1, sizeof(*in->senders));
    if (!in->senders) {
      return DLCP_ERR_NOMEM;
    }
    for (size_t i = 0; i < snd->n; i++) {
      const char *t = "";
      if ((rv = scalar(s, snd->items[i], field, &t))) {
        return rv;
      }
      if (t[0] == '\0' || strlen(t) >= DLCP_SIM_NAME_MAX) {
        return fail(s, snd->items[i], field, "expected host names");
      }
      snprintf(in->senders[i], DLCP_SIM_NAME_MAX, "%s", t);
    }
    in->nsenders_listed = (uint32_t)snd->n;
  } else if ((rv = get_u32(s, n, path, "senders", &in->nsenders, 1,
                           65535))) {
    return rv;
  }
  join(field, sizeof(field), path, "size");
  if (!map_get(n, "size")) {
    return fail(s, n, field, "expected this field to be present");
  }
  if ((rv = get_size(s, n, path, "size", &in->size_bytes, 1, 1ull << 40)) ||
      (rv = get_time(s, n, path, "start", &in->start_ps)) ||
      (rv = get_u32(s, n, path, "priority", &in->prio, 0,
                    DLCP_SIM_MAX_QUEUES - 1))) {
    return rv;
  }
  return 0;
}

/* workload.ps.profile: a bare model name (workloads/profiles/NAME.csv in
 * the source tree) or a CSV path, relative to the scenario's directory. */
static int ps_profile(scn *s, const ynode *n, const char *path,
                      dlcp_sim_ps_spec *ps) {
  char field[256];
  join(field, sizeof(field), path, "profile");
  const char *t = "";
  int rv = scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  char file[1024];
  size_t len = strlen(t);
  bool is_path = strchr(t, '/') || (len > 4 && strcmp(t + len - 4, ".csv") == 0);
  if (t[0] == '\0' || (!is_path && strspn(t, "abcdefghijklmnopqrstuvwxyz"
                                               "0123456789_-") != len)) {
    return fail(s, n, field, "expected a model name (resnet50, vgg16, "
                "vgg19, googlenet, transformer) or a profile CSV path");
  }
  if (!is_path) {
    snprintf(file, sizeof(file), "%s/%s.csv", dlcp_sim_profile_dir, t);
  } else if (t[0] == '/') {
    snprintf(file, sizeof(file), "%s", t);
  } else {
    snprintf(file, sizeof(file), "%s/%s", s->dir, t);
  }
  char why[512];
  rv = dlcp_sim_profile_load(ps, file, why, sizeof(why));
  if (rv == DLCP_ERR_NOMEM) {
    return rv;
  }
  if (rv != 0) {
    return fail(s, n, field, "expected a readable training profile: %s", why);
  }
  return 0;
}

static int ps_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"workers",      "servers", "model_size",
                                     "iterations",   "compute_time", "start",
                                     "priority",     "profile", "partition",
                                     "layer_priorities", "profile_scale",
                                     "compression", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_ps_spec *arr = realloc(c->ps, (c->nps + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->ps = arr;
  dlcp_sim_ps_spec *ps = &arr[c->nps++];
  memset(ps, 0, sizeof(*ps));
  ps->iterations = 1;
  where(ps->where, n);
  set_field(ps->field, path);
  ps->partition_bytes = 4000000;
  ps->profile_scale = 1.0;
  ps->compression = 1.0;
  const ynode *prof = map_get(n, "profile");
  if (prof && (map_get(n, "model_size") || map_get(n, "compute_time"))) {
    char field[256];
    join(field, sizeof(field), path, "profile");
    return fail(s, prof, field, "expected either a profile or model_size "
                "and compute_time, not both");
  }
  if (prof && (rv = ps_profile(s, prof, path, ps)) != 0) {
    return rv;
  }
  static const char *const needs_profile[] = {
      "partition", "layer_priorities", "profile_scale", "compression", NULL};
  for (const char *const *k = needs_profile; !prof && *k; k++) {
    if (map_get(n, *k)) {
      char field[256];
      join(field, sizeof(field), path, *k);
      return fail(s, map_get(n, *k), field,
                  "expected a profile (this field shapes its tensors)");
    }
  }
  if ((rv = get_size(s, n, path, "partition", &ps->partition_bytes, 1,
                     1ull << 40)) ||
      (rv = get_u32(s, n, path, "layer_priorities", &ps->layer_priorities, 0,
                    DLCP_SIM_MAX_QUEUES)) ||
      (rv = get_double(s, n, path, "profile_scale", &ps->profile_scale, 1e-6,
                       1.0)) ||
      (rv = get_double(s, n, path, "compression", &ps->compression, 1.0,
                       1e6))) {
    return rv;
  }
  if (ps->ntensors > 0 &&
      (ps->profile_scale != 1.0 || ps->compression != 1.0)) {
    ps->model_bytes = 0;
    for (uint32_t t = 0; t < ps->ntensors; t++) {
      double b = (double)ps->tensor_bytes[t] * ps->profile_scale /
                 ps->compression / 4.0;
      ps->tensor_bytes[t] = 4 * (uint64_t)ceil(b);
      ps->model_bytes += ps->tensor_bytes[t];
      ps->tensor_bwd_ps[t] =
          (dlcp_sim_ps)llround((double)ps->tensor_bwd_ps[t] *
                               ps->profile_scale);
    }
    ps->forward_ps =
        (dlcp_sim_ps)llround((double)ps->forward_ps * ps->profile_scale);
  }
  static const char *const required[] = {"workers", "servers", "model_size",
                                         NULL};
  for (const char *const *r = required; *r; r++) {
    if (prof && strcmp(*r, "model_size") == 0) {
      continue;
    }
    if (!map_get(n, *r)) {
      char field[256];
      join(field, sizeof(field), path, *r);
      return fail(s, n, field, "expected this field to be present");
    }
  }
  if ((rv = get_u32(s, n, path, "workers", &ps->workers, 1, 65535)) ||
      (rv = get_u32(s, n, path, "servers", &ps->servers, 1, 65535)) ||
      (rv = get_size(s, n, path, "model_size", &ps->model_bytes, 1,
                     1ull << 40)) ||
      (rv = get_u32(s, n, path, "iterations", &ps->iterations, 1, 10000)) ||
      (rv = get_time(s, n, path, "compute_time", &ps->compute_ps)) ||
      (rv = get_time(s, n, path, "start", &ps->start_ps)) ||
      (rv = get_u32(s, n, path, "priority", &ps->prio, 0,
                    DLCP_SIM_MAX_QUEUES - 1))) {
    return rv;
  }
  return 0;
}

static int collective_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {
      "algo",        "bytes",    "ranks", "iterations", "compute_time",
      "start",       "priority", "loss_bound", "chunk", "scale", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_coll_spec *arr = realloc(c->colls, (c->ncolls + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->colls = arr;
  dlcp_sim_coll_spec *cs = &arr[c->ncolls++];
  memset(cs, 0, sizeof(*cs));
  cs->algo = DLCP_ALGO_RING;
  cs->iterations = 1;
  where(cs->where, n);
  set_field(cs->field, path);
  char field[256];
  if (!map_get(n, "bytes")) {
    join(field, sizeof(field), path, "bytes");
    return fail(s, n, field, "expected this field to be present");
  }
  /* Every algorithm but INA and RA_INA (the last two), which need an
   * aggregation switch the simulator does not model yet (docs/ina.md). */
  const char *algos[DLCP_COLL_NALGOS + 1] = {NULL};
  for (unsigned a = 0; a < DLCP_ALGO_INA; a++) {
    algos[a] = dlcp_algo_short_name((dlcp_algo)a);
  }
  int algo = 1;
  if ((rv = get_enum(s, n, path, "algo", algos, &algo)) ||
      (rv = get_size(s, n, path, "bytes", &cs->bytes, 4, 1ull << 40)) ||
      (rv = get_u32(s, n, path, "iterations", &cs->iterations, 1, 10000)) ||
      (rv = get_time(s, n, path, "compute_time", &cs->compute_ps)) ||
      (rv = get_time(s, n, path, "start", &cs->start_ps)) ||
      (rv = get_u32(s, n, path, "priority", &cs->prio, 0,
                    DLCP_SIM_MAX_QUEUES - 1)) ||
      (rv = get_double(s, n, path, "loss_bound", &cs->loss_bound, 0.0,
                       0.99)) ||
      (rv = get_size(s, n, path, "chunk", &cs->chunk_bytes, 4,
                     1ull << 40)) ||
      (rv = get_u32(s, n, path, "scale", &cs->scale, 1, 1u << 30))) {
    return rv;
  }
  cs->algo = (dlcp_algo)algo;
  /* ranks: all (the default) or a count. */
  const ynode *r = map_get(n, "ranks");
  if (r && !(r->kind == Y_SCALAR && strcmp(r->str, "all") == 0) &&
      (rv = get_u32(s, n, path, "ranks", &cs->ranks, 1, 4096))) {
    return rv;
  }
  return 0;
}

static int background_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"distribution", "load", "start",
                                     "duration", "priority", NULL};
  static const char *const required[] = {"distribution", "load", "duration",
                                         NULL};
  static const char *const dists[] = {"websearch", "datamining", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0 || (rv = require(s, n, path, required)) != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_background_spec *arr =
      realloc(c->backgrounds, (c->nbackgrounds + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->backgrounds = arr;
  dlcp_sim_background_spec *b = &arr[c->nbackgrounds++];
  memset(b, 0, sizeof(*b));
  where(b->where, n);
  set_field(b->field, path);
  int dist = 0;
  if ((rv = get_enum(s, n, path, "distribution", dists, &dist)) ||
      (rv = get_double(s, n, path, "load", &b->load, 1e-6, 1.0)) ||
      (rv = get_time(s, n, path, "start", &b->start_ps)) ||
      (rv = get_time(s, n, path, "duration", &b->duration_ps)) ||
      (rv = get_u32(s, n, path, "priority", &b->prio, 0,
                    DLCP_SIM_MAX_QUEUES - 1))) {
    return rv;
  }
  b->dist = (dlcp_sim_flow_dist)dist;
  return 0;
}

static int section_workload(scn *s, const ynode *n) {
  static const char *const keys[] = {"flows", "incast", "ps", "collective",
                                     "background", NULL};
  int rv = check_keys(s, n, "workload", keys);
  const ynode *v;
  if (rv == 0 && (v = map_get(n, "flows"))) {
    rv = for_each_map(s, v, "workload.flows", flow_item);
  }
  if (rv == 0 && (v = map_get(n, "incast"))) {
    rv = for_each_map(s, v, "workload.incast", incast_item);
  }
  if (rv == 0 && (v = map_get(n, "ps"))) {
    rv = for_each_map(s, v, "workload.ps", ps_item);
  }
  if (rv == 0 && (v = map_get(n, "collective"))) {
    rv = for_each_map(s, v, "workload.collective", collective_item);
  }
  if (rv == 0 && (v = map_get(n, "background"))) {
    rv = for_each_map(s, v, "workload.background", background_item);
  }
  return rv;
}

/* faults[i].pause: {ranks: k, every: d, duration: t, start: T}. */
static int pause_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"ranks", "every", "duration", "start",
                                     NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  char field[256];
  static const char *const required[] = {"ranks", "every", NULL};
  for (const char *const *r = required; *r; r++) {
    if (!map_get(n, *r)) {
      join(field, sizeof(field), path, *r);
      return fail(s, n, field, "expected this field to be present");
    }
  }
  uint32_t k = 0;
  dlcp_sim_ps every = 0, duration = 0, start = 0;
  if ((rv = get_u32(s, n, path, "ranks", &k, 1, 1u << 20)) ||
      (rv = get_time(s, n, path, "every", &every)) ||
      (rv = get_time(s, n, path, "duration", &duration)) ||
      (rv = get_time(s, n, path, "start", &start))) {
    return rv;
  }
  if (every == 0) {
    join(field, sizeof(field), path, "every");
    return fail(s, map_get(n, "every"), field, "expected > 0");
  }
  rv = dlcp_sim_config_add_fault(s->cfg, DLCP_SIM_FAULT_PAUSE, "", "", 0.0,
                                 start);
  if (rv == 0) {
    dlcp_sim_fault_spec *f = &s->cfg->faults[s->cfg->nfaults - 1];
    f->pause_ranks = k;
    f->every_ps = every;
    f->pause_ps = duration ? duration : every;
    where(f->where, n);
    /* path is "faults[i].pause": the fault's own path is its prefix. */
    snprintf(f->field, sizeof(f->field), "%.*s",
             (int)(strlen(path) - strlen(".pause")), path);
  }
  return rv;
}

static int fault_item(scn *s, const ynode *n, const char *path) {
  static const char *const keys[] = {"link", "loss", "down_at", "up_at",
                                     "pause", NULL};
  int rv = check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  char field[256];
  const ynode *pause = map_get(n, "pause");
  if (pause) {
    join(field, sizeof(field), path, "pause");
    if (n->n != 1 || pause->kind != Y_MAP) {
      return fail(s, pause, field, "expected {ranks, every, duration, "
                  "start} and no other field beside it");
    }
    return pause_item(s, pause, field);
  }
  join(field, sizeof(field), path, "link");
  const ynode *l = map_get(n, "link");
  char a[DLCP_SIM_NAME_MAX] = "", b[DLCP_SIM_NAME_MAX] = "";
  if (!l) {
    return fail(s, n, field, "expected this field to be present");
  }
  if (l->kind == Y_SCALAR && strcmp(l->str, "*") == 0) {
    snprintf(a, sizeof(a), "*");
  } else if (l->kind == Y_SEQ && l->n == 2 && l->items[0]->kind == Y_SCALAR &&
             l->items[1]->kind == Y_SCALAR &&
             strlen(l->items[0]->str) < DLCP_SIM_NAME_MAX &&
             strlen(l->items[1]->str) < DLCP_SIM_NAME_MAX) {
    snprintf(a, sizeof(a), "%s", l->items[0]->str);
    snprintf(b, sizeof(b), "%s", l->items[1]->str);
  } else {
    return fail(s, l, field, "expected [node_a, node_b] or \"*\" (every "
                "link)");
  }
  const ynode *loss = map_get(n, "loss");
  const ynode *down = map_get(n, "down_at");
  const ynode *up = map_get(n, "up_at");
  if ((loss != NULL) + (down != NULL) + (up != NULL) != 1) {
    join(field, sizeof(field), path, "loss");
    return fail(s, n, field, "expected exactly one of loss, down_at, up_at");
  }
  if (a[0] == '*' && !loss) {
    return fail(s, l, field, "expected a single link for down_at/up_at");
  }
  double p = 0;
  dlcp_sim_ps at = 0;
  dlcp_sim_fault_kind kind = loss ? DLCP_SIM_FAULT_LOSS
                             : down ? DLCP_SIM_FAULT_DOWN
                                    : DLCP_SIM_FAULT_UP;
  if ((rv = get_double(s, n, path, "loss", &p, 0.0, 1.0)) ||
      (rv = get_time(s, n, path, "down_at", &at)) ||
      (rv = get_time(s, n, path, "up_at", &at))) {
    return rv;
  }
  rv = dlcp_sim_config_add_fault(s->cfg, kind, a, b, p, at);
  if (rv == 0) {
    where(s->cfg->faults[s->cfg->nfaults - 1].where, l);
    set_field(s->cfg->faults[s->cfg->nfaults - 1].field, path);
  }
  return rv;
}

/* outputs.pcap: a list of cables, each "a-b" or [a, b]. */
static int pcap_list(scn *s, const ynode *n) {
  if (n->kind != Y_SEQ) {
    return fail(s, n, "outputs.pcap", "expected a list of links, each "
                "\"a-b\" or [a, b]");
  }
  for (size_t i = 0; i < n->n; i++) {
    const ynode *it = n->items[i];
    char field[64], a[DLCP_SIM_NAME_MAX] = "", b[DLCP_SIM_NAME_MAX] = "";
    snprintf(field, sizeof(field), "outputs.pcap[%zu]", i);
    bool ok = false;
    if (it->kind == Y_SCALAR) {
      const char *dash = strchr(it->str, '-');
      size_t la = dash ? (size_t)(dash - it->str) : 0;
      if (dash && la > 0 && la < DLCP_SIM_NAME_MAX && dash[1] != '\0' &&
          strlen(dash + 1) < DLCP_SIM_NAME_MAX) {
        memcpy(a, it->str, la);
        a[la] = '\0';
        snprintf(b, sizeof(b), "%s", dash + 1);
        ok = true;
      }
    } else if (it->kind == Y_SEQ && it->n == 2 &&
               it->items[0]->kind == Y_SCALAR &&
               it->items[1]->kind == Y_SCALAR &&
               strlen(it->items[0]->str) < DLCP_SIM_NAME_MAX &&
               strlen(it->items[1]->str) < DLCP_SIM_NAME_MAX) {
      snprintf(a, sizeof(a), "%s", it->items[0]->str);
      snprintf(b, sizeof(b), "%s", it->items[1]->str);
      ok = true;
    }
    if (!ok) {
      return fail(s, it, field, "expected a link \"a-b\" or [a, b]");
    }
    int rv = dlcp_sim_config_add_pcap(s->cfg, a, b);
    if (rv != 0) {
      return rv;
    }
    dlcp_sim_pcap_spec *p = &s->cfg->pcaps[s->cfg->npcaps - 1];
    where(p->where, it);
    set_field(p->field, field);
  }
  return 0;
}

/* Converts the whole tree into s->cfg. */
static int interpret(scn *s, const ynode *root, char *out_dir,
                     size_t out_dir_len) {
  static const char *const keys[] = {"name",      "seed",     "stop_at",
                                     "topology",  "switch",   "host",
                                     "transport", "workload", "faults",
                                     "outputs",   NULL};
  int rv = check_keys(s, root, "", keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  const ynode *v;
  if ((v = map_get(root, "name"))) {
    const char *t = "";
    if ((rv = scalar(s, v, "name", &t))) {
      return rv;
    }
    snprintf(c->name, sizeof(c->name), "%s", t);
  }
  if ((rv = get_u64(s, root, "", "seed", &c->seed, 0, UINT64_MAX)) ||
      (rv = get_time(s, root, "", "stop_at", &c->stop_ps))) {
    return rv;
  }
  if (c->stop_ps == 0) {
    return fail(s, map_get(root, "stop_at"), "stop_at", "expected > 0");
  }
  /* Transport first: sizes in "pkts" elsewhere depend on its mss. */
  s->mtu = c->transport.mss_bytes + c->transport.header_bytes;
  if ((v = map_get(root, "transport")) && (rv = section_transport(s, v))) {
    return rv;
  }
  if ((v = map_get(root, "topology")) && (rv = section_topology(s, v))) {
    return rv;
  }
  if ((v = map_get(root, "switch")) && (rv = section_switch(s, v))) {
    return rv;
  }
  if ((v = map_get(root, "host")) && (rv = section_host(s, v))) {
    return rv;
  }
  if ((v = map_get(root, "workload")) && (rv = section_workload(s, v))) {
    return rv;
  }
  if ((v = map_get(root, "faults"))) {
    if (v->kind != Y_SEQ && v->kind != Y_MAP) {
      return fail(s, v, "faults", "expected a list of faults");
    }
    if ((rv = for_each_map(s, v, "faults", fault_item))) {
      return rv;
    }
  }
  if ((v = map_get(root, "outputs"))) {
    static const char *const okeys[] = {"dir", "pcap", NULL};
    if ((rv = check_keys(s, v, "outputs", okeys))) {
      return rv;
    }
    const ynode *pc = map_get(v, "pcap");
    if (pc && (rv = pcap_list(s, pc))) {
      return rv;
    }
    const ynode *d = map_get(v, "dir");
    const char *t = "";
    if (d) {
      if ((rv = scalar(s, d, "outputs.dir", &t))) {
        return rv;
      }
      if (t[0] == '\0' || strlen(t) >= out_dir_len) {
        return fail(s, d, "outputs.dir", "expected a directory path");
      }
      snprintf(out_dir, out_dir_len, "%s", t);
    }
  }
  return 0;
}

int dlcp_sim_scenario_load(dlcp_sim_config *cfg, const char *text, size_t len,
                           const char *file, const char *const *sets,
                           size_t nsets, char *err, size_t errlen) {
  scn s = {cfg, err, errlen, 1500, "."};
  const char *slash = file ? strrchr(file, '/') : NULL;
  if (slash) {
    snprintf(s.dir, sizeof(s.dir), "%.*s", (int)(slash - file), file);
  }
  dlcp_sim_config_default(cfg);
  if (errlen > 0) {
    err[0] = '\0';
  }
  ynode *root = NULL;
  int rv = 0;
  if (text) {
    rv = parse_yaml(&s, text, len, file, 0, &root);
  }
  for (size_t i = 0; rv == 0 && i < nsets; i++) {
    rv = apply_set(&s, &root, sets[i], (unsigned)(i + 1));
  }
  if (rv == 0 && root) {
    rv = interpret(&s, root, cfg->out_dir, sizeof(cfg->out_dir));
  }
  ynode_free(root);
  if (rv != 0) {
    dlcp_sim_config_free(cfg);
    if (rv == DLCP_ERR_NOMEM && errlen > 0 && err[0] == '\0') {
      snprintf(err, errlen, "%s: out of memory", file);
    }
  }
  return rv;
}

int dlcp_sim_scenario_load_file(dlcp_sim_config *cfg, const char *path,
                                const char *const *sets, size_t nsets,
                                char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    dlcp_sim_config_default(cfg);
    return DLCP_ERR_SYSTEM;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len < cap) {
      break;
    }
    if (cap >= (64u << 20)) {
      fclose(f);
      free(buf);
      snprintf(err, errlen, "%s: scenario larger than 64 MiB", path);
      dlcp_sim_config_default(cfg);
      return DLCP_ERR_CONFIG;
    }
    char *nbuf = realloc(buf, cap * 2);
    if (!nbuf) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nbuf;
    cap *= 2;
  }
  bool bad = ferror(f) != 0;
  fclose(f);
  if (!buf) {
    dlcp_sim_config_default(cfg);
    return DLCP_ERR_NOMEM;
  }
  if (bad) {
    free(buf);
    snprintf(err, errlen, "%s: read error", path);
    dlcp_sim_config_default(cfg);
    return DLCP_ERR_SYSTEM;
  }
  int rv = dlcp_sim_scenario_load(cfg, buf, len, path, sets, nsets, err,
                                  errlen);
  free(buf);
  return rv;
}

/*
 * The MLT seed's simulation set-up (section 5.4.2): leaf-spine with 4
 * spines, 9 ToRs and 16 hosts per ToR at 100 Gbps (4 x 100 Gbps ToR
 * uplinks, so 4:1 oversubscribed), 24 us base RTT across the fabric,
 * 512 KB per switch port, 8 queues, ECN at 65 packets, DCTCP with
 * RTO_min 1 ms, initial window 20, 3 dupACKs and no delayed ACK, flow
 * ECMP.  Traffic: parameter-server training with workers and servers 3:1
 * spread evenly over the racks.  The seed uses ResNet50 (97 MB per
 * iteration); the model is scaled down here so the run takes seconds.
 */
const char dlcp_sim_default_scenario[] =
    "name: mlt-leaf-spine-ps\n"
    "seed: 1\n"
    "topology:\n"
    "  kind: leaf_spine\n"
    "  spines: 4\n"
    "  tors: 9\n"
    "  hosts_per_tor: 16\n"
    "  host_rate: 100Gbps\n"
    "  fabric_rate: 100Gbps\n"
    "  base_rtt: 24us\n"
    "switch:\n"
    "  queues: 8\n"
    "  port_buffer: 512KB\n"
    "  ecn_threshold: 65pkts\n"
    "transport:\n"
    "  kind: dctcp\n"
    "  rto_min: 1ms\n"
    "  init_cwnd: 20\n"
    "  dupack_threshold: 3\n"
    "  delayed_ack: false\n"
    "  load_balancing: ecmp\n"
    "workload:\n"
    "  ps:\n"
    "    workers: 108\n"
    "    servers: 36\n"
    "    model_size: 3600KB\n"
    "    iterations: 2\n"
    "    compute_time: 100us\n";
