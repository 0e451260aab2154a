/* desired.h: the coordinator (desired.c): Consul's snapshots become the desired state, built part
 * by part (servers, users) and published by reference; the rejections it logs. */
#ifndef SK_SYNC_DESIRED_H
#define SK_SYNC_DESIRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"

/* The coordinator thread: waits for changes (quiescence), builds what changed, publishes. */
void *desired_coordinator_main(void *arg);

/* --once: build every part from every snapshot with the lock held (no other thread); false when
 * the snapshot must not be applied. Then publish it (taken from lr); returns the state replaced. */
bool desired_build_all(struct agent *ag, struct layout_result *lr);
struct agent_want *desired_publish_all(struct agent *ag, struct layout_result *lr);

#endif
