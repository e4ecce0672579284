/* control/node_role.c — this node's place in the cluster (see node_role.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "control/config.h"
#include "control/node_role.h"

/* The next comma-separated element of *p, trimmed, into out (NUL-ended);
 * 0 at the end of the list, -1 when it does not fit. */
static int next_item(const char **p, char *out, size_t n)
{
	const char *s = *p, *end;
	size_t len;

	while (*s == ',' || isspace((unsigned char)*s))
		s++;
	if (!*s)
		return 0;
	end = strchr(s, ',');
	len = end ? (size_t)(end - s) : strlen(s);
	*p = s + len;
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (len >= n)
		return -1;
	memcpy(out, s, len);
	out[len] = 0;
	return 1;
}

static int in_list(const char *list, const char *name)
{
	const char *p = list;
	char item[256];
	int rc;

	while ((rc = next_item(&p, item, sizeof(item))) > 0)
		if (!strcasecmp(item, name))
			return 1;
	return 0;
}

int node_voters_parse(const char *s, struct node_voter *v, int max, int *n, char *err, size_t errlen)
{
	const char *p = s ? s : "";
	char item[512];
	int rc;

	*n = 0;
	while ((rc = next_item(&p, item, sizeof(item))) != 0) {
		char *at, *end;
		long id;

		if (rc < 0) {
			snprintf(err, errlen, "controller.quorum.voters: an entry is too long");
			return -EINVAL;
		}
		at = strchr(item, '@');
		errno = 0;
		id = at && at != item ? strtol(item, &end, 10) : -1;
		if (!at || at == item || end != at || errno || id < 0 || id > INT32_MAX) {
			snprintf(err, errlen,
				 "controller.quorum.voters: '%.200s' is not ID@HOST:PORT (ID a node.id, 0 or more)",
				 item);
			return -EINVAL;
		}
		if (*n == max) {
			snprintf(err, errlen, "controller.quorum.voters: more than %d voters", max);
			return -E2BIG;
		}
		v[*n].id = (int32_t)id;
		if (config_hostport(at + 1, v[*n].host, sizeof(v[*n].host), &v[*n].port) < 0 || v[*n].port <= 0) {
			snprintf(err, errlen, "controller.quorum.voters: '%.200s': '%.200s' is not HOST:PORT", item,
				 at + 1);
			return -EINVAL;
		}
		for (int i = 0; i < *n; i++) {
			if (v[i].id == v[*n].id) {
				snprintf(err, errlen, "controller.quorum.voters: node id %d is named twice", v[i].id);
				return -EINVAL;
			}
			if (v[i].port == v[*n].port && !strcmp(v[i].host, v[*n].host)) {
				snprintf(err, errlen, "controller.quorum.voters: %s:%d is named twice (nodes %d and %d)",
					 v[i].host, v[i].port, v[i].id, v[*n].id);
				return -EINVAL;
			}
		}
		(*n)++;
	}
	return 0;
}

/* The first entry of `listeners` whose name is not a controller listener
 * (want_ctl 0), or the first that is (want_ctl 1). 1 found, 0 none,
 * -EINVAL with err naming the entry of key. */
static int pick_listener(const char *key, const char *listeners, const char *ctl_names, int want_ctl,
			 char *host, size_t hostlen, int *port, char *err, size_t errlen)
{
	const char *p = listeners ? listeners : "";
	char item[512];
	int rc;

	while ((rc = next_item(&p, item, sizeof(item))) != 0) {
		const char *sep = rc > 0 ? strstr(item, "://") : NULL;
		char name[256];

		if (!sep || sep == item || (size_t)(sep - item) >= sizeof(name) ||
		    config_listener(item, host, hostlen, port) < 0) {
			snprintf(err, errlen, "%s: cannot parse '%.200s' (expected NAME://HOST:PORT)", key,
				 rc > 0 ? item : "an entry too long");
			return -EINVAL;
		}
		memcpy(name, item, (size_t)(sep - item));
		name[sep - item] = 0;
		if (in_list(ctl_names, name) == want_ctl)
			return 1;
	}
	return 0;
}

int node_role_check(const struct config *c, struct node_role *r, char *err, size_t errlen)
{
	const char *roles = config_str(c, "process.roles");
	const char *names = config_str(c, "controller.listener.names");
	const char *p = roles;
	const struct node_voter *self = NULL;
	int32_t node = (int32_t)config_int(c, "node.id");
	char item[256];
	int rc;

	memset(r, 0, sizeof(*r));
	while ((rc = next_item(&p, item, sizeof(item))) != 0) {
		if (rc > 0 && !strcmp(item, "broker") && !r->broker) {
			r->broker = 1;
		} else if (rc > 0 && !strcmp(item, "controller") && !r->controller) {
			r->controller = 1;
		} else {
			int twice = rc > 0 && (!strcmp(item, "broker") || !strcmp(item, "controller"));

			snprintf(err, errlen, "process.roles: '%.100s' %s: give broker, controller, or broker,controller",
				 rc > 0 ? item : roles, twice ? "is named twice" : "is not a role");
			return -EINVAL;
		}
	}
	if (!r->broker && !r->controller) {
		snprintf(err, errlen, "process.roles: empty: give broker, controller, or broker,controller");
		return -EINVAL;
	}
	rc = node_voters_parse(config_str(c, "controller.quorum.voters"), r->voters, NODE_ROLE_MAX_VOTERS,
			       &r->nvoters, err, errlen);
	if (rc < 0)
		return rc;
	for (int i = 0; i < r->nvoters; i++)
		if (r->voters[i].id == node)
			self = &r->voters[i];
	if (!r->nvoters && (!r->broker || !r->controller)) {
		snprintf(err, errlen,
			 "controller.quorum.voters: empty, and process.roles=%s: a node that is only a %s needs "
			 "the controllers of its cluster named there (id@host:port of each); see docs/cluster.md",
			 roles, r->broker ? "broker" : "controller");
		return -EINVAL;
	}
	if (r->nvoters && r->controller && !self) {
		snprintf(err, errlen,
			 "node.id=%d is not among controller.quorum.voters (%.300s): a controller must be one of "
			 "the voters; set node.id to this node's id in that list", node,
			 config_str(c, "controller.quorum.voters"));
		return -EINVAL;
	}
	if (!r->controller && self) {
		snprintf(err, errlen,
			 "node.id=%d is among controller.quorum.voters (%.300s), but process.roles=broker: a node "
			 "that is only a broker is not a voter; give it an id of its own, or make it "
			 "process.roles=broker,controller", node, config_str(c, "controller.quorum.voters"));
		return -EINVAL;
	}
	if ((r->nvoters > 1 || !r->broker || !r->controller) && !config_str(c, "cluster.id")[0]) {
		snprintf(err, errlen,
			 "cluster.id: controller.quorum.voters names %d voter%s for a cluster%s, and every node of a "
			 "cluster must be given the same cluster.id (22 characters of base64url, as Kafka's "
			 "kafka-storage random-uuid prints); see docs/cluster.md", r->nvoters,
			 r->nvoters == 1 ? "" : "s", r->controller && r->broker ? "" : " with nodes of one role");
		return -EINVAL;
	}
	rc = pick_listener("listeners", config_str(c, "listeners"), names, 0, r->listen_host,
			   sizeof(r->listen_host), &r->listen_port, err, errlen);
	if (rc < 0)
		return rc;
	if (rc > 0 && !r->broker) {
		snprintf(err, errlen,
			 "listeners: process.roles=controller, so listeners must only contain controller listeners "
			 "(named in controller.listener.names=%s), as Kafka requires; '%s:%d' is not one (a "
			 "controller-only node serves no Kafka clients)", names, r->listen_host, r->listen_port);
		return -EINVAL;
	}
	if (rc == 0)
		r->listen_port = 0;   /* (pick_listener parsed every entry into it) */
	if (rc == 0 && r->broker) {
		snprintf(err, errlen,
			 "listeners: every entry is a controller listener (named in controller.listener.names=%s): "
			 "add one for clients, e.g. PLAINTEXT://127.0.0.1:9092", names);
		return -EINVAL;
	}
	rc = pick_listener("listeners", config_str(c, "listeners"), names, 1, r->ctl_host, sizeof(r->ctl_host),
			   &r->ctl_port, err, errlen);
	if (rc < 0)
		return rc;
	if (rc == 0)
		r->ctl_port = 0;
	if (rc > 0 && !r->controller) {
		snprintf(err, errlen,
			 "listeners: process.roles=broker, so this node runs no controller and listens on no "
			 "controller listener (named in controller.listener.names=%s, here port %d), as Kafka "
			 "requires: remove it; the broker reaches the controllers at controller.quorum.voters",
			 names, r->ctl_port);
		return -EINVAL;
	}
	if (rc == 0 && r->controller && (r->nvoters > 1 || !r->broker)) {
		snprintf(err, errlen,
			 "listeners: controller.quorum.voters names %d voter%s%s, so this node needs its controller "
			 "listener (a listeners entry named in controller.listener.names=%s, e.g. "
			 "CONTROLLER://%s:%d) on its voter port, which carries the quorum and the controller channel",
			 r->nvoters, r->nvoters == 1 ? "" : "s", r->broker ? "" : " and this node is a controller only",
			 names, self->host, self->port);
		return -EINVAL;
	}
	if (r->ctl_port && r->ctl_port == r->listen_port) {
		snprintf(err, errlen, "listeners: the controller listener and the client listener share port %d",
			 r->ctl_port);
		return -EINVAL;
	}
	if (self && r->ctl_port && self->port != r->ctl_port) {
		snprintf(err, errlen,
			 "controller.quorum.voters: node %d is %s:%d, but its controller listener (listeners, "
			 "named in controller.listener.names) is on port %d",
			 node, self->host, self->port, r->ctl_port);
		return -EINVAL;
	}
	if (!r->broker) {
		/* no Kafka listener: what it prints and listens on is its
		 * controller listener */
		rc = pick_listener("advertised.listeners", config_advertised_listeners(c), names, 0, r->adv_host,
				   sizeof(r->adv_host), &r->adv_port, err, errlen);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			snprintf(err, errlen,
				 "advertised.listeners: process.roles=controller, so it must name no listener for "
				 "clients ('%s:%d' is one): a controller-only node serves no Kafka clients",
				 r->adv_host, r->adv_port);
			return -EINVAL;
		}
		snprintf(r->listen_host, sizeof(r->listen_host), "%s", r->ctl_host);
		r->listen_port = 0;
		r->adv_host[0] = 0;
		r->adv_port = 0;
		snprintf(r->rack, sizeof(r->rack), "%s", config_str(c, "broker.rack"));
		return 0;
	}
	rc = pick_listener("advertised.listeners", config_advertised_listeners(c), names, 0, r->adv_host,
			   sizeof(r->adv_host), &r->adv_port, err, errlen);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		snprintf(err, errlen,
			 "advertised.listeners: every entry is a controller listener (controller.listener.names=%s): "
			 "clients would get no address", names);
		return -EINVAL;
	}
	snprintf(r->rack, sizeof(r->rack), "%s", config_str(c, "broker.rack"));
	return 0;
}
