/* control/ctl_admin.c — the topic and config requests of the Kafka API
 * (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
 * IncrementalAlterConfigs), validated and written to the metadata log
 * (see control/ctl_internal.h for how the control thread is split). */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/config.h"
#include "control/ctl_internal.h"
#include "control/cutil.h"
#include "control/group.h"
#include "control/listeners.h"
#include "control/meta_parts.h"
#include "control/metalog.h"
#include "control/placement.h"
#include "control/txn.h"
#include "dataplane/kafka_ctx.h"
#include "dataplane/kafka_errors.h"
#include "dataplane/topic_name.h"
#include "storage/slog.h"


/* One entry of a request whose records are proposed: the continuation
 * runs once all of them were applied (or one was refused). Counted once
 * in op->pending until then. */
struct ctl_prop {
	struct ctl_op *op;
	struct ctl_req *req;
	struct ctl_topic *ct;
	char name[256];
	int32_t scope;               /* broker configs */
	int left;                    /* records not answered yet */
	int err;                     /* the first refusal */
	void (*cont)(struct ctl *ctl, struct ctl_prop *p);
	struct ctl_prop *next;       /* op->held */
};

static void ctl_broker_configured(struct ctl *ctl, struct ctl_prop *p);

/* An AlterConfigs request's entries wait for each other: their records
 * apply in log order, turns after they were proposed, and a broker
 * entry's continuation rebuilds every topic from the image and the new
 * broker config. So the continuations run only once every record of the
 * request is applied, the broker's first (every topic rebuilt with the
 * request's topic changes and the new defaults), then each topic's (which
 * skips a topic the broker's already rebuilt). Run one at a time, as they
 * came, a topic's continuation could build it before the broker's new
 * defaults (and then be skipped by the broker's rebuild), or the broker's
 * rebuild could run before a topic's records applied and skip them. */
static void ctl_prop_release(struct ctl *ctl, struct ctl_op *op)
{
	for (int broker = 1; broker >= 0; broker--) {
		struct ctl_prop **pp = &op->held;

		while (*pp) {
			struct ctl_prop *p = *pp;

			if ((p->cont == ctl_broker_configured) != broker) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			p->cont(ctl, p);
			free(p);
			op->pending--;
		}
	}
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

static void ctl_prop_done(struct ctl *ctl, void *cookie, int err, const struct metalog_applied *a)
{
	struct ctl_prop *p = cookie;
	struct ctl_op *op = p->op;

	(void)a;
	if (err < 0 && !p->err)
		p->err = err;
	if (--p->left)
		return;
	if (op->req && op->req->kind == CTL_ALTER_CONFIGS) {
		struct ctl_prop **tail = &op->held;

		while (*tail)
			tail = &(*tail)->next;
		*tail = p;   /* in request order */
		if (--op->props_open == 0)
			ctl_prop_release(ctl, op);
		return;
	}
	p->cont(ctl, p);
	free(p);
	if (--op->pending == 0)
		ctl_op_step(ctl, op);
}

/* Propose recs[0..n) (taken) for one entry; p->cont runs once all were
 * answered. n 0: it runs at the next turn all the same. */
static void ctl_prop_start(struct ctl *ctl, struct ctl_prop *p, struct metalog_rec *recs, int n)
{
	p->op->pending++;
	p->op->props_open++;
	p->left = n ? n : 1;
	if (!n)
		ctl_meta_refuse(ctl, 0, ctl_prop_done, p);
	for (int i = 0; i < n; i++)
		ctl_meta_propose(ctl, &recs[i], ctl_prop_done, p);
}

static struct ctl_prop *ctl_prop_new(struct ctl_op *op, struct ctl_req *req, struct ctl_topic *ct, const char *name,
				     void (*cont)(struct ctl *ctl, struct ctl_prop *p))
{
	struct ctl_prop *p = calloc(1, sizeof(*p));

	if (!p)
		abort();   /* the control thread's own bookkeeping */
	p->op = op;
	p->req = req;
	p->ct = ct;
	p->cont = cont;
	snprintf(p->name, sizeof(p->name), "%s", name);
	return p;
}

/* An entry named by an earlier entry of the same request that was not
 * refused: Kafka answers the second INVALID_REQUEST. */
static int ctl_named_before(const struct ctl_req *req, const struct ctl_topic *ct)
{
	for (const struct ctl_topic *o = req->topics; o < ct; o++)
		if (!o->error && !o->broker && o->name.len == ct->name.len &&
		    !memcmp(o->name.ptr, ct->name.ptr, (size_t)ct->name.len))
			return 1;
	return 0;
}

/* An internal topic is the broker's own log: no client request may create,
 * delete, grow or reconfigure one (Kafka's INVALID_REQUEST, "Creation of
 * internal topic ... is prohibited"). */
static void refuse_internal(int kind, const char *name, struct ctl_topic *ct)
{
	ct->error = KERR_INVALID_REQUEST;
	if (kind == CTL_CREATE || kind == CTL_AUTO_CREATE)
		snprintf(ct->message, sizeof(ct->message), "Creation of internal topic %.40s is prohibited", name);
	else if (kind == CTL_DELETE)
		snprintf(ct->message, sizeof(ct->message),
			 "%.40s is an internal topic (%s); it cannot be deleted", name,
			 !strcmp(name, GROUP_OFFSETS_TOPIC) ? "the committed offsets of every group"
			 : !strcmp(name, TXN_STATE_TOPIC)   ? "the state of every transaction"
							    : "the metadata log");
	else if (kind == CTL_CREATE_PARTITIONS)
		snprintf(ct->message, sizeof(ct->message),
			 "%.40s is an internal topic; its partition count is fixed (%s)", name,
			 !strcmp(name, GROUP_OFFSETS_TOPIC) ? "offsets.topic.num.partitions"
			 : !strcmp(name, TXN_STATE_TOPIC)   ? "transaction.state.log.num.partitions"
							    : "one partition");
	else
		snprintf(ct->message, sizeof(ct->message),
			 "%.40s is an internal topic; its configuration is the broker's (docs/configuration.md)",
			 name);
}

/* A wire string (borrowed, not NUL-terminated, -1 = null) as a C string. */
static void kstr_copy(char *dst, size_t n, struct kafka_str s)
{
	snprintf(dst, n, "%.*s", s.len > 0 ? s.len : 0, s.ptr ? s.ptr : "");
}

/* A key Kafka users set that Sluice accepts and ignores: say so in the
 * log, as Kafka 3.x does for message.format.version. */
static void warn_ignored(const char *topic, const char *key, const char *value)
{
	const char *why = topic_config_ignored(key);

	if (why && value)
		slog(SLOG_WARN, "topic %s: %s=%s is accepted and ignored: %s", topic, key, value,
			why);
}

/* CreateTopics and CreatePartitions: rf replicas of n partitions can be
 * placed: an explicit assignment names only unfenced registered brokers
 * (INVALID_REPLICA_ASSIGNMENT), a replication factor is at most their
 * count (INVALID_REPLICATION_FACTOR, the default's too), as Kafka says.
 * 0, or -1 with ct->error set. */
static int ctl_check_replicas(struct ctl *ctl, struct ctl_topic *ct, int rf, int32_t n)
{
	struct placement_broker *pb;
	int nb = ctl_place_brokers(ctl, &pb), rc = 0;
	int32_t bad = -1;

	if (ct->assign) {
		if (ct->nassign != n)
			rc = -ERANGE;
		else
			rc = placement_check(pb, nb, n, ct->assign_rf, ct->assign, &bad);
		free(pb);
		if (rc == 0)
			return 0;
		ct->error = KERR_INVALID_REPLICA_ASSIGNMENT;
		if (rc == -ENOENT)
			snprintf(ct->message, sizeof(ct->message),
				 "The manual partition assignment includes broker %d, but no such broker is registered "
				 "and unfenced.", bad);
		else if (rc == -EINVAL)
			snprintf(ct->message, sizeof(ct->message),
				 "The manual partition assignment includes the broker %d more than once.", bad);
		else
			snprintf(ct->message, sizeof(ct->message),
				 "the manual partition assignment names %d partitions, the request adds %d",
				 ct->nassign, n);
		return -1;
	}
	free(pb);
	if (rf <= nb)
		return 0;
	/* Kafka: more replicas than brokers is refused, the default's too */
	ct->error = KERR_INVALID_REPLICATION_FACTOR;
	snprintf(ct->message, sizeof(ct->message), "Replication factor: %d%s larger than available brokers: %d.", rf,
		 ct->replication == -1 ? " (default.replication.factor)" : "", nb);
	return -1;
}

static void ctl_topic_configured(struct ctl *ctl, struct ctl_prop *p);

/* CreatePartitions and AlterConfigs: a new snapshot entry for the topic
 * (the old one is retired, its logs stay open). AlterConfigs proposes its
 * records and goes on in ctl_topic_configured once they were applied. */
static void ctl_change_topic(struct ctl *ctl, struct ctl_op *op, struct ctl_req *req, struct ctl_topic *ct,
			     const char *name)
{
	struct md_topic *t = ctl_topic_served(ctl, ct->name.ptr, ct->name.len);   /* a handle */
	const struct meta_topic *mt;
	struct md_topic *nt;
	int rc = 0;

	if (!t) {
		ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		snprintf(ct->message, sizeof(ct->message), "unknown topic");
		return;
	}
	if (ctl_named_before(req, ct)) {
		ct->error = KERR_INVALID_REQUEST;
		snprintf(ct->message, sizeof(ct->message), "topic named twice in one request");
		return;
	}
	if (req->kind == CTL_CREATE_PARTITIONS) {
		if (ct->partitions <= t->nparts || ct->partitions > 100000) {
			ct->error = KERR_INVALID_PARTITIONS;
			snprintf(ct->message, sizeof(ct->message),
				 "topic has %d partitions: the new count must be larger (and at most 100000), got %d",
				 t->nparts, ct->partitions);
			return;
		}
		mt = metalog_topic(ctl->ml, name);
		if (!mt || mt->partitions != t->nparts) {
			ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
			snprintf(ct->message, sizeof(ct->message), "unknown topic");
			return;
		}
		/* as many replicas as the first partition has */
		int rf = ct->assign ? ct->assign_rf : mt->parts[0].nreplicas, avail;
		int32_t add = ct->partitions - t->nparts, *placed = NULL;

		if (ctl_check_replicas(ctl, ct, rf, add) < 0)
			return;
		if (ctl_fd_claim(ctl, op, ct, add) < 0)
			return;
		if (req->validate_only)
			return;
		if (!ct->assign && (rc = ctl_place(ctl, name, t->nparts, add, rf, 0, &placed, &avail)) < 0) {
			ct->error = KERR_INVALID_REPLICATION_FACTOR;
			snprintf(ct->message, sizeof(ct->message), "Replication factor: %d larger than available "
				 "brokers: %d.", rf, avail);
			return;
		}
		/* the metadata log gets the new count and placement once every
		 * new partition has opened (ctl_commit_partitions): a failure
		 * leaves no trace. What it will hold: PARTITIONS bumps the
		 * topic's epoch (and the epoch of partitions placed the old
		 * way), the new partitions as placed, at epoch 0. */
		struct meta_topic grown = *mt;
		const int32_t *ids = ct->assign ? ct->assign : placed;

		grown.partitions = ct->partitions;
		grown.leader_epoch++;
		grown.parts = xcalloc((size_t)ct->partitions, sizeof(*grown.parts));
		for (int32_t i = 0; i < ct->partitions; i++) {
			struct meta_part *gp = &grown.parts[i];

			if (i < t->nparts) {
				*gp = mt->parts[i];
				if (gp->legacy)
					gp->leader_epoch = grown.leader_epoch;
				continue;
			}
			gp->replicas = gp->isr = (int32_t *)&ids[(size_t)(i - t->nparts) * rf];
			gp->nreplicas = gp->nisr = (int16_t)rf;
			gp->leader = gp->replicas[0];
		}
		nt = ctl_topic_build(ctl, &grown);
		free(grown.parts);
		free(placed);
		/* existing partitions keep their owner and log (the book's:
		 * ctl_homes.h, written into nt as it is published) */
		op->replaced[op->nreplaced++] = t;
		op->created_for[op->ncreated] = ct;
		op->created[op->ncreated++] = nt;
		ctl_topic_open_parts(ctl, op, nt, t->nparts);
		return;
	}
	char k[256], v[4096];
	struct metalog_rec *recs;
	int n = 0;

	/* validate everything before changing anything */
	for (int j = 0; j < ct->nconfigs; j++) {
		kstr_copy(k, sizeof(k), ct->keys[j]);
		kstr_copy(v, sizeof(v), ct->values[j]);
		if ((!ct->ops || ct->ops[j] == CTL_CFG_SET) &&
		    topic_config_validate(k, v, ct->message, sizeof(ct->message)) < 0) {
			ct->error = KERR_INVALID_CONFIG;
			return;
		}
		if (ct->ops && ct->ops[j] != CTL_CFG_SET && ct->ops[j] != CTL_CFG_DELETE) {
			ct->error = KERR_INVALID_CONFIG;
			snprintf(ct->message, sizeof(ct->message), "APPEND and SUBTRACT apply to list configs only");
			return;
		}
	}
	if (req->validate_only)
		return;
	/* the records, all built before any is proposed */
	if (!(recs = calloc((size_t)t->nconfigs + (size_t)ct->nconfigs + 1, sizeof(*recs))))
		abort();
	if (ct->replace) {
		/* AlterConfigs: what is not named goes back to its default */
		for (int i = 0; i < t->nconfigs && rc >= 0; i++) {
			int named = 0;

			for (int j = 0; j < ct->nconfigs; j++)
				named |= kafka_str_eq(ct->keys[j], t->config_keys[i]);
			if (!named && (rc = metalog_build_config(ctl->ml, name, t->config_keys[i], NULL, &recs[n])) == 0)
				n += recs[n].len > 0;
		}
	}
	for (int j = 0; j < ct->nconfigs && rc >= 0; j++) {
		kstr_copy(k, sizeof(k), ct->keys[j]);
		kstr_copy(v, sizeof(v), ct->values[j]);
		rc = metalog_build_config(ctl->ml, name, k, (ct->ops && ct->ops[j] == CTL_CFG_DELETE) ? NULL : v,
					  &recs[n]);
		if (rc == 0)
			n += recs[n].len > 0;
	}
	if (rc < 0) {
		for (int i = 0; i < n; i++)
			metalog_rec_free(&recs[i]);
		free(recs);
		ct->error = rc == -EINVAL || rc == -ENOENT ? KERR_INVALID_CONFIG : KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
		return;
	}
	ctl_prop_start(ctl, ctl_prop_new(op, req, ct, name, ctl_topic_configured), recs, n);
	free(recs);
}

/* AlterConfigs on a topic: its records were applied (or one was refused):
 * the topic's new snapshot entry, its partitions told the new config. */
static void ctl_topic_configured(struct ctl *ctl, struct ctl_prop *p)
{
	struct ctl_op *op = p->op;
	struct ctl_topic *ct = p->ct;
	struct md_topic *t = ctl_topic_served(ctl, p->name, (int32_t)strlen(p->name));   /* a handle */
	const struct meta_topic *mt = metalog_topic(ctl->ml, p->name);
	struct md_topic *nt;

	if (p->err < 0) {
		ct->error = p->err == -EINVAL || p->err == -ENOENT ? KERR_INVALID_CONFIG : KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-p->err));
		if (!mt || !t)
			return;   /* deleted meanwhile */
	}
	if (!mt || !t) {
		ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		snprintf(ct->message, sizeof(ct->message), "unknown topic");
		return;
	}
	for (int j = 0; j < ct->nconfigs; j++) {
		char k[256], v[4096];

		kstr_copy(k, sizeof(k), ct->keys[j]);
		kstr_copy(v, sizeof(v), ct->values[j]);
		if (!p->err && (!ct->ops || ct->ops[j] == CTL_CFG_SET))
			warn_ignored(p->name, k, v);
	}
	for (int i = 0; i < op->nreplaced; i++)
		if (op->replaced[i] == t)
			return;   /* the broker's change of this request rebuilt it already */
	nt = ctl_topic_build(ctl, mt);
	/* existing partitions keep their owner and log (the book's) */
	op->replaced[op->nreplaced++] = t;
	op->created_for[op->ncreated] = ct;
	op->created[op->ncreated++] = nt;
	ctl_topic_tell_config(ctl, op, nt);
}

/* AlterConfigs / IncrementalAlterConfigs on the broker resource: the
 * cluster-wide topic defaults, written to the metadata log, then every
 * topic rebuilt (a new snapshot entry; its partitions get the new storage
 * settings through part_proxy_set_config) so the topics without an override
 * follow. Keys that cannot change at run time are refused as Kafka refuses
 * them (INVALID_REQUEST, "Cannot update these configs dynamically").
 *
 * A listener's keystore and truststore (listener.name.<l>.ssl.*, Kafka's
 * per-broker dynamic listener configs) change on this node's resource
 * only: the new material must load first (the listener's server and, on
 * the inter-broker listener, this node's client side), then the records
 * are proposed, and once applied the listener's context is rebuilt
 * (listeners_tls_apply). */

/* ct's j-th key into k; a listener's store key with its listener's name
 * lower-cased, as Kafka spells the prefix (listener.name.external.), so
 * that one key has one record whatever the case it was sent in. */
static void broker_key(const struct ctl_topic *ct, int j, char *k, size_t len)
{
	kstr_copy(k, len, ct->keys[j]);
	if (config_dynamic_per_broker(k))
		for (char *c = k + strlen("listener.name."); *c && *c != '.'; c++)
			*c = (char)tolower((unsigned char)*c);
}

/* ct's j-th key is ek (a record's key). */
static int broker_key_is(const struct ctl_topic *ct, int j, const char *ek)
{
	char k[256];

	broker_key(ct, j, k, sizeof(k));
	return !strcmp(k, ek);
}

/* The listener a listener.name.<l>.<suffix> key names: its index among
 * this node's SSL listeners, or -1. */
static int key_listener(struct ctl *ctl, const char *key)
{
	const char *l = key + strlen("listener.name."), *dot = strchr(l, '.');

	return dot ? listeners_tls_find(&ctl->b->set, l, (size_t)(dot - l)) : -1;
}

/* The config in effect once ct's changes of this node's resource are in:
 * the static one, the cluster-wide records, this node's records (less
 * those ct names; none of them for AlterConfigs, which replaces them
 * all), then ct's values. 0 or -ENOMEM. */
static int next_cfg(struct ctl *ctl, struct ctl_topic *ct, struct config **out)
{
	char k[256], v[4096], err[512];
	struct config *c;
	int rc = config_dup(ctl->cfg, &c);

	if (rc < 0)
		return rc;
	for (int pass = 0; pass < 2; pass++) {
		int32_t sc;
		const char *ek, *ev;

		for (int i = 0; metalog_broker_config_at(ctl->ml, i, &sc, &ek, &ev) == 0; i++) {
			int named = 0;

			if (pass == 0 ? sc != META_SCOPE_CLUSTER || config_dynamic_per_broker(ek)
				      : sc != ctl->b->set.node_id)
				continue;
			for (int j = 0; j < ct->nconfigs; j++)
				named |= broker_key_is(ct, j, ek);
			if ((pass == 1 && (ct->replace || named)) || !config_dynamic(ek))
				continue;
			config_set(c, ek, ev, pass ? "dynamic-broker" : "dynamic-default", err, sizeof(err));
		}
	}
	for (int j = 0; j < ct->nconfigs; j++) {
		if ((ct->ops && ct->ops[j] == CTL_CFG_DELETE) || ct->values[j].len < 0)
			continue;
		broker_key(ct, j, k, sizeof(k));
		kstr_copy(v, sizeof(v), ct->values[j]);
		config_set(c, k, v, "dynamic-broker", err, sizeof(err));   /* validated before */
	}
	*out = c;
	return 0;
}

/* The SSL listeners ct changes (each listener whose stores it names; all
 * of them for AlterConfigs, which may drop this node's dynamic ones) load
 * the stores they would have: 0, or INVALID_REQUEST (Kafka's code for a
 * broker config that does not validate) in ct naming the key and why. */
static int check_listeners(struct ctl *ctl, struct ctl_topic *ct)
{
	struct broker *b = ctl->b;
	struct config *next;
	char k[256], why[512];
	int rc = 0;

	if (next_cfg(ctl, ct, &next) < 0) {
		ct->error = KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "out of memory");
		return -ENOMEM;
	}
	for (int li = 0; li < b->set.nlisteners && rc == 0; li++) {
		const char *key = NULL;

		for (int j = 0; j < ct->nconfigs && !key; j++) {
			broker_key(ct, j, k, sizeof(k));
			if (config_dynamic_per_broker(k) && key_listener(ctl, k) == li)
				key = k;
		}
		if (!b->tls[li] || (!key && !ct->replace))
			continue;
		if ((rc = listeners_tls_check(b, next, li, why, sizeof(why))) < 0) {
			/* the listener's key the failure names (ssl.keystore.key
			 * with a wrong password), else its first one changed */
			for (int j = 0; j < ct->nconfigs; j++) {
				char kj[256];
				const char *suf;

				broker_key(ct, j, kj, sizeof(kj));
				if (config_dynamic_per_broker(kj) && key_listener(ctl, kj) == li &&
				    (suf = strchr(kj + strlen("listener.name."), '.')) && strstr(why, suf + 1)) {
					memcpy(k, kj, sizeof(k));
					key = k;
					break;
				}
			}
			ct->error = KERR_INVALID_REQUEST;
			if (key)
				snprintf(ct->message, sizeof(ct->message), "%.120s: not taken: %.250s", key, why);
			else
				snprintf(ct->message, sizeof(ct->message), "listener.name.%.40s.ssl.keystore.location: "
					 "without this node's dynamic values the certificates do not load: %.250s",
					 b->set.listeners[li].name, why);
		}
	}
	config_destroy(next);
	return rc;
}

static void ctl_change_broker(struct ctl *ctl, struct ctl_op *op, struct ctl_req *req, struct ctl_topic *ct)
{
	char name[64], k[256], v[4096];
	int32_t scope = META_SCOPE_CLUSTER;
	struct metalog_rec *recs;
	struct ctl_prop *p;
	int rc = 0, n = 0, nb = 0, listeners = 0;

	kstr_copy(name, sizeof(name), ct->name);
	if (name[0]) {
		char *end;
		long id = strtol(name, &end, 10);

		if (*end || id != ctl->b->set.node_id) {
			/* Kafka's words: a node's configs go to that node (clients
			 * send them there), "" names the cluster-wide default */
			ct->error = KERR_INVALID_REQUEST;
			if (*end || end == name)
				snprintf(ct->message, sizeof(ct->message), "Node id must be an integer, but it is: %.40s",
					 name);
			else
				snprintf(ct->message, sizeof(ct->message),
					 "Unexpected broker id, expected %d, but received %.40s (send a node's configs to that "
					 "node; \"\" names the cluster-wide default)", ctl->b->set.node_id, name);
			return;
		}
		scope = ctl->b->set.node_id;
	}
	for (int j = 0; j < ct->nconfigs; j++) {
		int del = (ct->ops && ct->ops[j] == CTL_CFG_DELETE) || ct->values[j].len < 0;

		if (ct->ops && ct->ops[j] != CTL_CFG_SET && ct->ops[j] != CTL_CFG_DELETE) {
			ct->error = KERR_INVALID_CONFIG;
			snprintf(ct->message, sizeof(ct->message), "APPEND and SUBTRACT apply to list configs only");
			return;
		}
		broker_key(ct, j, k, sizeof(k));
		kstr_copy(v, sizeof(v), ct->values[j]);
		rc = config_dynamic_validate(k, del ? NULL : v, ct->message, sizeof(ct->message));
		if (rc < 0) {
			ct->error = rc == -EPERM ? KERR_INVALID_REQUEST : KERR_INVALID_CONFIG;
			return;
		}
		if (config_dynamic_per_broker(k) && scope == META_SCOPE_CLUSTER) {
			/* Kafka's words: a listener's stores are one node's */
			ct->error = KERR_INVALID_REQUEST;
			snprintf(ct->message, sizeof(ct->message), "Cannot update these configs at default cluster "
				 "level, broker id must be specified: %.200s", k);
			return;
		}
		if (config_dynamic_per_broker(k) && key_listener(ctl, k) < 0) {
			ct->error = KERR_INVALID_REQUEST;
			snprintf(ct->message, sizeof(ct->message), "%.200s: node %d has no SSL or SASL_SSL listener "
				 "of that name (listeners)", k, ctl->b->set.node_id);
			return;
		}
		listeners |= config_dynamic_per_broker(k);
	}
	/* the new stores load before anything is written (validateOnly too) */
	if ((listeners || (ct->replace && scope != META_SCOPE_CLUSTER)) && check_listeners(ctl, ct) < 0)
		return;
	if (req->validate_only)
		return;
	/* the records, all built before any is proposed */
	{
		int32_t sc;
		const char *ek, *ev;

		while (metalog_broker_config_at(ctl->ml, nb, &sc, &ek, &ev) == 0)
			nb++;
	}
	if (!(recs = calloc((size_t)nb + (size_t)ct->nconfigs + 1, sizeof(*recs))))
		abort();
	if (ct->replace) {
		/* AlterConfigs: what is not named goes back to the static value */
		int32_t sc;
		const char *ek, *ev;

		for (int i = 0; rc >= 0 && metalog_broker_config_at(ctl->ml, i, &sc, &ek, &ev) == 0; i++) {
			int named = 0;

			for (int j = 0; j < ct->nconfigs; j++)
				named |= broker_key_is(ct, j, ek);
			if (sc == scope && !named && (rc = metalog_build_broker_config(ctl->ml, scope, ek, NULL, &recs[n])) == 0)
				n += recs[n].len > 0;
		}
	}
	for (int j = 0; j < ct->nconfigs && rc >= 0; j++) {
		int del = (ct->ops && ct->ops[j] == CTL_CFG_DELETE) || ct->values[j].len < 0;

		broker_key(ct, j, k, sizeof(k));
		kstr_copy(v, sizeof(v), ct->values[j]);
		if ((rc = metalog_build_broker_config(ctl->ml, scope, k, del ? NULL : v, &recs[n])) == 0)
			n += recs[n].len > 0;
	}
	if (rc < 0) {
		for (int i = 0; i < n; i++)
			metalog_rec_free(&recs[i]);
		free(recs);
		ct->error = KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
		return;
	}
	p = ctl_prop_new(op, req, ct, name, ctl_broker_configured);
	p->scope = scope;
	ctl_prop_start(ctl, p, recs, n);
	free(recs);
}

/* This node's broker config changed (ct: the request, NULL at start):
 * its SSL listeners take the stores the config in effect gives them
 * (those ct names rebuilt even when the value is the same, which rereads
 * the files, as Kafka's). A failure here (the files changed since they
 * were checked) leaves that listener its certificates, said on stderr
 * (never a password: the errors name keys and files). */
void ctl_listeners_follow(struct ctl *ctl, struct ctl_topic *ct)
{
	unsigned char force[BROKER_MAX_LISTENERS] = { 0 };
	char k[256], err[512];
	int rc;

	for (int j = 0; ct && j < ct->nconfigs; j++) {
		int li;

		broker_key(ct, j, k, sizeof(k));
		if (config_dynamic_per_broker(k) && (li = key_listener(ctl, k)) >= 0)
			force[li] = 1;
	}
	rc = listeners_tls_apply(ctl->b, ctl->eff, force, err, sizeof(err));
	if (rc < 0)
		slog(SLOG_WARN, "a listener's dynamic TLS config not taken, its previous certificates stay: %s",
			err);
	else if (rc > 0)
		slog(SLOG_NOTICE, "%d SSL listener%s took %s keystore and truststore from the broker config "
			"(dynamic)", rc, rc == 1 ? "" : "s", rc == 1 ? "its" : "their");
}

/* The broker's records were applied (or one was refused): the broker
 * config in effect rebuilt, then every topic (a new snapshot entry; its
 * partitions get the new storage settings) so those without an override
 * follow. */
static void ctl_broker_configured(struct ctl *ctl, struct ctl_prop *p)
{
	const struct config *served = ctl_cfg_served(ctl);
	struct ctl_op *op = p->op;
	struct ctl_topic *ct = p->ct;
	struct config *eff;
	int rc = p->err, n;

	if (rc >= 0)
		rc = ctl_build_cfg(ctl, &eff);
	if (rc < 0) {
		ct->error = KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
		return;
	}
	/* an effective config no snapshot has carried yet is nobody's */
	if (served && ctl->eff != served)
		config_destroy(ctl->eff);
	ctl->eff = eff;
	if (p->scope == ctl->b->set.node_id)
		ctl_listeners_follow(ctl, ct);
	if (!served)
		return;
	n = op->ncreated + metalog_topic_count(ctl->ml) + 1;
	op->created = realloc(op->created, (size_t)n * sizeof(*op->created));
	op->created_for = realloc(op->created_for, (size_t)n * sizeof(*op->created_for));
	op->replaced = realloc(op->replaced, (size_t)(op->nreplaced + metalog_topic_count(ctl->ml) + 1) *
			       sizeof(*op->replaced));
	if (!op->created || !op->created_for || !op->replaced)
		abort();   /* the control thread's own bookkeeping */
	/* the image's topics, each with the handle of the served entry of its
	 * name (given back to the builder, replaced) */
	for (int i = 0; i < metalog_topic_count(ctl->ml); i++) {
		const struct meta_topic *mt = metalog_topic_at(ctl->ml, i);
		struct md_topic *t = ctl_topic_served(ctl, mt->name, (int32_t)strlen(mt->name)), *nt;
		int done = 0;

		if (!t || metalog_topic(ctl->ml, t->name) != mt)
			continue;   /* not served, or its name another entry's in the image */
		for (int j = 0; j < op->nreplaced; j++)
			done |= op->replaced[j] == t;
		if (done)
			continue;
		nt = ctl_topic_build(ctl, mt);
		op->replaced[op->nreplaced++] = t;
		op->created_for[op->ncreated] = NULL;
		op->created[op->ncreated++] = nt;
		ctl_topic_tell_config(ctl, op, nt);
	}
}

/* CreateTopics: the TOPIC record was applied (or refused: a topic of that
 * name was created meanwhile): its snapshot entry, its partitions opening. */
static void ctl_topic_created(struct ctl *ctl, struct ctl_prop *p)
{
	struct ctl_op *op = p->op;
	struct ctl_topic *ct = p->ct;
	const struct meta_topic *mt = metalog_topic(ctl->ml, p->name);
	struct md_topic *t;

	if (p->err < 0 || !mt) {
		int err = p->err < 0 ? p->err : -ENOENT;

		ct->error = err == -EEXIST ? KERR_TOPIC_ALREADY_EXISTS : KERR_UNKNOWN_SERVER_ERROR;
		snprintf(ct->message, sizeof(ct->message), err == -EEXIST ? "topic already exists: %.150s"
			 : "metadata log: %.150s", err == -EEXIST ? p->name : strerror(-err));
		return;
	}
	t = ctl_topic_build(ctl, mt);
	for (int j = 0; j < ct->nconfigs; j++) {
		char k[256], v[256];

		kstr_copy(k, sizeof(k), ct->keys[j]);
		kstr_copy(v, sizeof(v), ct->values[j]);
		warn_ignored(p->name, k, v);
	}
	op->created_for[op->ncreated] = ct;
	op->created[op->ncreated++] = t;
	ctl_topic_open_parts(ctl, op, t, 0);
}

/* DeleteTopics: the REMOVE_TOPIC record was applied (or refused: deleted
 * meanwhile): the topic's partitions retired on their shards. */
static void ctl_topic_deleted(struct ctl *ctl, struct ctl_prop *p)
{
	struct ctl_op *op = p->op;
	struct md_topic *t = ctl_topic_served(ctl, p->name, (int32_t)strlen(p->name));   /* a handle */

	if (p->err < 0 || !t) {
		p->ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	for (int i = 0; i < op->ndeleted; i++)
		if (op->deleted[i] == t)
			return;
	op->deleted[op->ndeleted++] = t;
	ctl_topic_retire_parts(ctl, op, t);
}

static void admin_start(struct ctl *ctl, struct ctl_req *req)
{
	struct ctl_op *op = calloc(1, sizeof(*op));

	ctl->ops_open++;
	op->req = req;
	op->fd_free = INT64_MIN;
	op->created = calloc((size_t)req->n + 1, sizeof(*op->created));
	op->deleted = calloc((size_t)req->n + 1, sizeof(*op->deleted));
	op->replaced = calloc((size_t)req->n + 1, sizeof(*op->replaced));
	op->created_for = calloc((size_t)req->n + 1, sizeof(*op->created_for));
	op->drop = calloc((size_t)req->n + 1, 1);
	for (int i = 0; i < req->n; i++) {
		struct ctl_topic *ct = &req->topics[i];
		char name[256];

		ct->error = 0;
		if (ct->preset) {
			ct->error = ct->preset;
			continue;
		}
		ct->message[0] = 0;
		if (req->kind == CTL_ALTER_CONFIGS && ct->broker) {
			ctl_change_broker(ctl, op, req, ct);
			continue;
		}
		if (!topic_name_valid(ct->name.ptr, ct->name.len)) {
			ct->error = KERR_INVALID_TOPIC_EXCEPTION;
			snprintf(ct->message, sizeof(ct->message),
				 "topic names are 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'");
			continue;
		}
		memcpy(name, ct->name.ptr, (size_t)ct->name.len);
		name[ct->name.len] = 0;
		if (topic_name_internal(ct->name.ptr, ct->name.len)) {
			/* a group's partition is its id's hash modulo the count, a
			 * transaction's likewise; the metadata log is no topic */
			refuse_internal(req->kind, name, ct);
			continue;
		}
		if (req->kind == CTL_CREATE_PARTITIONS || req->kind == CTL_ALTER_CONFIGS) {
			ctl_change_topic(ctl, op, req, ct, name);
			continue;
		}
		if (req->kind == CTL_DELETE) {
			const struct md_topic *t = ctl_topic_served(ctl, ct->name.ptr, ct->name.len);
			struct metalog_rec r;

			if (!t || metalog_build_delete_topic(ctl->ml, name, &r) < 0) {
				ct->error = KERR_UNKNOWN_TOPIC_OR_PARTITION;
				continue;
			}
			ctl_prop_start(ctl, ctl_prop_new(op, req, ct, name, ctl_topic_deleted), &r, 1);
			continue;
		}
		/* create */
		int32_t np = ct->partitions == -1 ? (int32_t)config_int(ctl->cfg, "num.partitions") : ct->partitions;
		const char *keys[64], *vals[64];
		char kbuf[64][256], vbuf[64][256];
		int bad = 0;

		if (ctl_topic_served(ctl, ct->name.ptr, ct->name.len)) {
			ct->error = KERR_TOPIC_ALREADY_EXISTS;
			snprintf(ct->message, sizeof(ct->message), "topic already exists: %.150s", name);
			continue;
		}
		if (np <= 0 || np > 100000) {
			/* Kafka: -1 is the default, anything else below 1 is refused */
			ct->error = KERR_INVALID_PARTITIONS;
			snprintf(ct->message, sizeof(ct->message),
				 "number of partitions must be 1..100000 (or -1 for num.partitions), got %d", np);
			continue;
		}
		if (ct->replication != -1 && ct->replication < 1) {
			ct->error = KERR_INVALID_REPLICATION_FACTOR;
			snprintf(ct->message, sizeof(ct->message),
				 "replication factor must be at least 1 (or -1 for default.replication.factor), got %d",
				 ct->replication);
			continue;
		}
		int rf = ct->replication == -1 ? (int)config_int(ctl->eff, "default.replication.factor")
					       : ct->replication;

		if (ctl_check_replicas(ctl, ct, rf, np) < 0)
			continue;
		if (ct->nconfigs > 64) {
			ct->error = KERR_INVALID_CONFIG;
			snprintf(ct->message, sizeof(ct->message), "too many configs");
			continue;
		}
		if (ctl_fd_claim(ctl, op, ct, np) < 0)
			continue;
		for (int j = 0; j < ct->nconfigs && !bad; j++) {
			struct kafka_str k = ct->keys[j], v = ct->values[j];

			kstr_copy(kbuf[j], sizeof(kbuf[j]), k);
			kstr_copy(vbuf[j], sizeof(vbuf[j]), v);
			keys[j] = kbuf[j];
			vals[j] = vbuf[j];
			if (topic_config_validate(keys[j], vals[j], ct->message, sizeof(ct->message)) < 0) {
				ct->error = KERR_INVALID_CONFIG;
				bad = 1;
			}
		}
		if (bad || req->validate_only)
			continue;
		struct metalog_rec *recs = NULL;
		int32_t *placed = NULL;
		int nrecs = 0, avail;
		int rc = ct->assign ? 0 : ctl_place(ctl, name, 0, np, rf, 0, &placed, &avail);

		if (rc == 0)
			rc = metalog_build_topic_placed(ctl->ml, name, np, keys, vals, ct->nconfigs, rf,
							ct->assign ? ct->assign : placed, &recs, &nrecs);
		free(placed);
		if (rc < 0) {
			ct->error = rc == -EEXIST ? KERR_TOPIC_ALREADY_EXISTS : KERR_UNKNOWN_SERVER_ERROR;
			snprintf(ct->message, sizeof(ct->message), "metadata log: %s", strerror(-rc));
			continue;
		}
		ctl_prop_start(ctl, ctl_prop_new(op, req, ct, name, ctl_topic_created), recs, nrecs);
		free(recs);
	}
	if (op->pending == 0)
		ctl_op_step(ctl, op);
}

/* A request from a shard. Topic operations run one at a time: each
 * builds its topics' new versions from the published snapshot and
 * publishes them when done, so a second one started meanwhile would build
 * on the same old versions (two versions of one topic published, the old
 * one retired twice, a deleted topic back). One that comes while another
 * (of any kind: an election's republish, a follow-up, a reassignment)
 * is in flight waits in order. */
static void ctl_handle(void *self, struct shard_msg *m)
{
	struct ctl *ctl = self;
	struct ctl_req *req = m->p[0];

	if (!ctl->ops_open && !ctl->admin_waiting) {
		admin_start(ctl, req);
		return;
	}
	req->next_waiting = NULL;
	if (ctl->admin_waiting_tail)
		ctl->admin_waiting_tail->next_waiting = req;
	else
		ctl->admin_waiting = req;
	ctl->admin_waiting_tail = req;
}

void ctl_admin_tick(struct ctl *ctl)
{
	struct ctl_req *req;

	while (!ctl->ops_open && (req = ctl->admin_waiting)) {
		if (!(ctl->admin_waiting = req->next_waiting))
			ctl->admin_waiting_tail = NULL;
		admin_start(ctl, req);   /* may finish at once (validation, errors): then the next */
	}
}

void ctl_submit(struct kafka_ctx *ctx, struct ctl_req *req)
{
	struct shard_msg m = { .fn = ctl_handle, .p = { req } };

	req->ctx = ctx;
	req->from = kafka_ctx_shard_id(ctx);
	kafka_ctx_send_ctl(ctx, &m);
}
