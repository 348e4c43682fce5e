/*
 * profile.c: reading a training profile (workloads/profiles/<model>.csv,
 * written by scripts/extract-profiles.py) into a PS job's tensor list.
 *
 * Format: lines starting with '#' are comments (the first one carries
 * "model=<name>"), then the header
 *   tensor,name,elements,bytes,fwd_us,bwd_us
 * and one row per parameter tensor in forward order.  Every row is
 * checked: consecutive indices from 0, bytes = 4 x elements (float32
 * gradients), finite non-negative times.  The forward pass time is the sum
 * of fwd_us; each tensor keeps the backward time of its layer.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#ifndef DLCP_SIM_PROFILE_DIR
#define DLCP_SIM_PROFILE_DIR "workloads/profiles"
#endif

const char dlcp_sim_profile_dir[] = DLCP_SIM_PROFILE_DIR;

#define HEADER "tensor,name,elements,bytes,fwd_us,bwd_us"

static int bad(char *err, size_t errlen, const char *path, unsigned line,
               const char *what) {
  snprintf(err, errlen, "%s:%u: %s", path, line, what);
  return DLCP_ERR_CONFIG;
}

/* Parses one data row; |line| is modified. */
static int parse_row(char *line, uint64_t want_index, uint64_t *bytes,
                     double *fwd_us, double *bwd_us) {
  char *field[6];
  size_t n = 0;
  for (char *p = line; n < 6; n++) {
    field[n] = p;
    char *comma = strchr(p, ',');
    if (!comma) {
      n++;
      break;
    }
    *comma = '\0';
    p = comma + 1;
  }
  if (n != 6 || strchr(field[5], ',')) {
    return -1;
  }
  char *end;
  errno = 0;
  unsigned long long idx = strtoull(field[0], &end, 10);
  if (*end || errno || idx != want_index) {
    return -1;
  }
  unsigned long long elems = strtoull(field[2], &end, 10);
  if (*end || errno) {
    return -1;
  }
  unsigned long long b = strtoull(field[3], &end, 10);
  if (*end || errno || b == 0 || b != 4 * elems) {
    return -1;
  }
  *fwd_us = strtod(field[4], &end);
  if (*end || errno || !isfinite(*fwd_us) || *fwd_us < 0) {
    return -1;
  }
  *bwd_us = strtod(field[5], &end);
  if (*end || errno || !isfinite(*bwd_us) || *bwd_us < 0) {
    return -1;
  }
  *bytes = b;
  return 0;
}

int dlcp_sim_profile_load(dlcp_sim_ps_spec *ps, const char *path, char *err,
                          size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return DLCP_ERR_SYSTEM;
  }
  char line[1024];
  unsigned lineno = 0;
  bool header = false;
  uint32_t n = 0, cap = 0;
  uint64_t *bytes = NULL;
  dlcp_sim_ps *bwd = NULL;
  double fwd_total = 0;
  int rv = 0;
  ps->profile[0] = '\0';
  while (rv == 0 && fgets(line, sizeof(line), f)) {
    lineno++;
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] != '\n' && !feof(f)) {
      rv = bad(err, errlen, path, lineno, "line longer than 1023 bytes");
      break;
    }
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '#') {
      const char *m = strstr(line, "model=");
      if (m && ps->profile[0] == '\0') {
        snprintf(ps->profile, sizeof(ps->profile), "%.*s",
                 (int)strcspn(m + 6, " "), m + 6);
      }
      continue;
    }
    if (!header) {
      header = true;
      if (strcmp(line, HEADER) != 0) {
        rv = bad(err, errlen, path, lineno, "expected the header '" HEADER
                 "'");
      }
      continue;
    }
    uint64_t b;
    double fw, bw;
    if (parse_row(line, n, &b, &fw, &bw) != 0) {
      rv = bad(err, errlen, path, lineno,
               "expected 'index,name,elements,bytes,fwd_us,bwd_us' with "
               "consecutive indices, bytes = 4 x elements > 0 and times "
               ">= 0");
      break;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      uint64_t *nb = realloc(bytes, cap * sizeof(*nb));
      if (!nb) {
        rv = DLCP_ERR_NOMEM;
        break;
      }
      bytes = nb;
      dlcp_sim_ps *nw = realloc(bwd, cap * sizeof(*nw));
      if (!nw) {
        rv = DLCP_ERR_NOMEM;
        break;
      }
      bwd = nw;
    }
    bytes[n] = b;
    bwd[n] = (dlcp_sim_ps)llround(bw * 1e6);
    fwd_total += fw;
    n++;
  }
  fclose(f);
  if (rv == 0 && n == 0) {
    rv = bad(err, errlen, path, lineno, "expected at least one tensor row");
  }
  if (rv != 0) {
    free(bytes);
    free(bwd);
    return rv;
  }
  free(ps->tensor_bytes);
  free(ps->tensor_bwd_ps);
  ps->tensor_bytes = bytes;
  ps->tensor_bwd_ps = bwd;
  ps->ntensors = n;
  ps->forward_ps = (dlcp_sim_ps)llround(fwd_total * 1e6);
  ps->model_bytes = 0;
  for (uint32_t i = 0; i < n; i++) {
    ps->model_bytes += bytes[i];
  }
  if (ps->profile[0] == '\0') {
    snprintf(ps->profile, sizeof(ps->profile), "profile");
  }
  return 0;
}
