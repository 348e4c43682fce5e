/*
 * mlt_tune.c: MLT's rate-control parameters for a segment size
 * (mlt_tune.h says why they scale).
 */
#include "proto/mlt_tune.h"

void dlcp_mlt_config_tune_segment(dlcp_mlt_config *cfg,
                                  uint32_t segment_size) {
  cfg->segment_size = segment_size;
  cfg->alpha_bps = (uint64_t)((double)cfg->alpha_bps * segment_size /
                              (double)DLCP_MLT_TUNE_REF_SEGMENT);
  if (segment_size > DLCP_MLT_TUNE_JUMBO_SEGMENT) {
    cfg->t_low_ns *= DLCP_MLT_TUNE_HOST_RTT_FACTOR;
    cfg->t_high_ns *= DLCP_MLT_TUNE_HOST_RTT_FACTOR;
  }
}
