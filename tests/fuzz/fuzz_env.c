/*
 * fuzz_env.c: libFuzzer target for the runtime's configuration from the
 * environment: dlcp_rt_env_load() (every DLCP_* option, torchrun's
 * variables and mpirun's and srun's, the fault-injection lists, DLCP_TOPO)
 * and
 * dlcp_rt_env_check_unknown().  The input is lines "NAME=VALUE" handed to
 * the loader through its lookup table (no real environment is touched).
 *
 * Invariants (abort on violation): the result is 0 or DLCP_ERR_CONFIG; a
 * refusal has a message that names a variable; an accepted configuration
 * is in range (1 <= world, rank < world, paths 1..64, a rendezvous port
 * for a world of more than one).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt/env.h"

#define MAX_VARS 32

typedef struct table {
  char *names[MAX_VARS];
  char *values[MAX_VARS];
  char *lines[MAX_VARS + 1]; /* "NAME=VALUE", NULL-terminated */
  size_t n;
} table;

static const char *lookup(const char *name, void *user) {
  table *t = user;
  for (size_t i = 0; i < t->n; i++) {
    if (strcmp(t->names[i], name) == 0) {
      return t->values[i];
    }
  }
  return NULL;
}

static int names_a_variable(const char *msg) {
  static const char *const names[] = {
      "DLCP_", "RANK", "WORLD_SIZE", "MASTER_", "OMPI_COMM_WORLD_", "PMI_",
      "SLURM_"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strstr(msg, names[i]) != NULL) {
      return 1;
    }
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  char *copy = malloc(size + 1);
  table t;
  dlcp_rt_env env;
  dlcp_errbuf eb;
  char *line;
  char *save = NULL;
  int rv;

  if (buf == NULL || copy == NULL) {
    free(buf);
    free(copy);
    return 0;
  }
  memcpy(buf, data, size);
  buf[size] = '\0';
  memcpy(copy, buf, size + 1);
  memset(&t, 0, sizeof(t));
  /* Lines split in |copy| (kept whole for check_unknown); the names and
   * values are cut in |buf|. */
  for (line = strtok_r(buf, "\n", &save); line != NULL && t.n < MAX_VARS;
       line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (eq == NULL) {
      continue;
    }
    t.lines[t.n] = copy + (line - buf);
    *eq = '\0';
    t.names[t.n] = line;
    t.values[t.n] = eq + 1;
    t.n++;
  }
  for (size_t i = 0; i < t.n; i++) {
    char *nl = strchr(t.lines[i], '\n');
    if (nl != NULL) {
      *nl = '\0';
    }
  }

  dlcp_errbuf_clear(&eb);
  rv = dlcp_rt_env_load(&env, lookup, &t, &eb);
  if (rv == 0) {
    if (env.world_size < 1 || env.rank >= env.world_size || env.paths < 1 ||
        env.paths > DLCP_ENV_MAX_PATHS ||
        (env.world_size > 1 && env.master_port == 0)) {
      abort();
    }
  } else if (rv != DLCP_ERR_CONFIG || !names_a_variable(eb.msg)) {
    abort();
  }
  dlcp_errbuf_clear(&eb);
  rv = dlcp_rt_env_check_unknown(t.lines, &eb);
  if (rv != 0 && (rv != DLCP_ERR_CONFIG || !names_a_variable(eb.msg))) {
    abort();
  }
  free(buf);
  free(copy);
  return 0;
}
