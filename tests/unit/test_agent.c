/* test_agent.c: the agent's health and metrics answers, which never wait on the agent lock, the
 * Prometheus label escaping, and the bounded memory of logged rejections. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "metrics.h"
#include "log.h"

static struct agent ag; /* large: not on the stack */

static void add_server(long hg, const char *host)
{
	struct px_server s = { .hostgroup = hg, .host = (char *)host, .port = 3306, .status = "ONLINE" };

	model_servers_add(&ag.want->parts[0]->servers, &s);
	ag.want->servers = ag.want->parts[0]->servers;
}

/* One watch, one target named px"1, hostgroups 10 and 20, a desired state of 3 servers. */
static int agent_setup(void **state)
{
	static struct px_user u = { .username = "app", .password = "" };

	(void)state;
	memset(&ag, 0, sizeof(ag));
	pthread_mutex_init(&ag.mu, NULL);
	pthread_mutex_init(&ag.pub_mu, NULL);
	pthread_cond_init(&ag.cv, NULL);
	ag.mod = &px_mysql;
	ag.nwatches = 1;
	ag.watches[0].ag = &ag;
	ag.watches[0].prefix = xstrdup("mysql/\"q\\/");
	ag.watches[0].label = metrics_label_value(ag.watches[0].prefix);
	ag.watches[0].have = true;
	ag.watches[0].ok = true;
	ag.watches[0].metric_index = 42;
	ag.ntargets = 1;
	ag.targets = xcalloc(1, sizeof(*ag.targets));
	ag.targets[0].ag = &ag;
	ag.targets[0].pt.name = "px\"1";
	ag.targets[0].label = metrics_label_value(ag.targets[0].pt.name);
	ag.targets[0].reachable = true;
	ag.targets[0].synced_once = true;
	ag.targets[0].in_sync = true;
	ag.nowned = 2;
	ag.owned[0] = 10;
	ag.owned[1] = 20;
	ag.want = xcalloc(1, sizeof(*ag.want));
	atomic_init(&ag.want->refs, 1);
	for (int p = 0; p < 2; p++) {
		ag.want->parts[p] = xcalloc(1, sizeof(*ag.want->parts[p]));
		atomic_init(&ag.want->parts[p]->refs, 1);
	}
	add_server(10, "db1");
	add_server(10, "db2");
	add_server(20, "db3");
	add_server(30, "elsewhere");
	model_users_add(&ag.want->parts[1]->users, &u);
	ag.want->users = ag.want->parts[1]->users;
	agent_publish_desired(&ag);
	return 0;
}

static int agent_teardown(void **state)
{
	(void)state;
	free(ag.watches[0].prefix);
	free(ag.watches[0].label);
	free(ag.targets[0].label);
	free(ag.targets);
	shared_want_put(ag.want);
	ag.want = NULL;
	agent_seen_free(&ag.logged_rejects);
	pthread_cond_destroy(&ag.cv);
	pthread_mutex_destroy(&ag.pub_mu);
	pthread_mutex_destroy(&ag.mu);
	return 0;
}

struct answers {
	bool ready;
	char why[300];
	sk_buf metrics;
};

static void *ask(void *arg)
{
	struct answers *a = arg;

	a->ready = agent_ready(&ag, a->why, sizeof(a->why));
	sk_buf_init(&a->metrics, 1 << 20);
	metrics_render(&ag, &a->metrics);
	if (!sk_buf_add(&a->metrics, "", 1)) /* terminated */
		fail_msg("metrics too long");
	return NULL;
}

/* /readyz and /metrics from another thread while the agent lock is held (as the coordinator holds
 * it while it builds the desired state from every key): both answer within the second, and the
 * desired counts are those published at the last build. */
static void test_answers_while_the_agent_lock_is_held(void **state)
{
	struct answers a = { 0 };
	struct timespec ts;
	pthread_t tid;
	int rc;

	(void)state;
	pthread_mutex_lock(&ag.mu);
	assert_int_equal(pthread_create(&tid, NULL, ask, &a), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	rc = pthread_timedjoin_np(tid, NULL, &ts);
	pthread_mutex_unlock(&ag.mu);
	if (rc != 0) {
		pthread_join(tid, NULL);
		fail_msg("/readyz and /metrics waited for the agent lock (pthread_timedjoin_np: %d)", rc);
	}
	assert_true(a.ready);
	assert_string_equal(a.why, "ready");
	assert_non_null(strstr(a.metrics.data, "proxysql_sync_desired_servers{hostgroup=\"10\"} 2\n"));
	assert_non_null(strstr(a.metrics.data, "proxysql_sync_desired_servers{hostgroup=\"20\"} 1\n"));
	assert_null(strstr(a.metrics.data, "hostgroup=\"30\""));
	assert_non_null(strstr(a.metrics.data, "proxysql_sync_desired_users 1\n"));
	assert_non_null(strstr(a.metrics.data, "proxysql_sync_consul_index{prefix=\"mysql/\\\"q\\\\/\"} 42\n"));
	assert_non_null(strstr(a.metrics.data, "proxysql_sync_target_in_sync{target=\"px\\\"1\"} 1\n"));
	assert_null(strstr(a.metrics.data, "\"px\"1\""));
	sk_buf_free(&a.metrics);
}

/* What /readyz says comes from what the threads published: a watch's failure text, a target's
 * reason. */
static void test_ready_reads_the_published_reasons(void **state)
{
	struct answers a = { 0 };

	(void)state;
	ag.watches[0].ok = false;
	snprintf(ag.watches[0].error, sizeof(ag.watches[0].error), "HTTP 500: No cluster leader");
	ask(&a);
	assert_false(a.ready);
	assert_string_equal(a.why, "consul mysql/\"q\\/: HTTP 500: No cluster leader");
	assert_non_null(strstr(a.metrics.data, "proxysql_sync_consul_up{prefix=\"mysql/\\\"q\\\\/\"} 0\n"));
	sk_buf_free(&a.metrics);
	ag.watches[0].ok = true;
	ag.targets[0].in_sync = false;
	snprintf(ag.targets[0].why, sizeof(ag.targets[0].why), "verify failed after an apply");
	ask(&a);
	assert_false(a.ready);
	assert_string_equal(a.why, "target px\"1: verify failed after an apply");
	sk_buf_free(&a.metrics);
}

static void test_label_value(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "px1", "px1" },
		{ "px\"1", "px\\\"1" },
		{ "a\\b", "a\\\\b" },
		{ "line\nbreak", "line\\nbreak" },
		{ "\\\"\n", "\\\\\\\"\\n" },
		{ "", "" },
		{ "tab\tand é", "tab\tand é" }, /* other bytes are valid in a label value */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *v = metrics_label_value(cases[i].in);

		assert_string_equal(v, cases[i].out);
		free(v);
	}
}

static void test_seen_set_is_bounded(void **state)
{
	struct agent_seen s = { 0 };
	char text[64];

	(void)state;
	for (int i = 0; i < AGENT_SEEN_MAX; i++) {
		snprintf(text, sizeof(text), "key%d: bad", i);
		assert_int_equal(agent_seen_add(&s, text), AGENT_SEEN_NEW);
	}
	assert_int_equal(s.n, AGENT_SEEN_MAX);
	assert_true(s.size <= 2 * AGENT_SEEN_MAX);
	for (int i = 0; i < AGENT_SEEN_MAX; i += 97) {
		snprintf(text, sizeof(text), "key%d: bad", i);
		assert_int_equal(agent_seen_add(&s, text), AGENT_SEEN_OLD);
		assert_true(agent_seen_has(&s, text));
	}
	assert_int_equal(agent_seen_add(&s, "one more: bad"), AGENT_SEEN_FULL);
	assert_false(agent_seen_has(&s, "one more: bad"));
	assert_int_equal(s.n, AGENT_SEEN_MAX);
	agent_seen_free(&s);
}

/* The log lines of one build of `n` rejections (key0 .. key<n-1>, from `from`). */
static size_t log_build(FILE *f, size_t from, size_t n, size_t *summaries)
{
	struct layout_result lr = { 0 };
	char line[800];
	size_t lines = 0;
	long at = ftell(f);

	lr.rejects = xcalloc(n, sizeof(*lr.rejects));
	lr.nrejects = n;
	for (size_t i = 0; i < n; i++) {
		snprintf(line, sizeof(line), "proxysql/users/u%zu", from + i);
		lr.rejects[i].key = xstrdup(line);
		lr.rejects[i].reason = xstrdup("password: not a string");
	}
	agent_log_rejects(&ag, &lr);
	fflush(f);
	fseek(f, at, SEEK_SET);
	*summaries = 0;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		*summaries += strstr(line, "more entries, not logged one by one") != NULL;
	}
	for (size_t i = 0; i < n; i++) {
		free(lr.rejects[i].key);
		free(lr.rejects[i].reason);
	}
	free(lr.rejects);
	return lines;
}

/* Each rejection logged once while it lasts; past the cap one line for the rest, and nothing more
 * while their number stays; a rejection that went away and comes back is logged again. */
static void test_rejections_logged_once_and_bounded(void **state)
{
	FILE *f = tmpfile();
	size_t summaries, n = AGENT_SEEN_MAX + 500;

	(void)state;
	assert_non_null(f);
	log_setup("test", LOG_TEXT, LOG_INFO, f);
	assert_int_equal(log_build(f, 0, 3, &summaries), 3);
	assert_int_equal(ag.rejected_total, 3);
	assert_int_equal(log_build(f, 0, 3, &summaries), 0);
	assert_int_equal(log_build(f, 1, 3, &summaries), 1); /* u3 is new; u0 went away */
	assert_int_equal(log_build(f, 0, 4, &summaries), 1); /* u0 came back */
	assert_int_equal(ag.rejected_now, 4);
	assert_int_equal(log_build(f, 0, n, &summaries), AGENT_SEEN_MAX - 4 + 1);
	assert_int_equal(summaries, 1);
	assert_int_equal(ag.rejected_now, n);
	for (int i = 0; i < 5; i++) /* every rebuild with the same problems: silent */
		assert_int_equal(log_build(f, 0, n, &summaries), 0);
	assert_int_equal(log_build(f, 0, n + 7, &summaries), 1);
	assert_int_equal(summaries, 1);
	assert_true(ag.logged_rejects.n <= AGENT_SEEN_MAX);
	log_setup("test", LOG_TEXT, LOG_INFO, stderr);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_answers_while_the_agent_lock_is_held, agent_setup, agent_teardown),
		cmocka_unit_test_setup_teardown(test_ready_reads_the_published_reasons, agent_setup, agent_teardown),
		cmocka_unit_test(test_label_value),
		cmocka_unit_test(test_seen_set_is_bounded),
		cmocka_unit_test_setup_teardown(test_rejections_logged_once_and_bounded, agent_setup, agent_teardown),
	};

	return cmocka_run_group_tests_name("agent", tests, NULL, NULL);
}
