/*
 * algo.c: the one table of collective algorithm names.  Everything that
 * prints or parses an algorithm (plan dumps, the runtime's
 * dlcp_algo_str, scenario files, simulator CSVs, command lines) goes
 * through it, so a new algorithm is named once.
 */
#include "coll/coll.h"

#include <string.h>

typedef struct algo_names {
  const char *name;       /* printed by the runtime and in plan dumps */
  const char *short_name; /* scenario files, simulator CSVs, CLIs */
} algo_names;

static const algo_names kAlgoNames[] = {
    [DLCP_ALGO_AUTO] = {"auto", "auto"},
    [DLCP_ALGO_RING] = {"ring", "ring"},
    [DLCP_ALGO_RING_BYPASS] = {"ring_bypass", "ring_bypass"},
    [DLCP_ALGO_PS] = {"ps", "ps"},
    [DLCP_ALGO_HALVING_DOUBLING] = {"halving_doubling", "hd"},
    [DLCP_ALGO_RAT] = {"rat", "rat"},
    [DLCP_ALGO_DIRECT] = {"direct", "direct"},
    [DLCP_ALGO_RECURSIVE_DOUBLING] = {"recursive_doubling", "rd"},
    [DLCP_ALGO_INA] = {"ina", "ina"},
    [DLCP_ALGO_RA_INA] = {"ra_ina", "ra_ina"},
};

_Static_assert(sizeof(kAlgoNames) / sizeof(kAlgoNames[0]) == DLCP_COLL_NALGOS,
               "every dlcp_algo has its names");

const char *dlcp_algo_name(dlcp_algo algo) {
  return (unsigned)algo < DLCP_COLL_NALGOS ? kAlgoNames[algo].name : "?";
}

const char *dlcp_algo_short_name(dlcp_algo algo) {
  return (unsigned)algo < DLCP_COLL_NALGOS ? kAlgoNames[algo].short_name
                                           : "?";
}

int dlcp_algo_parse(const char *name, dlcp_algo *algo) {
  for (unsigned a = 0; a < DLCP_COLL_NALGOS; a++) {
    if (strcmp(name, kAlgoNames[a].name) == 0 ||
        strcmp(name, kAlgoNames[a].short_name) == 0) {
      *algo = (dlcp_algo)a;
      return 0;
    }
  }
  return DLCP_ERR_INVALID_ARGUMENT;
}
