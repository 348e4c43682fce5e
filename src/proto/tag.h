/*
 * tag.h: gradient-aware packet tagging (MLT seed, section 4.2.2.1).
 *
 * Priority by layer: layer i of L maps to priority i * P / L over P switch
 * queues, so front layers (needed first by the next forward pass) get the
 * most urgent queues (0 is the most urgent).
 *
 * Importance by magnitude: a packet is important when the mean |g| of its
 * gradients exceeds the median |g| of the tensor, estimated from a 5%
 * sample.  Important packets are sent ECN-capable, so a congested switch
 * marks them instead of dropping them; unimportant ones are dropped first.
 */
#ifndef DLCP_PROTO_TAG_H
#define DLCP_PROTO_TAG_H

#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "proto/rng.h"

/* The seed's sample: 5% of the tensor's gradients. */
#define DLCP_TAG_SAMPLE_PERMILLE 50u

/*
 * dlcp_tag_priority returns layer * nprio / nlayers, clamped to nprio - 1.
 * nlayers == 0 or nprio == 0 gives priority 0.
 */
uint8_t dlcp_tag_priority(uint32_t layer, uint32_t nlayers, uint32_t nprio);

/*
 * dlcp_tag_median_abs_f32 estimates the median |g| of the |count| floats at
 * |g| from a sample of |permille|/1000 of them (at least one), drawn with
 * |rng|.  |scratch| must hold dlcp_tag_sample_size(count, permille) floats.
 * NaNs count as +inf magnitude.  Returns 0 for count == 0.
 */
float dlcp_tag_median_abs_f32(const float *g, size_t count, uint32_t permille,
                              dlcp_rng *rng, float *scratch);

/* dlcp_tag_sample_size returns how many values the estimate samples. */
size_t dlcp_tag_sample_size(size_t count, uint32_t permille);

/*
 * dlcp_tag_mean_abs_above returns nonzero if the mean |g| of the |count|
 * floats at |g| is above |median|.  An empty range is not important.
 */
int dlcp_tag_mean_abs_above(const float *g, size_t count, float median);

#endif /* DLCP_PROTO_TAG_H */
