/*
 * cq.h: completion queues, the hand-over point between a communicator's
 * loop thread (producer) and the application (consumer).
 */
#ifndef DLCP_RT_CQ_H
#define DLCP_RT_CQ_H

#include "dlcp/dlcp.h"

/*
 * dlcp_cq_push appends |c| to |cq|, taking ownership of |missing| (an
 * array of c->nmissing ranges from malloc, or NULL); it is freed after the
 * application has seen it.  Returns 0 or DLCP_ERR_NOMEM (then |missing| is
 * freed and the completion reports no ranges).
 */
int dlcp_cq_push(dlcp_cq *cq, const dlcp_completion *c, dlcp_range *missing);

#endif /* DLCP_RT_CQ_H */
