/*
 * dlcp-sim: run a packet-level simulation scenario.
 *
 *   dlcp-sim [SCENARIO.yaml] [--set key=value]... [--seed N] [--out DIR]
 *
 * Without a scenario it runs the embedded default (the MLT seed's 144-host
 * leaf-spine with parameter-server traffic) twice, with DCTCP and with
 * MLT, and compares their FCTs; a --set transport.* picks one of them.  The summary goes to stdout;
 * with --out (or outputs.dir in the scenario) the CSV and JSON results go
 * into DIR.  A progress bar is drawn only when stdout is a terminal.  Exit
 * status: 0 success, 1 the run failed, 2 bad usage or scenario.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static void usage(FILE *f) {
  fprintf(f, "usage: dlcp-sim [SCENARIO.yaml] [--set key=value]... [--seed N] "
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
             "  --print-default  print the embedded scenario and exit\n"
             "  -h, --help     show this help\n");
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

/* Loads and runs one scenario (the embedded default if |scenario| is
 * NULL) with |sets| applied, prints its summary and writes its results
 * into |out| (or outputs.dir) if set; fills |fct| if not NULL.  Returns
 * the exit status: 0, 1 (the run failed) or 2 (bad scenario). */
static int run_one(const char *scenario, const char **sets, size_t nsets,
                   const char *out, dlcp_sim_fct_stats *fct) {
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
  uint32_t unfinished = dlcp_sim_unfinished_flows(sim);
  int status = unfinished == 0 ? 0 : 1;
  if (fct && dlcp_sim_fct_stats_get(sim, -1, fct) != 0) {
    status = 1;
  }
  if (unfinished != 0) {
    fprintf(stderr,
            "dlcp-sim: %u of %u flows did not finish before "
            "stop_at\n",
            unfinished, sim->nflows);
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

/* Whether the user chose a transport: then the default runs only that. */
static bool touches_transport(const char **sets, size_t nsets) {
  for (size_t i = 0; i < nsets; i++) {
    if (!strncmp(sets[i], "transport.", 10)) {
      return true;
    }
  }
  return false;
}

/* The default: the seed's scenario with its DCTCP baseline, then with
 * MLT as the seed runs it (loss bound 0.1, source routing over the
 * spines), and the two FCT distributions side by side.  With an output
 * directory each run writes into its own subdirectory. */
static int run_default_pair(const char **sets, size_t nsets, const char *out) {
  static const char *const mlt_sets[] = {"transport.kind=mlt",
                                         "transport.loss_bound=0.1",
                                         "transport.load_balancing=source"};
  const size_t nmlt = sizeof(mlt_sets) / sizeof(mlt_sets[0]);
  const char **all = calloc(nsets + nmlt + 1, sizeof(*all));
  char dir[2][4096];
  dlcp_sim_fct_stats fct[2];
  if (!all) {
    fprintf(stderr, "dlcp-sim: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < nsets; i++) {
    all[i] = sets[i];
  }
  for (size_t i = 0; i < nmlt; i++) {
    all[nsets + i] = mlt_sets[i];
  }
  int status = 0;
  if (out && mkdir(out, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "dlcp-sim: %s: cannot create directory: %s\n", out,
            strerror(errno));
    free(all);
    return 1;
  }
  for (int k = 0; k < 2 && status == 0; k++) {
    if (out) {
      snprintf(dir[k], sizeof(dir[k]), "%s/%s", out, k ? "mlt" : "dctcp");
    }
    printf("== %s ==\n", k ? "MLT (loss bound 0.1, source routing)"
                            : "DCTCP (the seed's baseline)");
    status = run_one(NULL, all, nsets + (k ? nmlt : 0), out ? dir[k] : NULL,
                     &fct[k]);
    printf("\n");
  }
  free(all);
  if (status == 0 && fct[0].count && fct[1].count) {
    printf("mlt/dctcp  mean FCT %.2fx, p99 FCT %.2fx (the iteration times "
           "and drops are above)\n",
           fct[1].mean_us / fct[0].mean_us, fct[1].p99_us / fct[0].p99_us);
  }
  return status;
}

int main(int argc, char **argv) {
  dlcp_sim_use_huge_pages(argv);
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

  int status;
  if (scenario || touches_transport(sets, nsets)) {
    status = run_one(scenario, sets, nsets, out, NULL);
  } else {
    status = run_default_pair(sets, nsets, out);
  }
  free(sets);
  return status;
}

