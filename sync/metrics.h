/* metrics.h: the agent's state as Prometheus text for /metrics (metrics.c). */
#ifndef SK_SYNC_METRICS_H
#define SK_SYNC_METRICS_H

#include "target.h"
#include "util.h"

struct agent;

/* Render /metrics (Prometheus text), without ag->mu as agent_ready. */
void metrics_render(struct agent *ag, sk_buf *out);

/* `s` as the value of a Prometheus label (between the quotes): backslash, double quote and
 * newline escaped, for the caller to free. */
char *metrics_label_value(const char *s);

/* The apply-duration histogram's bucket bounds. */
extern const double metrics_hist_bounds_ms[TARGET_HIST_BUCKETS];

#endif
