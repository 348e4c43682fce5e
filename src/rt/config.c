/*
 * config.c: the runtime's configuration in one place: the defaults every
 * source starts from (dlcp_rt_env_defaults, which dlcp_rt_env_load and
 * dlcp_comm_config_default both use) and the validation of an explicit
 * dlcp_comm_config.  The environment's own parsing, with messages naming
 * the variable, is env.c.
 */
#include <string.h>

#include "dlcp/dlcp.h"
#include "proto/rate.h"
#include "rt/env.h"
#include "rt/errbuf.h"
#include "wire/wire.h"

void dlcp_rt_env_defaults(dlcp_rt_env *env) {
  memset(env, 0, sizeof(*env));
  env->timeout_ms = DLCP_RT_DEFAULT_TIMEOUT_MS;
  env->rdzv_timeout_ms = DLCP_RT_DEFAULT_RDZV_TIMEOUT_MS;
  env->paths = DLCP_RT_DEFAULT_PATHS;
  env->window_bytes = DLCP_RT_DEFAULT_WINDOW_BYTES;
  env->eager_bytes = DLCP_RT_DEFAULT_EAGER_BYTES;
  env->spin_us = DLCP_RT_DEFAULT_SPIN_US;
  env->shm = true;
  env->control_datagrams = true;
  env->queue_pkts = DLCP_RATE_DEFAULT_QUEUE_PKTS;
  env->fault.delay_us = DLCP_RT_DEFAULT_FAULT_DELAY_US;
  env->fault.seed = DLCP_RT_DEFAULT_FAULT_SEED;
}

void dlcp_comm_config_default(dlcp_comm_config *cfg) {
  dlcp_rt_env d;
  dlcp_rt_env_defaults(&d);
  memset(cfg, 0, sizeof(*cfg));
  cfg->version = DLCP_COMM_CONFIG_VERSION;
  /* An explicit configuration has no MASTER_ADDR:MASTER_PORT to hash the
   * job token from (dlcp_rt_env_load does), so it starts at 1. */
  cfg->job = 1;
  cfg->paths = d.paths;
  cfg->line_rate_gbps = d.rate_gbps;
  cfg->window_bytes = d.window_bytes;
  cfg->eager_bytes = d.eager_bytes;
  cfg->spin_us = d.spin_us;
  cfg->shm = d.shm ? 1u : 0u;
  cfg->control_datagrams = d.control_datagrams ? 1u : 0u;
  cfg->timeout_ms = d.timeout_ms;
  cfg->rdzv_timeout_ms = d.rdzv_timeout_ms;
  cfg->fault_delay_us = d.fault.delay_us;
  cfg->fault_seed = d.fault.seed;
}

int dlcp_rt_env_from_config(dlcp_rt_env *env, const dlcp_comm_config *cfg,
                            dlcp_errbuf *eb) {
  memset(env, 0, sizeof(*env));
  if (cfg->version != DLCP_COMM_CONFIG_VERSION) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "config version %u: expected %u (fill the config "
                           "with dlcp_comm_config_default)",
                           cfg->version, DLCP_COMM_CONFIG_VERSION);
  }
  if (cfg->world_size == 0 || cfg->world_size > DLCP_ENV_MAX_WORLD ||
      cfg->rank >= cfg->world_size) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "rank %u of world %u: expected rank < world size "
                           "<= %u",
                           cfg->rank, cfg->world_size, DLCP_ENV_MAX_WORLD);
  }
  if (cfg->world_size > 1 &&
      (!cfg->master_addr || !cfg->master_addr[0] || cfg->master_port == 0)) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "master_addr/master_port: expected the rendezvous "
                           "address of rank 0");
  }
  if (cfg->paths == 0 || cfg->paths > DLCP_ENV_MAX_PATHS || cfg->job == 0 ||
      cfg->timeout_ms == 0 || cfg->rdzv_timeout_ms == 0 ||
      !(cfg->line_rate_gbps == 0.0 ||
        (cfg->line_rate_gbps >= 0.001 && cfg->line_rate_gbps <= 10000.0)) ||
      (cfg->segment_bytes != 0 &&
       (cfg->segment_bytes < DLCP_WIRE_MIN_SEG ||
        cfg->segment_bytes > DLCP_WIRE_MAX_SEG))) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "config: paths 1..%u, job != 0, timeouts > 0, "
                           "rate 0 (the path's) or 0.001..10000 Gbps, segment 0 "
                           "or %u..%u",
                           DLCP_ENV_MAX_PATHS, DLCP_WIRE_MIN_SEG,
                           DLCP_WIRE_MAX_SEG);
  }
  if (cfg->shm > 1) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG, "shm %u: expected 0 or 1",
                           cfg->shm);
  }
  if (cfg->spin_us > DLCP_RT_MAX_SPIN_US) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "spin_us %u: expected at most %u", cfg->spin_us,
                           DLCP_RT_MAX_SPIN_US);
  }
  if (cfg->eager_bytes > DLCP_RT_MAX_EAGER_BYTES) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "eager_bytes %u: expected at most %u",
                           cfg->eager_bytes, DLCP_RT_MAX_EAGER_BYTES);
  }
  const double probs[4] = {cfg->fault_drop, cfg->fault_dup,
                           cfg->fault_reorder, cfg->fault_delay};
  for (int i = 0; i < 4; i++) {
    if (!(probs[i] >= 0.0 && probs[i] <= 1.0)) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "fault probabilities: expected values in [0, 1]");
    }
  }
  size_t secret_len = cfg->job_secret ? strlen(cfg->job_secret) : 0;
  if (cfg->job_secret && (secret_len < DLCP_AUTH_SECRET_MIN ||
                          secret_len > DLCP_AUTH_SECRET_MAX)) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "job_secret (%zu bytes, not shown): expected "
                           "%u..%u bytes",
                           secret_len, DLCP_AUTH_SECRET_MIN,
                           DLCP_AUTH_SECRET_MAX);
  }
  if (cfg->job_secret) {
    memcpy(env->job_secret, cfg->job_secret, secret_len);
    env->job_secret_len = (uint32_t)secret_len;
  }
  dlcp_copy_str(env->master_addr, sizeof(env->master_addr),
                cfg->master_addr ? cfg->master_addr : "127.0.0.1");
  dlcp_copy_str(env->local_addr, sizeof(env->local_addr),
                cfg->local_addr ? cfg->local_addr : "");
  env->master_port = cfg->master_port;
  env->rank = cfg->rank;
  env->world_size = cfg->world_size;
  env->timeout_ms = cfg->timeout_ms;
  env->rdzv_timeout_ms = cfg->rdzv_timeout_ms;
  env->paths = cfg->paths;
  env->segment_bytes = cfg->segment_bytes;
  env->job = cfg->job;
  env->rate_gbps = cfg->line_rate_gbps;
  env->window_bytes = cfg->window_bytes;
  env->eager_bytes = cfg->eager_bytes;
  env->spin_us = cfg->spin_us;
  env->shm = cfg->shm != 0;
  env->control_datagrams = cfg->control_datagrams != 0;
  env->queue_pkts = DLCP_RATE_DEFAULT_QUEUE_PKTS; /* not in the config */
  env->fault.drop = cfg->fault_drop;
  env->fault.dup = cfg->fault_dup;
  env->fault.reorder = cfg->fault_reorder;
  env->fault.delay = cfg->fault_delay;
  env->fault.delay_us = cfg->fault_delay_us;
  env->fault.seed = cfg->fault_seed;
  env->fault.straggle_ms = cfg->fault_straggle_ms;
  return dlcp_rt_env_parse_topo(env, cfg->topo, eb);
}
