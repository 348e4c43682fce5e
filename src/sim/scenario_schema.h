/*
 * scenario_schema.h: the pieces scenario.c and its sections share (not
 * installed; only src/sim/scenario*.c include it).
 *
 * A scenario is read in two stages.  scenario_tree.c turns the YAML text
 * and the --set overrides into a tree of dlcp_scn_nodes, each remembering
 * the file and line it came from.  The section readers (scenario.c for the
 * network, scenario_workload.c for workloads and faults) then walk that
 * tree against a fixed schema with the field readers of
 * scenario_field.c, which check each key, parse each value with its unit
 * and range, and report the first problem as one line
 * "FILE:LINE: field 'a.b': expected ..." in the dlcp_scn's error buffer.
 */
#ifndef DLCP_SIM_SCENARIO_SCHEMA_H
#define DLCP_SIM_SCENARIO_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"

typedef enum dlcp_scn_kind {
  DLCP_SCN_SCALAR,
  DLCP_SCN_MAP,
  DLCP_SCN_SEQ
} dlcp_scn_kind;

/* One YAML node with its origin. */
typedef struct dlcp_scn_node {
  dlcp_scn_kind kind;
  char *str;                    /* scalar text */
  char **keys;                  /* map keys (n of them) */
  struct dlcp_scn_node **items; /* map values or sequence items */
  size_t n, cap;
  const char *file; /* not owned */
  unsigned line;
} dlcp_scn_node;

/* The state of one load: the configuration being filled and where errors
 * go. */
typedef struct dlcp_scn {
  dlcp_sim_config *cfg;
  char *err;
  size_t errlen;
  uint32_t mtu;  /* mss + header, for sizes given in packets */
  char dir[512]; /* the scenario file's directory, for relative paths */
} dlcp_scn;

/* ---- the tree (scenario_tree.c) ---------------------------------------- */

void dlcp_scn_node_free(dlcp_scn_node *n);
/* Parses |text| as one YAML document into *out (NULL if empty); a nonzero
 * |line_base| gives every node that line (overrides report their
 * position, not a line inside the value). */
int dlcp_scn_parse(dlcp_scn *s, const char *text, size_t len, const char *file,
                   unsigned line_base, dlcp_scn_node **out);
/* Applies the override "a.b.c=value", the |index|th, to the tree rooted at
 * *root (created if NULL). */
int dlcp_scn_apply_set(dlcp_scn *s, dlcp_scn_node **root, const char *set,
                       unsigned index);
/* The value of |key| in |map|, or NULL (also when |map| is no mapping). */
dlcp_scn_node *dlcp_scn_map_get(const dlcp_scn_node *map, const char *key);

/* ---- field readers (scenario_field.c) ---------------------------------- */

/* Write "FILE:LINE: field 'FIELD': " and the message into s->err and
 * return DLCP_ERR_CONFIG; dlcp_scn_fail takes the origin from |n|. */
__attribute__((format(printf, 5, 6))) int
dlcp_scn_fail_at(dlcp_scn *s, const char *file, unsigned line,
                 const char *field, const char *fmt, ...);
__attribute__((format(printf, 4, 5))) int dlcp_scn_fail(dlcp_scn *s,
                                                        const dlcp_scn_node *n,
                                                        const char *field,
                                                        const char *fmt, ...);
/* "path.key", or "key" at the root. */
void dlcp_scn_join(char *out, size_t outlen, const char *path, const char *key);
/* Fails unless |map| is a mapping whose keys are all in |allowed|
 * (NULL-terminated). */
int dlcp_scn_check_keys(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                        const char *const *allowed);
/* Fails on the first of |required| (NULL-terminated) missing from |n|. */
int dlcp_scn_require(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                     const char *const *required);
int dlcp_scn_scalar(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                    const char **out);

/*
 * The getters read |key| of |map| (the field "path.key") into *out, which
 * keeps its value when the key is absent; a value of the wrong form or
 * out of [min, max] fails with the accepted form.  Sizes take the units B,
 * KB, MB, GB, KiB, MiB, GiB or pkts (times s->mtu); times ps, ns, us, ms
 * or s; rates bps to Tbps.  The parse_ variants read the node itself.
 */
int dlcp_scn_get_u64(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                     const char *key, uint64_t *out, uint64_t min,
                     uint64_t max);
int dlcp_scn_get_u32(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                     const char *key, uint32_t *out, uint32_t min,
                     uint32_t max);
int dlcp_scn_get_double(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                        const char *key, double *out, double min, double max);
int dlcp_scn_get_bool(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, bool *out);
int dlcp_scn_parse_size(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                        uint64_t *out, uint64_t min, uint64_t max);
int dlcp_scn_get_size(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, uint64_t *out, uint64_t min,
                      uint64_t max);
int dlcp_scn_parse_time(dlcp_scn *s, const dlcp_scn_node *n, const char *field,
                        dlcp_sim_ps *out);
int dlcp_scn_get_time(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, dlcp_sim_ps *out);
int dlcp_scn_get_rate(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, uint64_t *out);
/* A name of 1..DLCP_SIM_NAME_MAX-1 characters; a |required| one missing
 * fails at |owner|. */
int dlcp_scn_get_name(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, char *out, bool required,
                      const dlcp_scn_node *owner);
/* Matches the value against |words| (NULL-terminated); *out = its index. */
int dlcp_scn_get_enum(dlcp_scn *s, const dlcp_scn_node *map, const char *path,
                      const char *key, const char *const *words, int *out);
/* Record a node's "file:line" and a field path for later errors. */
void dlcp_scn_where(char *out, const dlcp_scn_node *n);
void dlcp_scn_set_field(char *out, const char *path);
/* Calls |fn| on a mapping, or on each mapping of a sequence (so
 * "incast: {...}" and "incast: [{...}, {...}]" both work), with the path
 * "path[i]" for items. */
int dlcp_scn_for_each_map(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                          int (*fn)(dlcp_scn *, const dlcp_scn_node *,
                                    const char *));

/* transport.load_balancing and a flow's load_balancing. */
extern const char *const dlcp_scn_lb_words[];

/* ---- sections (scenario_workload.c) ------------------------------------ */

/* workload: flows, incast, ps, collective, background. */
int dlcp_scn_section_workload(dlcp_scn *s, const dlcp_scn_node *n);
/* One item of faults: a link's loss, down_at or up_at, or a pause. */
int dlcp_scn_fault_item(dlcp_scn *s, const dlcp_scn_node *n, const char *path);

#endif /* DLCP_SIM_SCENARIO_SCHEMA_H */
