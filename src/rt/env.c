/*
 * env.c: reading and validating the environment.  Every variable goes
 * through one of a few strict parsers (whole string, decimal, in range;
 * probability as fraction or percentage; host name), each of which
 * produces the error message itself, so every message has the same shape:
 *   NAME='value': expected <what>
 * Values are only read here; nothing is resolved or opened, so loading
 * the environment cannot block.
 */
#include "rt/env.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcp/dlcp_types.h"
#include "wire/wire.h"

#define MAX_TIMEOUT_MS 86400000u
#define MAX_DELAY_US 10000000u

/* Every DLCP_* variable dlcp reads; dlcp_rt_env_check_unknown rejects the
 * others.  Keep in step with env.h and docs/runtime.md. */
static const char *const known_dlcp_vars[] = {
    "DLCP_TIMEOUT_MS",  "DLCP_RDZV_TIMEOUT_MS",
    "DLCP_PATHS",       "DLCP_SEGMENT",
    "DLCP_ADDR",        "DLCP_JOB",         "DLCP_JOB_SECRET",
    "DLCP_TOPO",        "DLCP_FAULT_DROP",
    "DLCP_FAULT_DUP",   "DLCP_FAULT_REORDER",
    "DLCP_FAULT_DELAY", "DLCP_FAULT_DELAY_US",
    "DLCP_FAULT_SEED",  "DLCP_FAULT_PAUSE", "DLCP_FAULT_STRAGGLE",
    "DLCP_FAULT_CTL_RESET",
    "DLCP_SOURCE_DIR",  "DLCP_RATE_GBPS",
    "DLCP_RTT_LOW_US",  "DLCP_RTT_HIGH_US", "DLCP_QUEUE_PKTS",
    "DLCP_WINDOW_BYTES",
    "DLCP_EAGER_BYTES", "DLCP_SPIN_US",
    "DLCP_SHM",         "DLCP_FLIGHT_DIR",  "DLCP_CONTROL_DATAGRAMS",
    /* Read elsewhere: the INA runtime, the Python package and its build. */
    "DLCP_SWITCH",      "DLCP_INA_CC",      "DLCP_INA_CLAIM",
    "DLCP_INA_CHAIN",   "DLCP_INA_HOST_REDUCE", "DLCP_INA_LEAVES",
    "DLCP_INA_MIN_BYTES", "DLCP_INA_TREES",
    "DLCP_INA_WINDOW",
    "DLCP_LIBRARY",     "DLCP_BUILD_DIR",
    "DLCP_TORCH_BACKEND",
    NULL};

typedef struct reader {
  dlcp_rt_env_lookup lookup;
  void *user;
  dlcp_errbuf *eb;
} reader;

static const char *getenv_lookup(const char *name, void *user) {
  (void)user;
  return getenv(name);
}

static const char *get(const reader *rd, const char *name) {
  return rd->lookup(name, rd->user);
}

static int bad(const reader *rd, const char *name, const char *value,
               const char *expected) {
  /* %.80s: a runaway value must not crowd out what was expected. */
  return dlcp_errbuf_set(rd->eb, DLCP_ERR_CONFIG, "%s='%.80s': expected %s",
                         name, value, expected);
}

/* parse_u64_text parses all of |s| as a decimal without sign or spaces. */
static int parse_u64_text(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  if (!isdigit((unsigned char)s[0])) {
    return -1;
  }
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') {
    return -1;
  }
  *out = (uint64_t)v;
  return 0;
}

/* read_u64 reads variable |name| into |*out| if it is set; |what| names the
 * unit ("milliseconds").  An unset variable leaves |*out| untouched. */
static int read_u64(const reader *rd, const char *name, const char *what,
                    uint64_t min, uint64_t max, uint64_t *out) {
  const char *s = get(rd, name);
  uint64_t v;
  char expected[128];
  if (s == NULL) {
    return 0;
  }
  if (parse_u64_text(s, &v) != 0 || v < min || v > max) {
    snprintf(expected, sizeof(expected), "%s in %" PRIu64 "..%" PRIu64, what,
             min, max);
    return bad(rd, name, s, expected);
  }
  *out = v;
  return 0;
}

static int read_u32(const reader *rd, const char *name, const char *what,
                    uint32_t min, uint32_t max, uint32_t *out) {
  uint64_t v = *out;
  int rv = read_u64(rd, name, what, min, max, &v);
  if (rv == 0) {
    *out = (uint32_t)v;
  }
  return rv;
}

/* read_flag reads 0 or 1. */
static int read_flag(const reader *rd, const char *name, bool *out) {
  uint32_t v = *out ? 1 : 0;
  int rv = read_u32(rd, name, "0 or 1", 0, 1, &v);
  *out = v != 0;
  return rv;
}

/* read_prob reads a probability written "0.05" or "5%". */
static int read_prob(const reader *rd, const char *name, double *out) {
  const char *s = get(rd, name);
  char *end;
  double v;
  if (s == NULL) {
    return 0;
  }
  errno = 0;
  v = strtod(s, &end);
  if (end == s || errno != 0 || isspace((unsigned char)s[0])) {
    goto fail;
  }
  if (*end == '%') {
    v /= 100.0;
    end++;
  }
  if (*end != '\0' || !isfinite(v) || v < 0.0 || v > 1.0) {
    goto fail;
  }
  *out = v;
  return 0;
fail:
  return bad(rd, name, s,
             "a probability in [0, 1], as a fraction (0.01) or a "
             "percentage (1%)");
}

/* read_rate reads a rate in Gbps, a positive decimal such as "25" or
 * "2.5". */
static int read_rate(const reader *rd, const char *name, double *out) {
  const char *s = get(rd, name);
  char *end;
  double v;
  if (s == NULL) {
    return 0;
  }
  errno = 0;
  v = strtod(s, &end);
  if (end == s || errno != 0 || *end != '\0' || isspace((unsigned char)s[0]) ||
      !isfinite(v) || v < 0.001 || v > 10000.0) {
    return bad(rd, name, s, "a rate in Gbps between 0.001 and 10000");
  }
  *out = v;
  return 0;
}

/* read_host copies a host name or numeric address into |out|. */
static int read_host(const reader *rd, const char *name, char *out) {
  const char *s = get(rd, name);
  size_t i;
  size_t n;
  if (s == NULL) {
    return 0;
  }
  n = strlen(s);
  if (n == 0 || n > DLCP_ENV_HOST_MAX) {
    goto fail;
  }
  for (i = 0; i < n; i++) {
    if (isspace((unsigned char)s[i]) || !isprint((unsigned char)s[i])) {
      goto fail;
    }
  }
  memcpy(out, s, n + 1);
  return 0;
fail:
  return bad(rd, name, s,
             "a host name or IP address of 1..255 characters without "
             "spaces");
}

/* read_dir reads a directory path (the directory itself is checked when
 * it is written to). */
static int read_dir(const reader *rd, const char *name, char *out,
                    size_t len) {
  const char *s = get(rd, name);
  size_t n;
  if (s == NULL) {
    return 0;
  }
  n = strlen(s);
  if (n == 0 || n >= len) {
    return bad(rd, name, s, "a directory path of 1..255 characters");
  }
  memcpy(out, s, n + 1);
  return 0;
}

/* A launcher, by the variables that number its processes.  torchrun's
 * (also dlcp-run's and dlcp-testbed's) come with the rendezvous address;
 * Open MPI's mpirun, MPICH's mpiexec (Hydra, as Intel MPI's and
 * MVAPICH2's: PMI_RANK/PMI_SIZE) and Slurm's srun know none, so there
 * MASTER_ADDR names rank 0's host (Slurm: else the node srun ran on) and
 * MASTER_PORT defaults to torch.distributed's.  The Python package's
 * _launcher.py follows the same rules, for torch's own env://
 * initialisation. */
typedef struct launcher {
  const char *name;
  const char *rank_var;
  const char *size_var;
  const char *addr_var; /* rank 0's host when MASTER_ADDR is unset */
  /* NULL for a launcher that sets MASTER_ADDR and MASTER_PORT itself;
   * else what to do when neither MASTER_ADDR nor |addr_var| is set (and
   * MASTER_PORT defaults). */
  const char *no_addr_hint;
} launcher;

enum { LAUNCHER_PMI = 2, LAUNCHER_SLURM = 3 };

/* In order of precedence: torchrun's first, so dlcp-run started under
 * srun numbers its own ranks; an MPI launcher's before srun's, because
 * under mpiexec inside an allocation every rank inherits the batch
 * step's SLURM_PROCID. */
static const launcher launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", NULL, NULL},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL,
     "mpirun gives none: pass it, e.g. mpirun -x MASTER_ADDR=host0"},
    [LAUNCHER_PMI] = {"MPICH", "PMI_RANK", "PMI_SIZE", NULL,
                      "mpiexec gives none: pass it, e.g. mpiexec -genv "
                      "MASTER_ADDR host0"},
    [LAUNCHER_SLURM] = {"Slurm", "SLURM_PROCID", "SLURM_NTASKS",
                        "SLURM_LAUNCH_NODE_IPADDR",
                        "nor is SLURM_LAUNCH_NODE_IPADDR set"},
};

static bool same_var(const reader *rd, const char *a, const char *b) {
  const char *va = get(rd, a);
  const char *vb = get(rd, b);
  return va != NULL && vb != NULL && strcmp(va, vb) == 0;
}

/* srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE too, to its own numbers:
 * such a process is srun's, and takes srun's address default. */
static bool started_by_srun(const reader *rd) {
  return same_var(rd, "PMI_RANK", "SLURM_PROCID") &&
         same_var(rd, "PMI_SIZE", "SLURM_NTASKS");
}

/* The first launcher whose variables are set, or NULL. */
static const launcher *detect_launcher(const reader *rd) {
  for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
    const launcher *l = &launchers[i];
    if (i == LAUNCHER_PMI && started_by_srun(rd)) {
      continue;
    }
    if (get(rd, l->rank_var) != NULL || get(rd, l->size_var) != NULL) {
      return l;
    }
  }
  return NULL;
}

static int load_rank(const reader *rd, const launcher *l, dlcp_rt_env *env) {
  const char *rank_s = get(rd, l->rank_var);
  const char *size_s = get(rd, l->size_var);
  int rv;

  if (size_s == NULL || rank_s == NULL) {
    return dlcp_errbuf_set(rd->eb, DLCP_ERR_CONFIG,
                           "%s='%.80s' is set but %s is not: expected both "
                           "(as %s sets them)",
                           size_s ? l->size_var : l->rank_var,
                           size_s ? size_s : rank_s,
                           size_s ? l->rank_var : l->size_var, l->name);
  }
  rv = read_u32(rd, l->size_var, "an integer", 1, DLCP_ENV_MAX_WORLD,
                &env->world_size);
  if (rv != 0) {
    return rv;
  }
  rv = read_u32(rd, l->rank_var, "an integer", 0, env->world_size - 1,
                &env->rank);
  if (rv != 0) {
    return dlcp_errbuf_prefix(rd->eb, rv, "%s=%" PRIu32, l->size_var,
                              env->world_size);
  }
  return 0;
}

static int load_world(const reader *rd, dlcp_rt_env *env) {
  const launcher *l = detect_launcher(rd);
  uint64_t port = 0;
  int rv = 0;

  strcpy(env->master_addr, "127.0.0.1");
  if (l == NULL) {
    /* Not launched by a launcher: a world of one needs no rendezvous. */
    env->rank = 0;
    env->world_size = 1;
  } else if ((rv = load_rank(rd, l, env)) != 0) {
    return rv;
  }
  if (get(rd, "MASTER_ADDR") != NULL) {
    rv = read_host(rd, "MASTER_ADDR", env->master_addr);
  } else if (l != NULL && l->addr_var != NULL && get(rd, l->addr_var)) {
    rv = read_host(rd, l->addr_var, env->master_addr);
  } else if (env->world_size > 1) {
    return dlcp_errbuf_set(rd->eb, DLCP_ERR_CONFIG,
                           "MASTER_ADDR is not set: expected the address of "
                           "rank 0 (%s=%" PRIu32 "%s%s)",
                           l->size_var, env->world_size,
                           l->no_addr_hint ? "; " : "",
                           l->no_addr_hint ? l->no_addr_hint : "");
  }
  if (rv != 0) {
    return rv;
  }
  if (env->world_size > 1 && get(rd, "MASTER_PORT") == NULL) {
    if (l->no_addr_hint == NULL) {
      return dlcp_errbuf_set(rd->eb, DLCP_ERR_CONFIG,
                             "MASTER_PORT is not set: expected the TCP port "
                             "rank 0 listens on (%s=%" PRIu32 ")",
                             l->size_var, env->world_size);
    }
    port = DLCP_ENV_DEFAULT_MASTER_PORT;
  }
  rv = read_u64(rd, "MASTER_PORT", "a TCP port", 1, 65535, &port);
  if (rv != 0) {
    return rv;
  }
  env->master_port = (uint16_t)port;
  return 0;
}

static int load_segment(const reader *rd, dlcp_rt_env *env) {
  const char *s = get(rd, "DLCP_SEGMENT");
  uint64_t v;
  char expected[96];
  env->segment_bytes = 0;
  if (s == NULL || strcmp(s, "auto") == 0) {
    return 0;
  }
  if (parse_u64_text(s, &v) != 0 || v < DLCP_WIRE_MIN_SEG ||
      v > DLCP_WIRE_MAX_SEG) {
    snprintf(expected, sizeof(expected),
             "\"auto\" or a size in bytes in %u..%u", DLCP_WIRE_MIN_SEG,
             DLCP_WIRE_MAX_SEG);
    return bad(rd, "DLCP_SEGMENT", s, expected);
  }
  env->segment_bytes = (uint32_t)v;
  return 0;
}

/* DLCP_TOPO is "flat", "rack:N" (N consecutive ranks per rack) or this
 * rank's location labels, innermost first: "rack3/pod1". */
static int parse_topo(const reader *rd, dlcp_rt_env *env, const char *s) {
  uint64_t v;
  char expected[256];
  env->topo = DLCP_TOPO_FLAT;
  env->ranks_per_rack = env->world_size;
  env->topo_levels = 0;
  if (s == NULL || strcmp(s, "flat") == 0) {
    return 0;
  }
  snprintf(expected, sizeof(expected),
           "\"flat\", \"rack:N\" with N ranks per rack in 1..%" PRIu32
           " (WORLD_SIZE), or location labels innermost first such as "
           "\"rack0/pod1\" (1..%u levels of [A-Za-z0-9_.-], at most %u "
           "characters each)",
           env->world_size, DLCP_TOPO_MAX_LEVELS, DLCP_TOPO_LABEL_MAX);
  if (strncmp(s, "rack:", 5) == 0) {
    if (parse_u64_text(s + 5, &v) != 0 || v < 1 || v > env->world_size) {
      return bad(rd, "DLCP_TOPO", s, expected);
    }
    env->topo = DLCP_TOPO_RACK;
    env->ranks_per_rack = (uint32_t)v;
    return 0;
  }
  const char *p = s;
  for (;;) {
    size_t n = strcspn(p, "/");
    if (n == 0 || n > DLCP_TOPO_LABEL_MAX ||
        env->topo_levels == DLCP_TOPO_MAX_LEVELS) {
      return bad(rd, "DLCP_TOPO", s, expected);
    }
    for (size_t i = 0; i < n; i++) {
      char ch = p[i];
      if (!isalnum((unsigned char)ch) && ch != '_' && ch != '.' &&
          ch != '-') {
        return bad(rd, "DLCP_TOPO", s, expected);
      }
    }
    memcpy(env->topo_labels[env->topo_levels], p, n);
    env->topo_labels[env->topo_levels][n] = '\0';
    env->topo_levels++;
    if (p[n] == '\0') {
      break;
    }
    p += n + 1;
  }
  env->topo = DLCP_TOPO_LABELS;
  return 0;
}

static int load_topo(const reader *rd, dlcp_rt_env *env) {
  return parse_topo(rd, env, get(rd, "DLCP_TOPO"));
}

int dlcp_rt_env_parse_topo(dlcp_rt_env *env, const char *value,
                           dlcp_errbuf *eb) {
  reader rd = {.lookup = getenv_lookup, .user = NULL, .eb = eb};
  return parse_topo(&rd, env, value);
}

/* parse_entry parses |nfields| colon-separated integers ("RANK:AFTER_MS:
 * FOR_MS", "RANK:MS") from [s, end). */
static int parse_entry(const char *s, const char *end, uint64_t *v,
                       int nfields) {
  char field[24];
  int i;
  for (i = 0; i < nfields; i++) {
    const char *stop =
        i < nfields - 1 ? memchr(s, ':', (size_t)(end - s)) : end;
    size_t n;
    if (stop == NULL) {
      return -1;
    }
    n = (size_t)(stop - s);
    if (n == 0 || n >= sizeof(field)) {
      return -1;
    }
    memcpy(field, s, n);
    field[n] = '\0';
    if (parse_u64_text(field, &v[i]) != 0) {
      return -1;
    }
    s = stop + 1;
  }
  return 0;
}

/* A per-rank fault list "RANK:V1[:V2][,...]" in |name| (|fields| names
 * its entries, "RANK:MS"): every entry is checked, at most one per rank;
 * this rank's values land in |self| (the |nvalues| after RANK), untouched
 * when it has no entry. */
static int load_rank_list(const reader *rd, const dlcp_rt_env *env,
                          const char *name, const char *fields, int nvalues,
                          uint32_t *self) {
  const char *s = get(rd, name);
  char expected[192];
  if (s == NULL || s[0] == '\0') {
    return 0;
  }
  snprintf(expected, sizeof(expected),
           "a comma-separated list of %s with RANK in 0..%" PRIu32
           " and the other values in 0..%u, at most one entry per rank",
           fields, env->world_size - 1, MAX_TIMEOUT_MS);
  int seen_self = 0;
  for (const char *p = s; *p != '\0';) {
    const char *comma = strchr(p, ',');
    const char *end = comma != NULL ? comma : p + strlen(p);
    uint64_t v[3];
    int ok = parse_entry(p, end, v, 1 + nvalues) == 0 &&
             v[0] < env->world_size && (comma == NULL || comma[1] != '\0');
    for (int i = 1; ok && i <= nvalues; i++) {
      ok = v[i] <= MAX_TIMEOUT_MS;
    }
    if (!ok || (v[0] == env->rank && seen_self++)) {
      return bad(rd, name, s, expected);
    }
    for (int i = 0; v[0] == env->rank && i < nvalues; i++) {
      self[i] = (uint32_t)v[1 + i];
    }
    p = comma != NULL ? comma + 1 : end;
  }
  return 0;
}

static int load_pause(const reader *rd, dlcp_rt_env *env) {
  uint32_t v[2] = {env->fault.pause_after_ms, env->fault.pause_for_ms};
  int rv = load_rank_list(rd, env, "DLCP_FAULT_PAUSE", "RANK:AFTER_MS:FOR_MS",
                          2, v);
  env->fault.pause_after_ms = v[0];
  env->fault.pause_for_ms = v[1];
  return rv;
}

/* DLCP_FAULT_STRAGGLE: a straggler's slow step in every collective (see
 * env.h). */
static int load_straggle(const reader *rd, dlcp_rt_env *env) {
  return load_rank_list(rd, env, "DLCP_FAULT_STRAGGLE", "RANK:MS", 1,
                        &env->fault.straggle_ms);
}

/* DLCP_FAULT_CTL_RESET: control connections reset as they are accepted
 * (see env.h). */
static int load_ctl_reset(const reader *rd, dlcp_rt_env *env) {
  return load_rank_list(rd, env, "DLCP_FAULT_CTL_RESET", "RANK:COUNT", 1,
                        &env->fault.ctl_resets);
}

static int load_fault(const reader *rd, dlcp_rt_env *env) {
  dlcp_rt_fault *f = &env->fault;
  int rv;
  if ((rv = read_prob(rd, "DLCP_FAULT_DROP", &f->drop)) != 0 ||
      (rv = read_prob(rd, "DLCP_FAULT_DUP", &f->dup)) != 0 ||
      (rv = read_prob(rd, "DLCP_FAULT_REORDER", &f->reorder)) != 0 ||
      (rv = read_prob(rd, "DLCP_FAULT_DELAY", &f->delay)) != 0 ||
      (rv = read_u32(rd, "DLCP_FAULT_DELAY_US", "a delay in microseconds", 1,
                     MAX_DELAY_US, &f->delay_us)) != 0 ||
      (rv = read_u64(rd, "DLCP_FAULT_SEED", "an integer", 0, UINT64_MAX,
                     &f->seed)) != 0) {
    return rv;
  }
  if ((rv = load_pause(rd, env)) != 0 || (rv = load_straggle(rd, env)) != 0) {
    return rv;
  }
  return load_ctl_reset(rd, env);
}

/* DLCP_JOB_SECRET: kept as bytes; an error never shows the value. */
static int load_secret(const reader *rd, dlcp_rt_env *env) {
  const char *s = get(rd, "DLCP_JOB_SECRET");
  size_t n = s != NULL ? strlen(s) : 0;
  env->job_secret_len = 0;
  if (s == NULL) {
    return 0;
  }
  if (n < DLCP_AUTH_SECRET_MIN || n > DLCP_AUTH_SECRET_MAX) {
    return dlcp_errbuf_set(rd->eb, DLCP_ERR_CONFIG,
                           "DLCP_JOB_SECRET (%zu bytes, not shown): expected "
                           "%u..%u bytes, the same on every rank",
                           n, DLCP_AUTH_SECRET_MIN, DLCP_AUTH_SECRET_MAX);
  }
  memcpy(env->job_secret, s, n);
  env->job_secret_len = (uint32_t)n;
  return 0;
}

/* default_job hashes MASTER_ADDR:MASTER_PORT (FNV-1a), which every rank
 * of a job sees identically, into a nonzero token. */
static uint32_t default_job(const dlcp_rt_env *env) {
  uint32_t h = 2166136261u;
  char text[DLCP_ENV_HOST_MAX + 8];
  size_t i;
  snprintf(text, sizeof(text), "%s:%u", env->master_addr,
           (unsigned)env->master_port);
  for (i = 0; text[i] != '\0'; i++) {
    h ^= (uint8_t)text[i];
    h *= 16777619u;
  }
  return h != 0 ? h : 1;
}

int dlcp_rt_env_load(dlcp_rt_env *env, dlcp_rt_env_lookup lookup, void *user,
                     dlcp_errbuf *eb) {
  reader rd;
  int rv;
  rd.lookup = lookup != NULL ? lookup : getenv_lookup;
  rd.user = user;
  rd.eb = eb;
  dlcp_rt_env_defaults(env);

  if ((rv = load_world(&rd, env)) != 0 ||
      (rv = read_u32(&rd, "DLCP_TIMEOUT_MS", "a timeout in milliseconds", 1,
                     MAX_TIMEOUT_MS, &env->timeout_ms)) != 0 ||
      (rv = read_u32(&rd, "DLCP_RDZV_TIMEOUT_MS", "a timeout in milliseconds",
                     1, MAX_TIMEOUT_MS, &env->rdzv_timeout_ms)) != 0 ||
      (rv = read_u32(&rd, "DLCP_PATHS", "an integer", 1, DLCP_ENV_MAX_PATHS,
                     &env->paths)) != 0 ||
      (rv = load_segment(&rd, env)) != 0 ||
      (rv = read_host(&rd, "DLCP_ADDR", env->local_addr)) != 0 ||
      (rv = read_rate(&rd, "DLCP_RATE_GBPS", &env->rate_gbps)) != 0 ||
      (rv = read_u64(&rd, "DLCP_WINDOW_BYTES", "a byte count (0 = no window)",
                     0, UINT64_C(1) << 40, &env->window_bytes)) != 0 ||
      (rv = read_u32(&rd, "DLCP_EAGER_BYTES", "a byte count (0 = never)", 0,
                     DLCP_RT_MAX_EAGER_BYTES, &env->eager_bytes)) != 0 ||
      (rv = read_u32(&rd, "DLCP_SPIN_US", "a time in microseconds", 0,
                     DLCP_RT_MAX_SPIN_US, &env->spin_us)) != 0 ||
      (rv = read_flag(&rd, "DLCP_SHM", &env->shm)) != 0 ||
      (rv = read_flag(&rd, "DLCP_CONTROL_DATAGRAMS",
                      &env->control_datagrams)) != 0 ||
      (rv = read_dir(&rd, "DLCP_FLIGHT_DIR", env->flight_dir,
                     sizeof(env->flight_dir))) != 0 ||
      (rv = read_u32(&rd, "DLCP_RTT_LOW_US", "a time in microseconds", 1,
                     10000000, &env->rtt_low_us)) != 0 ||
      (rv = read_u32(&rd, "DLCP_RTT_HIGH_US", "a time in microseconds", 1,
                     10000000, &env->rtt_high_us)) != 0 ||
      (rv = read_u32(&rd, "DLCP_QUEUE_PKTS", "a packet count (0 = off)", 0,
                     1000000, &env->queue_pkts)) != 0 ||
      (rv = load_topo(&rd, env)) != 0 || (rv = load_fault(&rd, env)) != 0 ||
      (rv = load_secret(&rd, env)) != 0) {
    return rv;
  }
  env->job = default_job(env);
  return read_u32(&rd, "DLCP_JOB", "a job token", 1, UINT32_MAX, &env->job);
}

int dlcp_rt_env_check_unknown(char *const *envp, dlcp_errbuf *eb) {
  size_t i;
  size_t k;
  for (i = 0; envp != NULL && envp[i] != NULL; i++) {
    const char *e = envp[i];
    const char *eq = strchr(e, '=');
    size_t n = eq != NULL ? (size_t)(eq - e) : strlen(e);
    int known = 0;
    if (strncmp(e, "DLCP_", 5) != 0) {
      continue;
    }
    for (k = 0; known_dlcp_vars[k] != NULL; k++) {
      if (strlen(known_dlcp_vars[k]) == n &&
          strncmp(known_dlcp_vars[k], e, n) == 0) {
        known = 1;
        break;
      }
    }
    if (!known) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "unknown variable %.*s: expected one of the "
                             "DLCP_* options listed in docs/runtime.md",
                             (int)(n > 80 ? 80 : n), e);
    }
  }
  return 0;
}
