/*
 * fuzz_scenario.c: libFuzzer target for the simulator's scenario parser,
 * dlcp_sim_scenario_load() (libyaml underneath, then every field checked
 * with its unit and range).  The input is the YAML document, optionally
 * followed by NUL-separated "--set" overrides ("dotted.key=value", up to
 * four), as dlcp-sim takes them.
 *
 * Invariants (abort on violation): the result is 0, DLCP_ERR_CONFIG or
 * DLCP_ERR_NOMEM; a refusal always explains itself, naming where:
 * "fuzz.yaml:LINE: ..." or "--set:N: ..." (file:line, as every config
 * error must); an accepted scenario frees cleanly.  ASan/UBSan catch the
 * rest.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scenario.h"
#include "sim/sim.h"

#define MAX_SETS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* names_a_place: |err| starts with "fuzz.yaml:N:" or "--set:N:". */
static int names_a_place(const char *err) {
  const char *p;
  if (strncmp(err, "fuzz.yaml:", 10) == 0) {
    p = err + 10;
  } else if (strncmp(err, "--set:", 6) == 0) {
    p = err + 6;
  } else {
    return 0;
  }
  if (!isdigit((unsigned char)*p)) {
    return 0;
  }
  while (isdigit((unsigned char)*p)) {
    p++;
  }
  return *p == ':';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A private NUL-terminated copy: the parser gets (text, len), the sets
   * are C strings. */
  char *buf = malloc(size + 1);
  const char *sets[MAX_SETS];
  size_t nsets = 0;
  size_t doc_len;
  dlcp_sim_config cfg;
  char err[512];
  int rv;

  if (buf == NULL) {
    return 0;
  }
  memcpy(buf, data, size);
  buf[size] = '\0';
  doc_len = strlen(buf);
  for (size_t i = doc_len; i < size && nsets < MAX_SETS; i++) {
    if (buf[i] == '\0') {
      sets[nsets++] = buf + i + 1;
    }
  }
  rv = dlcp_sim_scenario_load(&cfg, buf, doc_len, "fuzz.yaml", sets, nsets,
                              err, sizeof(err));
  if (rv == 0) {
    dlcp_sim_config_free(&cfg);
  } else if (rv == DLCP_ERR_CONFIG) {
    if (memchr(err, '\0', sizeof(err)) == NULL || !names_a_place(err)) {
      abort();
    }
  } else if (rv != DLCP_ERR_NOMEM) {
    abort();
  }
  free(buf);
  return 0;
}
