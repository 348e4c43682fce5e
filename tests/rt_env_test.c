/*
 * rt_env_test.c: configuration from the environment.  Variables come from
 * a table through the lookup callback, so the process environment is
 * never touched and the cases cannot leak into each other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "rt/env.h"

/* A table of NAME, VALUE pairs ending with NULL. */
static const char *table_lookup(const char *name, void *user) {
  const char *const *kv = user;
  for (; kv[0] != NULL; kv += 2) {
    if (strcmp(kv[0], name) == 0) {
      return kv[1];
    }
  }
  return NULL;
}

static void test_defaults_world_of_one(void **state) {
  const char *vars[] = {NULL};
  dlcp_rt_env env;
  (void)state;
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, vars, NULL), 0);
  assert_int_equal(env.rank, 0);
  assert_int_equal(env.world_size, 1);
  assert_string_equal(env.master_addr, "127.0.0.1");
  assert_int_equal(env.timeout_ms, 30000);
  assert_int_equal(env.paths, 8);
  assert_int_equal(env.segment_bytes, 0);
  assert_int_equal(env.topo, DLCP_TOPO_FLAT);
  assert_true(env.job != 0);
  assert_true(env.fault.drop == 0.0);
  assert_true(env.shm);
  const char *off[] = {"DLCP_SHM", "0", NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, off, NULL), 0);
  assert_false(env.shm);
  assert_true(env.control_datagrams);
  const char *dg[] = {"DLCP_CONTROL_DATAGRAMS", "0", NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, dg, NULL), 0);
  assert_false(env.control_datagrams);
  assert_int_equal(env.queue_pkts, 16);
  const char *q[] = {"DLCP_QUEUE_PKTS", "0", NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, q, NULL), 0);
  assert_int_equal(env.queue_pkts, 0);
}

static void test_full_torchrun_env(void **state) {
  const char *vars[] = {"MASTER_ADDR",
                        "10.0.0.1",
                        "MASTER_PORT",
                        "29500",
                        "RANK",
                        "5",
                        "WORLD_SIZE",
                        "8",
                        "LOCAL_RANK",
                        "1",
                        "LOCAL_WORLD_SIZE",
                        "4",
                        "DLCP_TIMEOUT_MS",
                        "1500",
                        "DLCP_PATHS",
                        "8",
                        "DLCP_SEGMENT",
                        "8192",
                        "DLCP_TOPO",
                        "rack:4",
                        "DLCP_FAULT_DROP",
                        "1%",
                        "DLCP_FAULT_DUP",
                        "0.25",
                        "DLCP_FAULT_DELAY",
                        "0.5",
                        "DLCP_FAULT_DELAY_US",
                        "200",
                        "DLCP_FAULT_SEED",
                        "18446744073709551615",
                        "DLCP_FAULT_PAUSE",
                        "1:10:20,5:100:2000",
                        "DLCP_FAULT_CTL_RESET",
                        "5:3,0:1",
                        "DLCP_JOB",
                        "77",
                        NULL};
  dlcp_rt_env env;
  dlcp_errbuf eb;
  (void)state;
  if (dlcp_rt_env_load(&env, table_lookup, vars, &eb) != 0) {
    fail_msg("%s", eb.msg);
  }
  assert_string_equal(env.master_addr, "10.0.0.1");
  assert_int_equal(env.master_port, 29500);
  assert_int_equal(env.rank, 5);
  assert_int_equal(env.world_size, 8);
  assert_int_equal(env.timeout_ms, 1500);
  assert_int_equal(env.paths, 8);
  assert_int_equal(env.segment_bytes, 8192);
  assert_int_equal(env.topo, DLCP_TOPO_RACK);
  assert_int_equal(env.ranks_per_rack, 4);
  assert_true(env.fault.drop > 0.0099 && env.fault.drop < 0.0101);
  assert_true(env.fault.dup == 0.25);
  assert_int_equal(env.fault.delay_us, 200);
  assert_true(env.fault.seed == UINT64_MAX);
  assert_int_equal(env.fault.pause_after_ms, 100);
  assert_int_equal(env.fault.pause_for_ms, 2000);
  assert_int_equal(env.fault.ctl_resets, 3);
  assert_int_equal(env.job, 77);
}

/* The same MASTER_ADDR:PORT gives every rank the same default job. */
static void test_default_job_shared(void **state) {
  const char *a[] = {"MASTER_ADDR", "h",          "MASTER_PORT", "1", "RANK",
                     "0",           "WORLD_SIZE", "2",           NULL};
  const char *b[] = {"MASTER_ADDR", "h",          "MASTER_PORT", "1", "RANK",
                     "1",           "WORLD_SIZE", "2",           NULL};
  dlcp_rt_env ea;
  dlcp_rt_env eb;
  (void)state;
  assert_int_equal(dlcp_rt_env_load(&ea, table_lookup, a, NULL), 0);
  assert_int_equal(dlcp_rt_env_load(&eb, table_lookup, b, NULL), 0);
  assert_int_equal(ea.job, eb.job);
}

typedef struct bad_case {
  const char *vars[12];
  const char *expect[3]; /* substrings the message must contain */
} bad_case;

static void test_invalid_values_named(void **state) {
#define WORLD2                                                                 \
  "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500", "WORLD_SIZE", "2",       \
      "RANK", "1"
  static const bad_case cases[] = {
      {{"RANK", "1", NULL}, {"RANK='1'", "WORLD_SIZE is not", NULL}},
      {{"WORLD_SIZE", "2", NULL}, {"WORLD_SIZE='2'", "RANK is not", NULL}},
      {{"WORLD_SIZE", "2", "RANK", "2", NULL}, {"RANK='2'", "0..1", NULL}},
      {{"WORLD_SIZE", "0", "RANK", "0", NULL}, {"WORLD_SIZE='0'", NULL}},
      {{"WORLD_SIZE", "2", "RANK", "-1", NULL}, {"RANK='-1'", NULL}},
      {{"WORLD_SIZE", "2", "RANK", "1", "MASTER_PORT", "1", NULL},
       {"MASTER_ADDR is not set", NULL}},
      {{"WORLD_SIZE", "2", "RANK", "1", "MASTER_ADDR", "x", NULL},
       {"MASTER_PORT is not set", NULL}},
      {{"WORLD_SIZE", "2", "RANK", "1", "MASTER_ADDR", "x", "MASTER_PORT", "0",
        NULL},
       {"MASTER_PORT='0'", "1..65535"}},
      {{"MASTER_ADDR", "a b", NULL}, {"MASTER_ADDR='a b'", "host name"}},
      {{WORLD2, "DLCP_TIMEOUT_MS", "5s", NULL},
       {"DLCP_TIMEOUT_MS='5s'", "milliseconds"}},
      {{WORLD2, "DLCP_PATHS", "0", NULL}, {"DLCP_PATHS='0'", "1..64"}},
      {{WORLD2, "DLCP_SEGMENT", "10", NULL}, {"DLCP_SEGMENT='10'", "\"auto\""}},
      {{WORLD2, "DLCP_TOPO", "rack:3", NULL}, {"DLCP_TOPO='rack:3'", "1..2"}},
      {{WORLD2, "DLCP_FAULT_DROP", "1.5", NULL},
       {"DLCP_FAULT_DROP='1.5'", "probability"}},
      {{WORLD2, "DLCP_FAULT_DUP", "nan", NULL}, {"DLCP_FAULT_DUP='nan'"}},
      {{WORLD2, "DLCP_FAULT_REORDER", "5%x", NULL},
       {"DLCP_FAULT_REORDER='5%x'"}},
      {{WORLD2, "DLCP_FAULT_PAUSE", "2:1:1", NULL},
       {"DLCP_FAULT_PAUSE='2:1:1'", "RANK:AFTER_MS:FOR_MS"}},
      {{WORLD2, "DLCP_FAULT_PAUSE", "1:1:1,1:2:2", NULL},
       {"DLCP_FAULT_PAUSE", "one entry per rank"}},
      {{WORLD2, "DLCP_FAULT_PAUSE", "1:1", NULL}, {"DLCP_FAULT_PAUSE='1:1'"}},
      {{WORLD2, "DLCP_FAULT_PAUSE", "0:1:1,", NULL}, {"DLCP_FAULT_PAUSE"}},
      {{WORLD2, "DLCP_FAULT_CTL_RESET", "0", NULL},
       {"DLCP_FAULT_CTL_RESET='0'", "RANK:COUNT"}},
      {{WORLD2, "DLCP_FAULT_CTL_RESET", "2:1", NULL},
       {"DLCP_FAULT_CTL_RESET='2:1'", "RANK in 0..1"}},
      {{WORLD2, "DLCP_FAULT_CTL_RESET", "0:x", NULL},
       {"DLCP_FAULT_CTL_RESET='0:x'"}},
      {{WORLD2, "DLCP_JOB", "0", NULL}, {"DLCP_JOB='0'", "job token"}},
      {{WORLD2, "DLCP_SHM", "yes", NULL}, {"DLCP_SHM='yes'", "0 or 1"}},
      {{WORLD2, "DLCP_SHM", "2", NULL}, {"DLCP_SHM='2'", "0 or 1"}},
      {{WORLD2, "DLCP_CONTROL_DATAGRAMS", "on", NULL},
       {"DLCP_CONTROL_DATAGRAMS='on'", "0 or 1"}},
      {{WORLD2, "DLCP_QUEUE_PKTS", "-1", NULL},
       {"DLCP_QUEUE_PKTS='-1'", "packet count"}},
      /* mpirun, mpiexec and srun: their own variables, named in the message. */
      {{"OMPI_COMM_WORLD_RANK", "1", NULL},
       {"OMPI_COMM_WORLD_RANK='1'", "OMPI_COMM_WORLD_SIZE is not", "Open MPI"}},
      {{"OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "4", NULL},
       {"OMPI_COMM_WORLD_RANK='4'", "0..3", "OMPI_COMM_WORLD_SIZE=4"}},
      {{"OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_RANK", "1", NULL},
       {"MASTER_ADDR is not set", "OMPI_COMM_WORLD_SIZE=4",
        "mpirun -x MASTER_ADDR"}},
      {{"PMI_SIZE", "3", NULL}, {"PMI_SIZE='3'", "PMI_RANK is not", "MPICH"}},
      {{"PMI_SIZE", "3", "PMI_RANK", "1", NULL},
       {"MASTER_ADDR is not set", "PMI_SIZE=3", "mpiexec -genv MASTER_ADDR"}},
      /* mpiexec inside an allocation: srun's inherited numbers differ, so
       * srun's address default does not apply. */
      {{"PMI_SIZE", "3", "PMI_RANK", "1", "SLURM_PROCID", "0", "SLURM_NTASKS",
        "1", "SLURM_LAUNCH_NODE_IPADDR", "10.0.0.9", NULL},
       {"MASTER_ADDR is not set", "PMI_SIZE=3"}},
      {{"SLURM_NTASKS", "x", "SLURM_PROCID", "0", NULL},
       {"SLURM_NTASKS='x'", "an integer"}},
      {{"SLURM_NTASKS", "2", "SLURM_PROCID", "1", NULL},
       {"MASTER_ADDR is not set", "SLURM_NTASKS=2",
        "SLURM_LAUNCH_NODE_IPADDR"}},
      {{"SLURM_NTASKS", "2", "SLURM_PROCID", "1", "SLURM_LAUNCH_NODE_IPADDR",
        "a b", NULL},
       {"SLURM_LAUNCH_NODE_IPADDR='a b'", "host name"}},
      {{"SLURM_NTASKS", "2", "SLURM_PROCID", "1", "MASTER_ADDR", "h0",
        "MASTER_PORT", "70000", NULL},
       {"MASTER_PORT='70000'", "1..65535"}},
  };
#undef WORLD2
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    dlcp_rt_env env;
    dlcp_errbuf eb;
    size_t k;
    int rv = dlcp_rt_env_load(&env, table_lookup,
                              (void *)(uintptr_t)cases[i].vars, &eb);
    if (rv != DLCP_ERR_CONFIG) {
      fail_msg("case %zu: expected DLCP_ERR_CONFIG, got %d", i, rv);
    }
    for (k = 0; k < 3 && cases[i].expect[k] != NULL; k++) {
      if (strstr(eb.msg, cases[i].expect[k]) == NULL) {
        fail_msg("case %zu: \"%s\" not in \"%s\"", i, cases[i].expect[k],
                 eb.msg);
      }
    }
  }
}

/* mpirun, mpiexec and srun number their processes in variables of their
 * own and give no rendezvous address; torchrun's variables win over
 * theirs. */
static void test_launchers(void **state) {
  dlcp_rt_env env;
  (void)state;
  const char *ompi[] = {"OMPI_COMM_WORLD_RANK",
                        "2",
                        "OMPI_COMM_WORLD_SIZE",
                        "4",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        "0",
                        "MASTER_ADDR",
                        "10.0.0.1",
                        NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, ompi, NULL), 0);
  assert_int_equal(env.rank, 2);
  assert_int_equal(env.world_size, 4);
  assert_string_equal(env.master_addr, "10.0.0.1");
  assert_int_equal(env.master_port, DLCP_ENV_DEFAULT_MASTER_PORT);

  const char *slurm[] = {"SLURM_PROCID",
                         "7",
                         "SLURM_NTASKS",
                         "8",
                         "SLURM_LAUNCH_NODE_IPADDR",
                         "10.0.0.9",
                         "MASTER_PORT",
                         "12345",
                         NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, slurm, NULL), 0);
  assert_int_equal(env.rank, 7);
  assert_int_equal(env.world_size, 8);
  assert_string_equal(env.master_addr, "10.0.0.9");
  assert_int_equal(env.master_port, 12345);

  /* MASTER_ADDR names rank 0's host over the node srun ran on. */
  const char *slurm_addr[] = {"SLURM_PROCID",
                              "0",
                              "SLURM_NTASKS",
                              "2",
                              "SLURM_LAUNCH_NODE_IPADDR",
                              "10.0.0.9",
                              "MASTER_ADDR",
                              "node3",
                              NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, slurm_addr, NULL), 0);
  assert_string_equal(env.master_addr, "node3");

  /* dlcp-run (torchrun's variables) inside an srun task numbers its own
   * ranks. */
  const char *nested[] = {"SLURM_PROCID",
                          "0",
                          "SLURM_NTASKS",
                          "8",
                          "RANK",
                          "1",
                          "WORLD_SIZE",
                          "2",
                          "MASTER_ADDR",
                          "127.0.0.1",
                          "MASTER_PORT",
                          "4000",
                          NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, nested, NULL), 0);
  assert_int_equal(env.rank, 1);
  assert_int_equal(env.world_size, 2);
  assert_int_equal(env.master_port, 4000);

  /* MPICH's mpiexec (Hydra), and Intel MPI's. */
  const char *mpich[] = {
      "PMI_RANK", "1",           "PMI_SIZE", "3", "MPI_LOCALRANKID",
      "1",        "MASTER_ADDR", "10.0.0.1", NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, mpich, NULL), 0);
  assert_int_equal(env.rank, 1);
  assert_int_equal(env.world_size, 3);
  assert_string_equal(env.master_addr, "10.0.0.1");
  assert_int_equal(env.master_port, DLCP_ENV_DEFAULT_MASTER_PORT);

  /* mpiexec inside a Slurm allocation: every rank inherits the batch
   * step's SLURM_PROCID, and PMI_RANK numbers it. */
  const char *mpich_in_slurm[] = {"PMI_RANK",
                                  "2",
                                  "PMI_SIZE",
                                  "4",
                                  "SLURM_PROCID",
                                  "0",
                                  "SLURM_NTASKS",
                                  "1",
                                  "MASTER_ADDR",
                                  "node0",
                                  NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, mpich_in_slurm, NULL),
                   0);
  assert_int_equal(env.rank, 2);
  assert_int_equal(env.world_size, 4);
  assert_string_equal(env.master_addr, "node0");

  /* srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE to its own numbers: the task
   * is srun's and takes the node srun ran on. */
  const char *srun_pmi2[] = {"PMI_RANK",
                             "3",
                             "PMI_SIZE",
                             "4",
                             "SLURM_PROCID",
                             "3",
                             "SLURM_NTASKS",
                             "4",
                             "SLURM_LAUNCH_NODE_IPADDR",
                             "10.0.0.9",
                             NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, srun_pmi2, NULL), 0);
  assert_int_equal(env.rank, 3);
  assert_int_equal(env.world_size, 4);
  assert_string_equal(env.master_addr, "10.0.0.9");

  /* A one-task step needs no rendezvous address. */
  const char *one[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "1", NULL};
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, one, NULL), 0);
  assert_int_equal(env.world_size, 1);
  assert_string_equal(env.master_addr, "127.0.0.1");
  assert_int_equal(env.master_port, 0);
}

static void test_topology_labels(void **state) {
  (void)state;
  const char *ok[] = {"RANK", "1", "WORLD_SIZE", "4", "MASTER_ADDR",
                      "127.0.0.1", "MASTER_PORT", "29500", "DLCP_TOPO",
                      "rack-3/pod_1/dc.0", NULL};
  dlcp_rt_env env;
  dlcp_errbuf eb;
  assert_int_equal(dlcp_rt_env_load(&env, table_lookup, ok, &eb), 0);
  assert_int_equal(env.topo, DLCP_TOPO_LABELS);
  assert_int_equal(env.topo_levels, 3);
  assert_string_equal(env.topo_labels[0], "rack-3");
  assert_string_equal(env.topo_labels[1], "pod_1");
  assert_string_equal(env.topo_labels[2], "dc.0");
  const char *bad_values[] = {"rack0//pod0", "/rack0", "rack0/", "rack 0",
                              "a/b/c/d/e/f/g/h/i", "rack:0", "rack:9"};
  for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
    const char *vars[] = {"RANK", "1", "WORLD_SIZE", "4", "MASTER_ADDR",
                          "127.0.0.1", "MASTER_PORT", "29500", "DLCP_TOPO",
                          bad_values[i], NULL};
    assert_int_equal(dlcp_rt_env_load(&env, table_lookup, vars, &eb),
                     DLCP_ERR_CONFIG);
    assert_non_null(strstr(eb.msg, "DLCP_TOPO='"));
    assert_non_null(strstr(eb.msg, "location labels"));
  }
}

static void test_unknown_dlcp_variable(void **state) {
  char *good[] = {"PATH=/bin", "DLCP_TIMEOUT_MS=5", "DLCP_FAULT_DROP=0", NULL};
  char *typo[] = {"PATH=/bin", "DLCP_TIMEOUT=5", NULL};
  dlcp_errbuf eb;
  (void)state;
  assert_int_equal(dlcp_rt_env_check_unknown(good, &eb), 0);
  assert_int_equal(dlcp_rt_env_check_unknown(typo, &eb), DLCP_ERR_CONFIG);
  assert_non_null(strstr(eb.msg, "DLCP_TIMEOUT:"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_world_of_one),
      cmocka_unit_test(test_full_torchrun_env),
      cmocka_unit_test(test_default_job_shared),
      cmocka_unit_test(test_invalid_values_named),
      cmocka_unit_test(test_launchers),
      cmocka_unit_test(test_topology_labels),
      cmocka_unit_test(test_unknown_dlcp_variable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
