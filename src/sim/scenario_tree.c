/*
 * scenario_tree.c: YAML text and --set overrides -> a tree of
 * dlcp_scn_nodes.
 *
 * libyaml parses the document into its node graph; we copy that into a
 * small tree of our own (maps, sequences, scalars, each with the file and
 * line it came from) so that --set overrides can replace or add subtrees
 * with their own origin before anything is interpreted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "sim/scenario_schema.h"

#define MAX_DEPTH 32

void dlcp_scn_node_free(dlcp_scn_node *n) {
  if (!n) {
    return;
  }
  free(n->str);
  for (size_t i = 0; i < n->n; i++) {
    if (n->keys) {
      free(n->keys[i]);
    }
    dlcp_scn_node_free(n->items[i]);
  }
  free(n->keys);
  free(n->items);
  free(n);
}

static dlcp_scn_node *node_new(dlcp_scn_kind kind, const char *file,
                               unsigned line) {
  dlcp_scn_node *n = calloc(1, sizeof(*n));
  if (n) {
    n->kind = kind;
    n->file = file;
    n->line = line;
  }
  return n;
}

static int node_push(dlcp_scn_node *parent, char *key, dlcp_scn_node *child) {
  if (parent->n == parent->cap) {
    size_t ncap = parent->cap ? parent->cap * 2 : 8;
    dlcp_scn_node **items = realloc(parent->items, ncap * sizeof(*items));
    if (!items) {
      return DLCP_ERR_NOMEM;
    }
    parent->items = items;
    if (parent->kind == DLCP_SCN_MAP) {
      char **keys = realloc(parent->keys, ncap * sizeof(*keys));
      if (!keys) {
        return DLCP_ERR_NOMEM;
      }
      parent->keys = keys;
    }
    parent->cap = ncap;
  }
  if (parent->kind == DLCP_SCN_MAP) {
    parent->keys[parent->n] = key;
  }
  parent->items[parent->n++] = child;
  return 0;
}

/* Copies libyaml node |id| into our tree. */
static int convert(dlcp_scn *s, yaml_document_t *doc, int id, const char *file,
                   int depth, dlcp_scn_node **out) {
  yaml_node_t *yn = yaml_document_get_node(doc, id);
  *out = NULL;
  if (!yn) {
    return 0;
  }
  unsigned line = (unsigned)yn->start_mark.line + 1;
  if (depth > MAX_DEPTH) {
    return dlcp_scn_fail_at(s, file, line, "(document)",
                            "expected at most %d levels of nesting", MAX_DEPTH);
  }
  switch (yn->type) {
  case YAML_SCALAR_NODE: {
    dlcp_scn_node *n = node_new(DLCP_SCN_SCALAR, file, line);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    n->str =
        strndup((const char *)yn->data.scalar.value, yn->data.scalar.length);
    if (!n->str) {
      dlcp_scn_node_free(n);
      return DLCP_ERR_NOMEM;
    }
    *out = n;
    return 0;
  }
  case YAML_SEQUENCE_NODE: {
    dlcp_scn_node *n = node_new(DLCP_SCN_SEQ, file, line);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    for (yaml_node_item_t *it = yn->data.sequence.items.start;
         it < yn->data.sequence.items.top; it++) {
      dlcp_scn_node *child;
      int rv = convert(s, doc, *it, file, depth + 1, &child);
      if (rv == 0 && child) {
        rv = node_push(n, NULL, child);
        if (rv != 0) {
          dlcp_scn_node_free(child);
        }
      }
      if (rv != 0) {
        dlcp_scn_node_free(n);
        return rv;
      }
    }
    *out = n;
    return 0;
  }
  case YAML_MAPPING_NODE: {
    dlcp_scn_node *n = node_new(DLCP_SCN_MAP, file, line);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    for (yaml_node_pair_t *p = yn->data.mapping.pairs.start;
         p < yn->data.mapping.pairs.top; p++) {
      yaml_node_t *kn = yaml_document_get_node(doc, p->key);
      if (!kn || kn->type != YAML_SCALAR_NODE) {
        dlcp_scn_node_free(n);
        return dlcp_scn_fail_at(
            s, file, kn ? (unsigned)kn->start_mark.line + 1 : line, "(key)",
            "expected a plain scalar as a mapping key");
      }
      char *key =
          strndup((const char *)kn->data.scalar.value, kn->data.scalar.length);
      dlcp_scn_node *child = NULL;
      int rv = key ? convert(s, doc, p->value, file, depth + 1, &child)
                   : DLCP_ERR_NOMEM;
      for (size_t i = 0; rv == 0 && i < n->n; i++) {
        if (strcmp(n->keys[i], key) == 0) {
          rv = dlcp_scn_fail_at(s, file, (unsigned)kn->start_mark.line + 1, key,
                                "expected each key once in a mapping");
        }
      }
      if (rv == 0 && child) {
        rv = node_push(n, key, child);
      }
      if (rv != 0 || !child) {
        free(key);
        dlcp_scn_node_free(child);
      }
      if (rv != 0) {
        dlcp_scn_node_free(n);
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
int dlcp_scn_parse(dlcp_scn *s, const char *text, size_t len, const char *file,
                   unsigned line_base, dlcp_scn_node **out) {
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
      dlcp_scn_node *stack[64];
      size_t top = 0;
      stack[top++] = *out;
      while (top) {
        dlcp_scn_node *n = stack[--top];
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

dlcp_scn_node *dlcp_scn_map_get(const dlcp_scn_node *map, const char *key) {
  if (!map || map->kind != DLCP_SCN_MAP) {
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
int dlcp_scn_apply_set(dlcp_scn *s, dlcp_scn_node **root, const char *set,
                       unsigned index) {
  static const char file[] = "--set";
  const char *eq = strchr(set, '=');
  if (!eq || eq == set) {
    return dlcp_scn_fail_at(s, file, index, set, "expected KEY=VALUE");
  }
  char *path = strndup(set, (size_t)(eq - set));
  if (!path) {
    return DLCP_ERR_NOMEM;
  }
  dlcp_scn_node *value = NULL;
  const char *vtext = eq + 1;
  int rv = dlcp_scn_parse(s, vtext, strlen(vtext), file, index, &value);
  if (rv == 0 && !value) {
    value = node_new(DLCP_SCN_SCALAR, file, index);
    if (value) {
      value->str = strdup("");
    }
    if (!value || !value->str) {
      rv = DLCP_ERR_NOMEM;
    }
  }
  if (rv != 0) {
    dlcp_scn_node_free(value);
    free(path);
    return rv;
  }
  if (!*root) {
    *root = node_new(DLCP_SCN_MAP, file, index);
    if (!*root) {
      dlcp_scn_node_free(value);
      free(path);
      return DLCP_ERR_NOMEM;
    }
  }
  dlcp_scn_node *cur = *root;
  char *save = NULL;
  char *tok = strtok_r(path, ".", &save);
  while (tok) {
    char *next = strtok_r(NULL, ".", &save);
    dlcp_scn_node **slot = NULL;
    if (cur->kind == DLCP_SCN_MAP) {
      for (size_t i = 0; i < cur->n; i++) {
        if (strcmp(cur->keys[i], tok) == 0) {
          slot = &cur->items[i];
        }
      }
      if (!slot) {
        char *key = strdup(tok);
        dlcp_scn_node *child =
            next ? node_new(DLCP_SCN_MAP, file, index) : value;
        if (!key || !child || node_push(cur, key, child) != 0) {
          free(key);
          if (child != value) {
            dlcp_scn_node_free(child);
          }
          dlcp_scn_node_free(value);
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
    } else if (cur->kind == DLCP_SCN_SEQ) {
      char *end;
      unsigned long i = strtoul(tok, &end, 10);
      if (*end != '\0' || i >= cur->n) {
        rv = dlcp_scn_fail_at(s, file, index, set,
                              "expected an index below %zu at '%s'", cur->n,
                              tok);
        break;
      }
      slot = &cur->items[i];
    } else {
      rv = dlcp_scn_fail_at(s, file, index, set,
                            "expected a mapping or sequence at '%s'", tok);
      break;
    }
    if (!next) {
      dlcp_scn_node_free(*slot);
      *slot = value;
      free(path);
      return 0;
    }
    cur = *slot;
    tok = next;
  }
  if (rv == 0) {
    rv = dlcp_scn_fail_at(s, file, index, set, "expected a non-empty key");
  }
  dlcp_scn_node_free(value);
  free(path);
  return rv;
}
