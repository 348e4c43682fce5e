/*
 * dlcp-sim: run a packet-level simulation scenario.
 *
 *   dlcp-sim [SCENARIO.yaml] [--set key=value]... [--seed N] [--out DIR]
 *
 * Without a scenario it runs the embedded default (the MLT seed's 144-host
 * leaf-spine with parameter-server traffic).  The summary goes to stdout;
 * with --out (or outputs.dir in the scenario) the CSV and JSON results go
 * into DIR.  A progress bar is drawn only when stdout is a terminal.  Exit
 * status: 0 success, 1 the run failed, 2 bad usage or scenario.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: dlcp-sim [SCENARIO.yaml] [--set key=value]... [--seed N] "
          "[--out DIR]\n"
          "  SCENARIO.yaml  scenario file (default: the embedded MLT "
          "leaf-spine PS scenario)\n"
          "  --set K=V      override a scenario field, e.g. --set "
          "topology.spines=8\n"
          "  --seed N       random seed (same as --set seed=N)\n"
          "  --out DIR      write flows.csv, links.csv, queues.csv, "
          "iterations.csv, collectives.csv,\n"
          "                 summary.json\n"
          "                 (and the outputs.pcap captures)\n"
          "  --print-default  print the embedded scenario and exit\n");
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(const dlcp_sim *sim, double wall_s, bool final) {
  const int width = 30;
  double frac = sim->nflows ? (double)sim->flows_done / sim->nflows : 1.0;
  int filled = (int)(frac * width);
  printf("\r[");
  for (int i = 0; i < width; i++) {
    putchar(i < filled ? '#' : ' ');
  }
  /* Simulated time against wall time and the event rate: how long the
   * rest will take, and whether the run is slow or just big. */
  printf("] %3d%% %u/%u flows, %.3f ms simulated in %.1f s wall, %.2f M "
         "events/s ", (int)(frac * 100), sim->flows_done, sim->nflows,
         (double)dlcp_sim_now(sim) / 1e9, wall_s,
         wall_s > 0 ? (double)sim->engine.nevents / wall_s / 1e6 : 0.0);
  if (final) {
    /* Erase the bar so the summary starts on a clean line. */
    printf("\r%*s\r", width + 100, "");
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *scenario = NULL;
  const char *out = NULL;
  const char **sets = calloc((size_t)argc + 1, sizeof(*sets));
  char seedbuf[64];
  size_t nsets = 0;
  if (!sets) {
    fprintf(stderr, "dlcp-sim: out of memory\n");
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      free(sets);
      return 0;
    } else if (!strcmp(a, "--print-default")) {
      fputs(dlcp_sim_default_scenario, stdout);
      free(sets);
      return 0;
    } else if (!strcmp(a, "--set") || !strcmp(a, "--seed") ||
               !strcmp(a, "--out")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "dlcp-sim: %s needs a value\n", a);
        free(sets);
        return 2;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "--set")) {
        sets[nsets++] = v;
      } else if (!strcmp(a, "--out")) {
        out = v;
      } else {
        char *end;
        errno = 0;
        unsigned long long seed = strtoull(v, &end, 10);
        if (v[0] < '0' || v[0] > '9' || *end || errno) {
          fprintf(stderr, "dlcp-sim: --seed: expected a non-negative "
                          "integer, got '%s'\n", v);
          free(sets);
          return 2;
        }
        snprintf(seedbuf, sizeof(seedbuf), "seed=%llu", seed);
        sets[nsets++] = seedbuf;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "dlcp-sim: unknown option '%s'\n", a);
      usage(stderr);
      free(sets);
      return 2;
    } else if (scenario) {
      fprintf(stderr, "dlcp-sim: only one scenario file, got '%s' and "
                      "'%s'\n", scenario, a);
      free(sets);
      return 2;
    } else {
      scenario = a;
    }
  }

  dlcp_sim_config cfg;
  char err[1024];
  int rv;
  if (scenario) {
    rv = dlcp_sim_scenario_load_file(&cfg, scenario, sets, nsets, err,
                                     sizeof(err));
  } else {
    rv = dlcp_sim_scenario_load(&cfg, dlcp_sim_default_scenario,
                                strlen(dlcp_sim_default_scenario),
                                "<default>", sets, nsets, err, sizeof(err));
  }
  free(sets);
  if (rv != 0) {
    fprintf(stderr, "dlcp-sim: %s\n", err);
    return 2;
  }
  if (!out && cfg.out_dir[0]) {
    out = cfg.out_dir;
  }
  /* Before the run, not after it: a typo in the path must not cost the
   * simulation. */
  if (out && dlcp_sim_prepare_outdir(out, err, sizeof(err)) != 0) {
    fprintf(stderr, "dlcp-sim: %s %s\n",
            out == cfg.out_dir ? "outputs.dir:" : "--out:", err);
    dlcp_sim_config_free(&cfg);
    return 2;
  }
  dlcp_sim *sim;
  rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
  if (rv != 0) {
    fprintf(stderr, "dlcp-sim: %s\n", err[0] ? err : dlcp_strerror(rv));
    dlcp_sim_config_free(&cfg);
    return 2;
  }
  char outdir[sizeof(cfg.out_dir)];
  snprintf(outdir, sizeof(outdir), "%s", out ? out : "");
  uint32_t npcaps = cfg.npcaps;
  dlcp_sim_config_free(&cfg);
  if (npcaps > 0) {
    if (!outdir[0]) {
      fprintf(stderr, "dlcp-sim: outputs.pcap needs an output directory "
                      "(outputs.dir or --out)\n");
      dlcp_sim_del(sim);
      return 2;
    }
    rv = dlcp_sim_pcap_open(sim, outdir, err, sizeof(err));
    if (rv != 0) {
      fprintf(stderr, "dlcp-sim: %s\n", err);
      dlcp_sim_del(sim);
      return 1;
    }
  }

  bool tty = isatty(STDOUT_FILENO) != 0;
  double t0 = wall_now(), last_draw = 0;
  dlcp_sim_ps step = 50 * DLCP_SIM_PS_PER_US;
  for (;;) {
    rv = dlcp_sim_run(sim, dlcp_sim_now(sim) + step);
    if (tty) {
      double now = wall_now();
      if (rv != 0 || now - last_draw > 0.1) {
        progress(sim, now - t0, rv != 0);
        last_draw = now;
      }
    }
    if (rv != 0) {
      break;
    }
  }
  double wall = wall_now() - t0;
  if (rv < 0) {
    fprintf(stderr, "dlcp-sim: simulation failed: %s\n", dlcp_strerror(rv));
    dlcp_sim_del(sim);
    return 1;
  }
  dlcp_sim_print_summary(sim, stdout, wall);
  if (dlcp_sim_pcap_close(sim) != 0) {
    fprintf(stderr, "dlcp-sim: writing a pcap file failed\n");
    dlcp_sim_del(sim);
    return 1;
  }
  if (npcaps > 0) {
    printf("pcap       %u link%s captured in %s/\n", npcaps,
           npcaps == 1 ? "" : "s", outdir);
  }
  if (outdir[0]) {
    rv = dlcp_sim_write_outputs(sim, outdir, err, sizeof(err));
    if (rv != 0) {
      fprintf(stderr, "dlcp-sim: %s\n", err);
      dlcp_sim_del(sim);
      return 1;
    }
    printf("results    %s/{flows,links,queues%s%s}.csv, %s/summary.json\n",
           outdir, sim->ps_iterations ? ",iterations" : "",
           dlcp_sim_coll_jobs(sim) ? ",collectives" : "", outdir);
  }
  int status = sim->flows_done == sim->nflows ? 0 : 1;
  if (status != 0) {
    fprintf(stderr, "dlcp-sim: %u of %u flows did not finish before "
                    "stop_at\n", sim->nflows - sim->flows_done, sim->nflows);
  }
  for (uint32_t j = 0; j < dlcp_sim_coll_jobs(sim); j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    if (!r.done || r.verify_errors) {
      fprintf(stderr, "dlcp-sim: collective job %u %s\n", j,
              r.status ? "failed" : r.verify_errors ? "computed wrong sums"
                                                    : "did not finish");
      status = 1;
    }
  }
  dlcp_sim_del(sim);
  return status;
}
