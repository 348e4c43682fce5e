/*
 * scenario.h: YAML scenario files and --set overrides -> dlcp_sim_config.
 *
 * The format is documented in docs/simulator.md.  Every problem is reported
 * as one line, "FILE:LINE: field 'a.b': expected ...", where FILE is the
 * scenario path ("<default>" for the embedded scenario, "--set" for a
 * command-line override, whose LINE is the override's position).
 */
#ifndef DLCP_SIM_SCENARIO_H
#define DLCP_SIM_SCENARIO_H

#include <stddef.h>

#include "sim/sim.h"

/* The embedded default scenario: the MLT seed's 144-host leaf-spine with
 * parameter-server traffic, scaled to run in seconds. */
extern const char dlcp_sim_default_scenario[];

/*
 * dlcp_sim_scenario_load resets |cfg| to the defaults, then applies the
 * YAML document |text| (|len| bytes, named |file| in messages; NULL text
 * means no document), then each override in |sets| ("dotted.key=value",
 * the value itself parsed as YAML).  Returns 0, or DLCP_ERR_CONFIG with the
 * message in |err| (|cfg| then holds nothing that needs freeing), or
 * DLCP_ERR_NOMEM.  On success free |cfg| with dlcp_sim_config_free.
 */
int dlcp_sim_scenario_load(dlcp_sim_config *cfg, const char *text, size_t len,
                           const char *file, const char *const *sets,
                           size_t nsets, char *err, size_t errlen);

/* Reads |path| and calls dlcp_sim_scenario_load; a file that cannot be read
 * is DLCP_ERR_SYSTEM with "path: reason" in |err|. */
int dlcp_sim_scenario_load_file(dlcp_sim_config *cfg, const char *path,
                                const char *const *sets, size_t nsets,
                                char *err, size_t errlen);

#endif /* DLCP_SIM_SCENARIO_H */
