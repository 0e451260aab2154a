/* announce.h: this ProxySQL announced to the fleet (announce-prefix or announce-service), by the
 * thread of announce.c. agent.c makes its Consul client (ag->announce_c) and starts it. */
#ifndef SK_SYNC_ANNOUNCE_H
#define SK_SYNC_ANNOUNCE_H

/* The thread body: `arg` is the agent. */
void *announce_main(void *arg);

#endif
