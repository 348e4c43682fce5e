/*
 * sim_speed.c: how fast dlcp-sim runs a scenario.
 *
 *   bench-sim_speed [--runs N] [SCENARIO.yaml] [--set key=value]...
 *                   [--fct FILE]
 *
 * Runs the scenario (the embedded default without one) N times (default
 * 5), each from a fresh dlcp_sim, and reports the median wall time and
 * the median CPU time (user + system, getrusage) of the runs (the run loop
 * only: building the scenario is excluded, as ns-3's set-up is in the
 * comparison), the engine's event count, the median events per second,
 * the packet-hops (packets sent on any link, host NICs included) and the
 * median CPU nanoseconds per packet-hop and per event.  CPU time is what
 * the scaling benchmark compares: on a shared machine it moves far less
 * than wall time when another job takes the core.  Every run must produce the same event count
 * and FCTs (the simulator is deterministic); a difference is an error.  It
 * then prints the FCT distribution of the scenario, and with --fct writes
 * "id src dst bytes fct_us" per finished flow, the format
 * scripts/bench-sim.sh compares with ns-3's.
 *
 * Output lines (one key per line, for scripts):
 *   runs N
 *   wall_s MEDIAN (min MIN, max MAX)
 *   cpu_s MEDIAN (min MIN, max MAX)
 *   events E
 *   events_per_s MEDIAN
 *   packet_hops H
 *   cpu_ns_per_hop MEDIAN (min MIN)
 *   cpu_ns_per_event MEDIAN
 *   flows FINISHED/TOTAL
 *   fct_us mean M p50 P p99 Q
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sim/scenario.h"
#include "sim/sim.h"

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Every packet a port starts sending is one packet-hop. */
static uint64_t packet_hops(const dlcp_sim *sim) {
  uint64_t n = 0;
  for (uint32_t p = 0; p < sim->net.nports; p++) {
    n += sim->net.ports[p].tx_pkts;
  }
  return n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int load(dlcp_sim_config *cfg, const char *scenario,
                const char *const *sets, size_t nsets) {
  char err[1024];
  int rv;
  if (scenario) {
    rv = dlcp_sim_scenario_load_file(cfg, scenario, sets, nsets, err,
                                     sizeof(err));
  } else {
    rv = dlcp_sim_scenario_load(cfg, dlcp_sim_default_scenario,
                                strlen(dlcp_sim_default_scenario),
                                "<default>", sets, nsets, err, sizeof(err));
  }
  if (rv != 0) {
    fprintf(stderr, "bench-sim_speed: %s\n", err);
  }
  return rv;
}

static int write_fct(const dlcp_sim *sim, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *fl = &sim->flows[i];
    if (fl->finish_ps == DLCP_SIM_PS_NEVER) {
      fprintf(f, "%u %u %u %llu -1\n", fl->id, fl->src, fl->dst,
              (unsigned long long)fl->size_bytes);
      continue;
    }
    fprintf(f, "%u %u %u %llu %.3f\n", fl->id, fl->src, fl->dst,
            (unsigned long long)fl->size_bytes,
            (double)(fl->finish_ps - fl->start_ps) / 1e6);
  }
  return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  dlcp_sim_use_huge_pages(argv);
  const char *scenario = NULL, *fct_path = NULL;
  const char **sets = calloc((size_t)argc + 1, sizeof(*sets));
  size_t nsets = 0;
  int runs = 5;
  if (!sets) {
    return 1;
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
      sets[nsets++] = argv[++i];
    } else if (!strcmp(argv[i], "--fct") && i + 1 < argc) {
      fct_path = argv[++i];
    } else if (argv[i][0] != '-' && !scenario) {
      scenario = argv[i];
    } else {
      fprintf(stderr, "usage: bench-sim_speed [--runs N] [SCENARIO.yaml] "
                      "[--set key=value]... [--fct FILE]\n");
      free(sets);
      return 2;
    }
  }
  if (runs < 1 || runs > 1000) {
    fprintf(stderr, "bench-sim_speed: --runs must be in [1, 1000]\n");
    free(sets);
    return 2;
  }
  double *wall = calloc((size_t)runs, sizeof(*wall));
  double *rate = calloc((size_t)runs, sizeof(*rate));
  double *cpu = calloc((size_t)runs, sizeof(*cpu));
  if (!wall || !rate || !cpu) {
    free(sets);
    return 1;
  }
  uint64_t events = 0, hops = 0;
  dlcp_sim_fct_stats first = {0, 0, 0, 0, 0};
  int status = 0;
  for (int r = 0; r < runs && status == 0; r++) {
    dlcp_sim_config cfg;
    char err[1024];
    if (load(&cfg, scenario, sets, nsets) != 0) {
      status = 2;
      break;
    }
    dlcp_sim *sim;
    int rv = dlcp_sim_new(&sim, &cfg, NULL, err, sizeof(err));
    dlcp_sim_config_free(&cfg);
    if (rv != 0) {
      fprintf(stderr, "bench-sim_speed: %s\n", err);
      status = 2;
      break;
    }
    double c0 = cpu_now(), t0 = wall_now();
    rv = dlcp_sim_run(sim, DLCP_SIM_PS_NEVER);
    wall[r] = wall_now() - t0;
    cpu[r] = cpu_now() - c0;
    if (rv < 0) {
      fprintf(stderr, "bench-sim_speed: run failed: %s\n", dlcp_strerror(rv));
      dlcp_sim_del(sim);
      status = 1;
      break;
    }
    rate[r] = (double)sim->engine.nevents / wall[r];
    dlcp_sim_fct_stats st;
    dlcp_sim_fct_stats_get(sim, -1, &st);
    if (r == 0) {
      events = sim->engine.nevents;
      hops = packet_hops(sim);
      first = st;
      printf("flows %u/%u\n", sim->flows_done, sim->nflows);
      if (fct_path && write_fct(sim, fct_path) != 0) {
        status = 1;
      }
    } else if (sim->engine.nevents != events || packet_hops(sim) != hops ||
               st.mean_us != first.mean_us) {
      fprintf(stderr, "bench-sim_speed: run %d differs from run 0 "
                      "(nondeterminism)\n", r);
      status = 1;
    }
    dlcp_sim_del(sim);
  }
  if (status == 0) {
    qsort(wall, (size_t)runs, sizeof(*wall), cmp_double);
    qsort(rate, (size_t)runs, sizeof(*rate), cmp_double);
    qsort(cpu, (size_t)runs, sizeof(*cpu), cmp_double);
    printf("runs %d\n", runs);
    printf("wall_s %.4f (min %.4f, max %.4f)\n", wall[runs / 2], wall[0],
           wall[runs - 1]);
    printf("cpu_s %.4f (min %.4f, max %.4f)\n", cpu[runs / 2], cpu[0],
           cpu[runs - 1]);
    printf("events %llu\n", (unsigned long long)events);
    printf("events_per_s %.0f\n", rate[runs / 2]);
    printf("packet_hops %llu\n", (unsigned long long)hops);
    if (hops > 0 && events > 0) {
      printf("cpu_ns_per_hop %.2f (min %.2f)\n", cpu[runs / 2] * 1e9 / (double)hops,
             cpu[0] * 1e9 / (double)hops);
      printf("cpu_ns_per_event %.2f\n", cpu[runs / 2] * 1e9 / (double)events);
    }
    printf("fct_us mean %.3f p50 %.3f p99 %.3f\n", first.mean_us,
           first.p50_us, first.p99_us);
  }
  free(wall);
  free(rate);
  free(cpu);
  free(sets);
  return status;
}
