/* control/metrics.c — the scrape and the admin endpoint's JSON views (see
 * metrics.h). Every shard-owned word is read with a relaxed atomic load of
 * an aligned 64-bit word the shard stores whole. */
#include "control/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/admin_tls.h"
#include "control/ctl.h"
#include "control/ctl_homes.h"
#include "control/fd_budget.h"
#include "version.h"   /* SLUICE_GIT_COMMIT: build/gen/, written by control/module.mk */
#include "control/cutil.h"
#include "control/group.h"
#include "control/peer_kafka.h"
#include "control/quorum.h"
#include "control/quorum_tls.h"
#include "control/quorum_transport.h"
#include "control/textbuf.h"
#include "control/txn.h"
#include "dataplane/broker.h"
#include "dataplane/kafka/kafka_msgs.h"
#include "dataplane/peer_session.h"
#include "storage/lathist.h"
#include "dataplane/shard.h"
#include "dataplane/spsc.h"
#include "dataplane/tls.h"

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* The previous scrape's readings, for each shard's busy ratio between two
 * scrapes (control thread only). */
static uint64_t prev_busy[BROKER_MAX_SHARDS], prev_clock;

static void fam(struct textbuf *t, const char *name, const char *type, const char *help)
{
	textbuf_printf(t, "# HELP sluice_%s %s\n# TYPE sluice_%s %s\n", name, help, name, type);
}

/* One family with one sample per shard: the word at `off` in what the
 * shard publishes, its shard_stats or (store) its storage engine's
 * store_stats. */
static void shard_fam(struct textbuf *t, struct broker *b, const char *name, const char *type, const char *help,
		      size_t off, int store)
{
	fam(t, name, type, help);
	for (int i = 0; i < b->set.nshards; i++) {
		struct shard_published p = broker_shard_published(b, i);
		const uint64_t *w = (const uint64_t *)((store ? (const char *)p.store : (const char *)p.stats) + off);

		textbuf_printf(t, "sluice_%s{shard=\"%d\"} %llu\n", name, i, (unsigned long long)LD(*w));
	}
}

static void render_process(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	long size_pages = 0, rss_pages = 0, page = sysconf(_SC_PAGESIZE);
	int nfd = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	DIR *d = opendir("/proc/self/fd");

	if (f) {
		if (fscanf(f, "%ld %ld", &size_pages, &rss_pages) != 2)
			rss_pages = 0;
		fclose(f);
	}
	if (d) {
		for (struct dirent *e; (e = readdir(d));)
			nfd += e->d_name[0] != '.';
		closedir(d);
		nfd--;   /* the directory's own fd */
	}
	fam(t, "build_info", "gauge", "Always 1; labels: the version (the VERSION file), the git commit built "
	    "(-dirty: with uncommitted changes), the DPDK data path on or off.");
	textbuf_printf(t, "sluice_build_info{version=\"%s\",commit=\"%s\",dpdk=\"%s\"} 1\n", SLUICE_VERSION,
		       SLUICE_GIT_COMMIT, b->set.dpdk_enable ? "on" : "off");
	fam(t, "process_resident_memory_bytes", "gauge", "Resident set size of the broker process.");
	textbuf_printf(t, "sluice_process_resident_memory_bytes %lld\n", (long long)rss_pages * page);
	fam(t, "process_open_fds", "gauge", "File descriptors the broker process holds.");
	textbuf_printf(t, "sluice_process_open_fds %d\n", nfd);
	fam(t, "process_uptime_seconds", "gauge", "Seconds since the broker started.");
	textbuf_printf(t, "sluice_process_uptime_seconds %.3f\n", (double)(mono_ms() - ctl_started_ms(ctl)) / 1000.0);
	{
		struct ctl_broker_state bs;

		ctl_brokers_state(ctl, &bs);
		textbuf_printf(t, "# HELP sluice_broker_epoch This broker's epoch: the metadata log index of its "
			       "registration at this start (-1 before it registered).\n# TYPE sluice_broker_epoch gauge\n"
			       "sluice_broker_epoch %lld\n", (long long)bs.epoch);
		textbuf_printf(t, "# HELP sluice_broker_fenced Whether this broker is fenced in the metadata.\n"
			       "# TYPE sluice_broker_fenced gauge\nsluice_broker_fenced %d\n", bs.self_fenced);
		textbuf_printf(t, "# HELP sluice_brokers Brokers registered in the metadata, by state.\n"
			       "# TYPE sluice_brokers gauge\nsluice_brokers{state=\"unfenced\"} %d\n"
			       "sluice_brokers{state=\"fenced\"} %d\n", bs.registered - bs.fenced, bs.fenced);
		textbuf_printf(t, "# HELP sluice_controller_broker_fencings_total Brokers this node fenced (a missed "
			       "session) or unfenced (a heartbeat) as the active controller.\n"
			       "# TYPE sluice_controller_broker_fencings_total counter\n"
			       "sluice_controller_broker_fencings_total{change=\"fenced\"} %llu\n"
			       "sluice_controller_broker_fencings_total{change=\"unfenced\"} %llu\n",
			       (unsigned long long)bs.fenced_total, (unsigned long long)bs.unfenced_total);
	}
	{
		struct ctl_elect_state es;

		ctl_elect_state(ctl, &es);
		fam(t, "controller_leader_elections_total", "counter", "Partitions this node gave a new leader as the "
		    "active controller (a fenced leader, an offline partition back, ElectLeaders).");
		textbuf_printf(t, "sluice_controller_leader_elections_total %llu\n", (unsigned long long)es.elections_total);
		fam(t, "controller_unclean_leader_elections_total", "counter", "Of those, leaders elected out of sync "
		    "(unclean.leader.election.enable, or an unclean ElectLeaders): records the ISR had may be lost.");
		textbuf_printf(t, "sluice_controller_unclean_leader_elections_total %llu\n",
			       (unsigned long long)es.unclean_total);
		fam(t, "controller_offline_partitions", "gauge", "Partitions without a leader in the metadata (no "
		    "live replica in sync): they take no writes and serve no reads.");
		textbuf_printf(t, "sluice_controller_offline_partitions %lld\n", (long long)es.offline);
	}
	{
		struct ctl_reassign_state rs;

		ctl_reassign_state(ctl, &rs);
		fam(t, "controller_reassigning_partitions", "gauge", "Partitions with a reassignment in progress in "
		    "the metadata (their adding replicas catching up).");
		textbuf_printf(t, "sluice_controller_reassigning_partitions %lld\n", (long long)rs.reassigning);
		fam(t, "controller_reassignments_completed_total", "counter", "Reassignments this node completed as "
		    "the active controller (every adding replica in the ISR, the removed ones gone).");
		textbuf_printf(t, "sluice_controller_reassignments_completed_total %llu\n",
			       (unsigned long long)rs.completed_total);
	}
	{
		struct ctl_channel_stats cs;

		ctl_quorum_channel_stats(ctl, &cs);
		textbuf_printf(t, "# HELP sluice_controller_channel_requests_total Controller channel requests: "
			       "records this node forwarded to the quorum's leader, requests it served as the "
			       "leader, forwarded records whose answer was lost with the connection or leadership, "
			       "ElectLeaders requests this node forwarded to the active controller.\n"
			       "# TYPE sluice_controller_channel_requests_total counter\n"
			       "sluice_controller_channel_requests_total{kind=\"forwarded\"} %llu\n"
			       "sluice_controller_channel_requests_total{kind=\"served\"} %llu\n"
			       "sluice_controller_channel_requests_total{kind=\"lost\"} %llu\n"
			       "sluice_controller_channel_requests_total{kind=\"elect_forwarded\"} %llu\n",
			       (unsigned long long)cs.forwarded, (unsigned long long)cs.served,
			       (unsigned long long)cs.lost, (unsigned long long)cs.elect_forwarded);
		textbuf_printf(t, "# HELP sluice_controller_channel_connected Whether this node is connected to "
			       "the quorum's leader on the controller channel (0 on the leader and alone).\n"
			       "# TYPE sluice_controller_channel_connected gauge\n"
			       "sluice_controller_channel_connected %d\n", cs.connected);
		fam(t, "controller_channel_paused_total", "counter", "Times this node stopped reading a controller "
		    "channel connection because 8 MiB of its answers waited to be written (a peer that does not "
		    "read them); it reads on once half of that is written.");
		textbuf_printf(t, "sluice_controller_channel_paused_total %llu\n", (unsigned long long)cs.paused);
		textbuf_printf(t, "# HELP sluice_controller_stuck_follower_transfers_total Leadership this node "
			       "handed over as the leader because a follower's log ended below what it believed "
			       "the follower had (libraft 0.15's stuck follower).\n"
			       "# TYPE sluice_controller_stuck_follower_transfers_total counter\n"
			       "sluice_controller_stuck_follower_transfers_total %llu\n",
			       (unsigned long long)cs.stuck_transfers);
		textbuf_printf(t, "# HELP sluice_controller_metadata_snapshots_installed_total Metadata snapshots "
			       "this running node installed because it fell behind what the voters keep (libraft's "
			       "InstallSnapshot on a voter, a fetched snapshot on a broker-only node); the topics "
			       "they changed are served at once.\n"
			       "# TYPE sluice_controller_metadata_snapshots_installed_total counter\n"
			       "sluice_controller_metadata_snapshots_installed_total %llu\n",
			       (unsigned long long)cs.snapshots_installed);
	}
	{   /* the control thread's counters (this runs there); 0 on a plaintext controller listener */
		const struct qtls_sec *q = b->quorum_tls;

		fam(t, "controller_tls_handshakes_total", "counter", "TLS handshakes on the controller port (an SSL "
		    "controller listener), accepted and made: over, or failed (a certificate refused, plaintext, a "
		    "connection closed before its handshake was over; the first each 5 s logged).");
		textbuf_printf(t, "sluice_controller_tls_handshakes_total{result=\"ok\"} %llu\n"
			       "sluice_controller_tls_handshakes_total{result=\"failed\"} %llu\n",
			       (unsigned long long)(q ? q->handshakes : 0), (unsigned long long)(q ? q->failures : 0));
	}
	{   /* the control thread's counters, as above */
		const struct qt_counters *p = b->quorum_port;

		fam(t, "controller_setup_timeouts_total", "counter", "Connections on the controller port closed "
		    "because their set-up (the TLS handshake on an SSL controller listener, then the transport's "
		    "own handshake) was not over within 10 s: accepted by this node, and made by it.");
		textbuf_printf(t, "sluice_controller_setup_timeouts_total{side=\"accepted\"} %llu\n"
			       "sluice_controller_setup_timeouts_total{side=\"made\"} %llu\n",
			       (unsigned long long)(p ? p->timeouts[0] : 0), (unsigned long long)(p ? p->timeouts[1] : 0));
		fam(t, "controller_sasl_authentications_total", "counter", "SASL authentications on the controller "
		    "port (a SASL_PLAINTEXT or SASL_SSL controller listener, PLAIN): of connections accepted and of "
		    "those this node made, over or failed (a wrong password, an unknown user, a connection that "
		    "skipped them; the first each 5 s logged).");
		for (int side = 0; side < 2; side++)
			for (int r = 0; r < 2; r++)
				textbuf_printf(t, "sluice_controller_sasl_authentications_total{side=\"%s\",result=\"%s\"} "
					       "%llu\n", side ? "made" : "accepted", r ? "failed" : "ok",
					       (unsigned long long)(p ? p->sasl[side][r] : 0));
		fam(t, "controller_sasl_reloads_total", "counter", "Reloads of a SASL controller listener's JAAS "
		    "config (its login and the users it accepts) by SIGHUP or POST /v1/tls/reload: taken, or "
		    "failed (the file or the key does not read or is not valid: the previous logins stay).");
		textbuf_printf(t, "sluice_controller_sasl_reloads_total{result=\"ok\"} %llu\n"
			       "sluice_controller_sasl_reloads_total{result=\"failed\"} %llu\n",
			       (unsigned long long)(p ? p->sasl_reloads[0] : 0),
			       (unsigned long long)(p ? p->sasl_reloads[1] : 0));
		fam(t, "controller_sasl_sessions_ended_total", "counter", "Connections accepted on a SASL controller "
		    "listener closed because their session's lifetime (connections.max.reauth.ms) was over; the "
		    "other side connects and authenticates again (the first each 5 s logged).");
		textbuf_printf(t, "sluice_controller_sasl_sessions_ended_total %llu\n",
			       (unsigned long long)(p ? p->sessions_ended : 0));
	}
	fam(t, "shards", "gauge", "Shards (pinned data-path threads) of the broker.");
	textbuf_printf(t, "sluice_shards %d\n", b->set.nshards);
}

static void render_shards(struct broker *b, struct textbuf *t)
{
	uint64_t now = cycles_now();
	static const char *const reasons[SHARD_REJECTS] = { "crc", "size", "invalid", "other", "sequence", "epoch",
							    "transaction" };
	static const char *const skips[SHARD_REPL_SKIPS] = { "fs_full", "log_failed", "backoff", "throttled",
							     "stale_answer", "not_followed", "non_contiguous" };

#define SF(name, type, help, field) shard_fam(t, b, name, type, help, offsetof(struct shard_stats, field), 0)
	SF("shard_loops_total", "counter", "Event-loop turns of the shard.", loops);
	SF("shard_busy_cycles_total", "counter", "Cycles (TSC) the shard spent in loop turns that did work.",
	   busy_cycles);
	fam(t, "shard_busy_ratio", "gauge", "Share of the time since the previous scrape the shard was busy (0..1).");
	for (int i = 0; i < b->set.nshards; i++) {
		uint64_t c = LD(broker_shard_published(b, i).stats->busy_cycles);
		double r = prev_clock && now > prev_clock ? (double)(c - prev_busy[i]) / (double)(now - prev_clock) : 0;

		prev_busy[i] = c;
		textbuf_printf(t, "sluice_shard_busy_ratio{shard=\"%d\"} %.4f\n", i, r > 1 ? 1 : r);
	}
	prev_clock = now;
	SF("requests_total", "counter", "Kafka requests the shard took up.", requests);
	fam(t, "requests_in_flight", "gauge", "Kafka requests taken up and not yet ended (answered or dropped).");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_requests_in_flight{shard=\"%d\"} %lld\n", i,
			       (long long)LD(broker_shard_published(b, i).stats->requests_inflight));
	SF("uring_sqes_total", "counter", "io_uring submission entries taken on the shard's ring (network and disk).",
	   uring_sqes);
	SF("uring_cqes_total", "counter", "io_uring completions reaped from the shard's ring.", uring_cqes);
	SF("connections_accepted_total", "counter", "Kafka connections the shard accepted.", connections_accepted);
	SF("connections_open", "gauge", "Kafka connections open on the shard.", connections_open);
	SF("bad_frames_total", "counter", "Connections closed for a malformed request frame.", bad_frames);
	fam(t, "accept_errors_total", "counter", "Accepts that failed, by reason: emfile (the process's descriptor "
	    "limit, RLIMIT_NOFILE), enfile (the system's), other. At emfile and enfile the shard stops accepting "
	    "for 0.1-1 s (new clients wait in the listen backlog) and logs it once a minute at most.");
	for (int i = 0; i < b->set.nshards; i++)
		for (int r = 0; r < SHARD_ACCEPT_ERRS; r++)
			textbuf_printf(t, "sluice_accept_errors_total{shard=\"%d\",reason=\"%s\"} %llu\n", i,
				       (const char *const[]){ "emfile", "enfile", "other" }[r],
				       (unsigned long long)LD(broker_shard_published(b, i).stats->accept_errors[r]));
	fam(t, "connections_rejected_total", "counter", "Connections closed as they were accepted, by the limit "
	    "they were over: max_connections, max_connections_per_ip.");
	for (int i = 0; i < b->set.nshards; i++)
		for (int r = 0; r < 2; r++)
			textbuf_printf(t, "sluice_connections_rejected_total{shard=\"%d\",reason=\"%s\"} %llu\n", i,
				       r ? "max_connections_per_ip" : "max_connections",
				       (unsigned long long)LD(broker_shard_published(b, i).stats->conns_rejected[r]));
	SF("connections_idle_closed_total", "counter", "Connections closed after connections.max.idle.ms without a "
	   "request (idle, or stopped half-way through a frame).", conns_idle_closed);
	SF("request_memory_waits_total", "counter", "Frames that waited for queued.max.request.bytes (their "
	   "connection was not read meanwhile).", req_mem_waits);
	SF("request_memory_refused_total", "counter", "Frames larger than all of queued.max.request.bytes: "
	   "their connection was closed.", req_mem_refused);
	fam(t, "request_memory_bytes", "gauge", "Memory reserved, broker-wide, for request frames above 64 KiB "
	    "being read or handled (bounded by queued.max.request.bytes).");
	textbuf_printf(t, "sluice_request_memory_bytes %lld\n", (long long)LD(b->conns.req_mem));
	fam(t, "request_memory_limit_bytes", "gauge", "queued.max.request.bytes; -1: unbounded.");
	textbuf_printf(t, "sluice_request_memory_limit_bytes %lld\n", (long long)b->set.queued_max_request_bytes);
	SF("unsupported_requests_total", "counter", "Requests of an unsupported API or version.", unsupported);
	SF("ring_full_total", "counter", "Cross-shard messages that found the ring full and were parked.",
	   ring_full);
	SF("send_zerocopy_total", "counter", "Responses sent with zero-copy sends.", send_zc);
	SF("tls_handshakes_total", "counter", "TLS handshakes completed on SSL listeners.", tls_handshakes);
	SF("tls_failures_total", "counter", "TLS connections closed by a failed handshake (an old protocol "
	   "version, an untrusted client certificate, no common cipher) or a bad record.", tls_failures);
	SF("sasl_authentications_total", "counter", "SASL authentications that succeeded.", sasl_auth_ok);
	SF("sasl_authentication_failures_total", "counter", "SASL authentications that failed (a wrong password, "
	   "an unknown user, a bad message), each answered after connection.failed.authentication.delay.ms.",
	   sasl_auth_failed);
	SF("sasl_preauth_closed_total", "counter", "SASL listener connections closed before authentication for a "
	   "request other than ApiVersions, SaslHandshake and SaslAuthenticate, or a frame over 16 KiB.",
	   sasl_preauth_closed);
	SF("sasl_reauthentications_total", "counter", "SASL re-authentications (KIP-368) that succeeded.",
	   sasl_reauth_ok);
	SF("sasl_expired_closed_total", "counter", "SASL connections closed at a request after their session "
	   "ended (connections.max.reauth.ms) without a re-authentication.", sasl_expired_closed);
	SF("authz_checks_total", "counter", "Authorizer checks that ran the ACL matcher (a decision not "
	   "remembered by the connection, or the bindings changed since).", authz_checks);
	SF("authz_cache_hits_total", "counter", "Authorizer checks answered from the decisions the connection "
	   "remembers (docs/security.md#acls).", authz_cache_hits);
	fam(t, "tls_connections_total", "counter", "TLS connections by the record layer they got after the "
	    "handshake: ktls (the kernel's, sends and receives stay plain io_uring operations) or openssl "
	    "(OpenSSL's on memory buffers: the kernel or the cipher cannot; on a kernel without CONFIG_TLS, all).");
	for (int i = 0; i < b->set.nshards; i++) {
		textbuf_printf(t, "sluice_tls_connections_total{shard=\"%d\",record_layer=\"ktls\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).stats->tls_record_ktls));
		textbuf_printf(t, "sluice_tls_connections_total{shard=\"%d\",record_layer=\"openssl\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).stats->tls_record_openssl));
	}
	{
		uint64_t reloads = 0, client = 0;

		for (int i = 0; i < b->set.nlisteners; i++)
			reloads += b->tls[i] ? tls_server_reloads(b->tls[i]) : 0;
		if (b->peer_sec && b->peer_sec->tls_client)
			client = tls_client_reloads(b->peer_sec->tls_client);
		if (b->quorum_tls) {
			reloads += tls_server_reloads(b->quorum_tls->server);
			client += tls_client_reloads(b->quorum_tls->client);
		}
		fam(t, "tls_reloads_total", "counter", "Reloads of the SSL listeners' certificates (SIGHUP, POST "
		    "/v1/tls/reload, a listener's keystore or truststore changed by AlterConfigs), one per SSL "
		    "listener reloaded (an SSL controller listener among them); 0 without an SSL listener.");
		textbuf_printf(t, "sluice_tls_reloads_total %llu\n", (unsigned long long)reloads);
		fam(t, "tls_client_reloads_total", "counter", "Reloads of the broker's client TLS contexts (its "
		    "keystore and truststore for an SSL inter-broker listener, and for the connections an SSL "
		    "controller listener's node makes) by SIGHUP or POST /v1/tls/reload, or by AlterConfigs of "
		    "the inter-broker listener's stores, one per context.");
		textbuf_printf(t, "sluice_tls_client_reloads_total %llu\n", (unsigned long long)client);
		fam(t, "admin_tls_certificates", "gauge", "Certificates the admin endpoint holds (admin.ssl.enabled): "
		    "the current one and older ones a connection open since their reload may still use.");
		textbuf_printf(t, "sluice_admin_tls_certificates %u\n", admin_tls_held());
	}
	SF("recv_buffers_starved_total", "counter", "Receives that found the provided-buffer ring empty.",
	   pbuf_starved);
	SF("produce_requests_total", "counter", "Produce requests.", produce_requests);
	SF("produce_batches_total", "counter", "Record batches appended by Produce.", produce_batches);
	SF("produce_records_total", "counter", "Records appended by Produce.", produce_records);
	SF("produce_bytes_total", "counter", "Bytes of record batches appended by Produce.", produce_bytes);
	SF("produce_duplicates_total", "counter",
	   "Idempotent resends acknowledged without appending (duplicates suppressed).", produce_duplicates);
	fam(t, "produce_rejected_total", "counter", "Partitions' batches refused by Produce, by reason "
	    "(crc, size, invalid, sequence, epoch, transaction, other).");
	for (int i = 0; i < b->set.nshards; i++)
		for (int r = 0; r < SHARD_REJECTS; r++)
			textbuf_printf(t, "sluice_produce_rejected_total{shard=\"%d\",reason=\"%s\"} %llu\n", i,
				       reasons[r], (unsigned long long)LD(broker_shard_published(b, i).stats->produce_rejected[r]));
	SF("fetch_requests_total", "counter", "Fetch requests.", fetch_requests);
	SF("fetch_bytes_total", "counter", "Record bytes returned by Fetch.", fetch_bytes);
	SF("fetch_long_poll_waits_total", "counter", "Fetches answered after waiting for data (long poll).",
	   fetch_waits);
	SF("fetch_sessions", "gauge", "Incremental fetch sessions (KIP-227) in the shard's cache.", fetch_sessions);
	SF("fetch_session_evictions_total", "counter", "Fetch sessions evicted from a full cache for new ones.",
	   fetch_session_evictions);
	SF("replication_bytes_in_total", "counter",
	   "Record batch bytes this node's followers appended from their leaders' fetch answers.", repl_bytes_in);
	SF("replication_bytes_out_total", "counter", "Record batch bytes sent to followers' replica fetches.",
	   repl_bytes_out);
	SF("replication_fetch_errors_total", "counter",
	   "Partitions a leader's fetch answer refused (fenced or unknown epoch, not the leader, out of range), "
	   "and truncations to a diverging leader's log that failed.",
	   repl_errors);
	SF("replication_truncations_total", "counter",
	   "Divergent log tails a follower cut at its leader's diverging epoch.", repl_truncations);
	SF("replication_reconnects_total", "counter",
	   "Fetcher connections to a leader lost and made again (native transport: a partition's REPLICA_FETCH or "
	   "its answer lost, asked again).", repl_reconnects);
	SF("replication_native_bytes_in_total", "counter",
	   "Of replication_bytes_in_total, what came over the shards' DPDK replication queues (native REPLICA_DATA).",
	   repl_native_bytes_in);
	SF("replication_tls_bytes_in_total", "counter",
	   "Fetch answer bytes followers' fetchers took through OpenSSL's record layer (a TLS inter-broker "
	   "listener; no kTLS here).", repl_tls_bytes_in);
	SF("replication_tls_bytes_out_total", "counter",
	   "Fetch request bytes followers' fetchers sent through OpenSSL's record layer.", repl_tls_bytes_out);
	SF("replication_auth_failures_total", "counter",
	   "Fetcher connections whose TLS or SASL handshake with the leader failed (logged with the reason).",
	   repl_auth_failures);
	fam(t, "replication_reauthentications_total", "counter", "KIP-368 re-authentications of followers' "
	    "fetchers on their connections to a leader whose inter-broker listener gives sessions a lifetime "
	    "(connections.max.reauth.ms), by result: ok, or failed (the connection closed and made again, also "
	    "counted in replication_auth_failures_total).");
	for (int i = 0; i < b->set.nshards; i++)
		for (int r = 0; r < 2; r++)
			textbuf_printf(t, "sluice_replication_reauthentications_total{shard=\"%d\",result=\"%s\"} %llu\n",
				       i, r ? "failed" : "ok", (unsigned long long)LD(broker_shard_published(b, i).stats->repl_reauth[r]));
	fam(t, "replication_fetch_skips_total", "counter", "Follower partitions left out of their replica fetches "
	    "(counted once each time one starts to be: fs_full, its durable end behind its log end on a full "
	    "filesystem; log_failed; backoff, after the leader refused it; throttled) or fetch answers dropped "
	    "(each: stale_answer, to an older fetch; not_followed; non_contiguous, batches not appended), by reason; "
	    "each logged naming the partition, once a minute per partition at most.");
	for (int i = 0; i < b->set.nshards; i++)
		for (int r = 0; r < SHARD_REPL_SKIPS; r++)
			textbuf_printf(t, "sluice_replication_fetch_skips_total{shard=\"%d\",reason=\"%s\"} %llu\n", i,
				       skips[r], (unsigned long long)LD(broker_shard_published(b, i).stats->repl_skipped[r]));
	SF("replication_native_bytes_out_total", "counter",
	   "Record batch bytes sent to followers over the shards' DPDK replication queues (native REPLICA_DATA).",
	   repl_native_bytes_out);
	SF("retention_segments_deleted_total", "counter",
	   "Sealed segments removed by time or size retention (the log start moves: partition_log_start_offset).",
	   retention_segments_deleted);
	SF("compaction_passes_total", "counter",
	   "Cleaner passes over a cleanup.policy=compact partition (one starts when a segment was sealed since "
	   "the last).", compact_passes);
	SF("compaction_segments_cleaned_total", "counter", "Sealed segments rewritten by the cleaner.",
	   compact_segments);
	SF("compaction_records_removed_total", "counter",
	   "Records the cleaner dropped (superseded by a newer value of their key, or old tombstones).",
	   compact_records_removed);
	SF("compaction_tombstones_removed_total", "counter",
	   "Tombstones dropped once older than delete.retention.ms.", compact_tombstones_removed);
	SF("compaction_bytes_before_total", "counter", "Bytes of the segments the cleaner rewrote, before.",
	   compact_bytes_before);
	SF("compaction_bytes_after_total", "counter", "Bytes of the segments the cleaner rewrote, after.",
	   compact_bytes_after);
	SF("compaction_errors_total", "counter",
	   "Cleaner steps that failed (the segment stays as it was) or could not start (no memory).",
	   compact_errors);
#undef SF
#define ST(name, type, help, field) shard_fam(t, b, name, type, help, offsetof(struct store_stats, field), 1)
	ST("disk_writes_total", "counter", "Write operations submitted to the disk (group commits' writes).", writes);
	ST("disk_write_bytes_total", "counter", "Bytes written to the disk.", write_bytes);
	ST("disk_split_writes_total", "counter", "Writes split in two at the partial block they rewrite, "
	   "so that neither covers both written and preallocated (unwritten) extents, which the filesystem "
	   "would hand to an io_uring worker thread (counted once a split; each half is in disk_writes_total).",
	   split_writes);
	ST("disk_reads_total", "counter", "Read operations submitted to the disk (fetches beyond the tail cache).",
	   reads);
	ST("disk_read_bytes_total", "counter", "Bytes read from the disk.", read_bytes);
	ST("disk_io_errors_total", "counter", "Disk operations that failed.", io_errors);
	ST("disk_group_commits_total", "counter",
	   "Group commits (one io_uring submission of every dirty log's writes).", flushes);
#undef ST
	fam(t, "tail_cache_hits_total", "counter", "Reads served from the in-memory tail of the logs.");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_tail_cache_hits_total{shard=\"%d\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).tail->hits));
	fam(t, "tail_cache_misses_total", "counter", "Reads the tail could not serve (read from the disk).");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_tail_cache_misses_total{shard=\"%d\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).tail->misses));
	fam(t, "tail_cache_bytes", "gauge", "Memory held by tail-cache chunks in use.");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_tail_cache_bytes{shard=\"%d\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).tail->used));
	fam(t, "tail_cache_evictions_total", "counter", "Clean tail-cache chunks evicted to make room.");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_tail_cache_evictions_total{shard=\"%d\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).tail->evictions));
	fam(t, "tail_cache_allocations_total", "counter", "Tail-cache chunks whose memory was allocated (and "
	    "faulted in): grows while the cache fills, not after (evicted chunks are reused); a new hot "
	    "partition's chunks grow through the sizes from 16 KiB to 16 MiB, a few allocations each.");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_tail_cache_allocations_total{shard=\"%d\"} %llu\n", i,
			       (unsigned long long)LD(broker_shard_published(b, i).tail->allocations));
	fam(t, "tail_cache_budget_bytes", "gauge", "The tail cache's memory budget (shard.tail.memory.bytes).");
	for (int i = 0; i < b->set.nshards; i++)
		textbuf_printf(t, "sluice_tail_cache_budget_bytes{shard=\"%d\"} %llu\n", i,
			       (unsigned long long)broker_shard_published(b, i).tail->budget);
	fam(t, "ring_depth", "gauge", "Messages waiting in the cross-thread ring from one thread to another "
	    "(thread nshards is the control thread).");
	for (int i = 0; i <= b->set.nshards; i++)
		for (int j = 0; j <= b->set.nshards; j++) {
			const struct spsc *r = b->rings[i][j];

			if (r)
				textbuf_printf(t, "sluice_ring_depth{from=\"%d\",to=\"%d\"} %u\n", i, j,
					       LD(r->tail) - LD(r->head));
		}
}

/* The published block of partition i of tp on this node (NULL: this node
 * never opened it), and its owner shard, from the control thread's book
 * of partition homes (control/ctl_homes.h). */
static const struct part_pub *pub_of(const struct ctl *ctl, const struct md_topic *tp, int32_t i, int32_t *shard)
{
	const struct ctl_home *h = ctl_part_home(ctl, tp->id, i);

	if (shard)
		*shard = h ? h->shard : -1;
	return h ? h->part_pub : NULL;
}

static void label_part(struct textbuf *t, const struct md_topic *tp, int32_t i, int32_t shard)
{
	textbuf_printf(t, "{topic=\"");
	textbuf_escaped(t, tp->name);
	textbuf_printf(t, "\",partition=\"%d\",shard=\"%d\"}", i, shard);
}

/* One family with one sample per partition: the word at `off` in part_pub. */
static void part_fam(const struct ctl *ctl, struct textbuf *t, const struct md_snapshot *md, const char *name,
		     const char *type, const char *help, size_t off)
{
	fam(t, name, type, help);
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];

		for (int32_t i = 0; i < tp->nparts; i++) {
			int32_t shard;
			const struct part_pub *u = pub_of(ctl, tp, i, &shard);
			const int64_t *w;

			if (!u)
				continue;
			w = (const int64_t *)((const char *)u + off);
			textbuf_printf(t, "sluice_%s", name);
			label_part(t, tp, i, shard);
			textbuf_printf(t, " %lld\n", (long long)LD(*w));
		}
	}
}

/* The log failed (an I/O error: offline on this node until a restart);
 * -ESHUTDOWN is a log closing as the broker stops, -ENOSPC a full
 * filesystem (part_no_space), not a failure. */
static int part_failed(const struct part_pub *u)
{
	int64_t err = u ? LD(u->err) : 0;

	return err != 0 && err != -ESHUTDOWN && err != -ENOSPC;
}

static int part_no_space(const struct part_pub *u)
{
	return u && LD(u->err) == -ENOSPC;
}

/* A 0/1 gauge per partition: its ISR below its replicas (min 0), or
 * below the topic's min.insync.replicas (min 1). */
static void part_flag(const struct ctl *ctl, struct textbuf *t, const struct md_snapshot *md, const char *name,
		      const char *help, int min)
{
	fam(t, name, "gauge", help);
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];

		for (int32_t i = 0; i < tp->nparts; i++) {
			int32_t shard;
			const struct part_pub *u = pub_of(ctl, tp, i, &shard);
			int64_t isr;

			if (!u)
				continue;
			isr = LD(u->isr_size);
			textbuf_printf(t, "sluice_%s", name);
			label_part(t, tp, i, shard);
			textbuf_printf(t, " %d\n", min ? isr < tp->min_insync : isr < LD(u->replicas));
		}
	}
}

static void render_partitions(const struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;

#define PF(name, type, help, field) part_fam(ctl, t, md, name, type, help, offsetof(struct part_pub, field))
	PF("partition_log_start_offset", "gauge", "First offset still in the partition's log.", log_start);
	PF("partition_log_end_offset", "gauge", "Next offset to be written (log end offset).", log_end);
	PF("partition_high_watermark", "gauge", "Offset below which records are durable and visible.",
	   high_watermark);
	PF("partition_last_stable_offset", "gauge", "Offset below which no transaction is open.", last_stable);
	PF("partition_size_bytes", "gauge", "Bytes of the partition's log segments.", size_bytes);
	PF("partition_segments", "gauge", "Segments of the partition's log.", segments);
	PF("partition_produce_batches_total", "counter", "Record batches appended to the partition by Produce.",
	   produce_batches);
	PF("partition_produce_records_total", "counter", "Records appended to the partition by Produce.",
	   produce_records);
	PF("partition_produce_bytes_total", "counter", "Bytes appended to the partition by Produce.", produce_bytes);
	PF("partition_isr_size", "gauge", "In-sync replicas of the partition, as this node's role says (1 on one node).",
	   isr_size);
	PF("partition_replicas", "gauge", "Replicas of the partition.", replicas);
	PF("partition_follower_lag_offsets", "gauge",
	   "On its leader: the largest gap between the log end and a follower's fetch offset (0 elsewhere).",
	   follower_lag);
	PF("partition_follower_lag_ms", "gauge",
	   "On its leader: the longest a follower behind the log end has not been caught up, in ms (0 elsewhere).",
	   follower_lag_ms);
#undef PF
	part_flag(ctl, t, md, "partition_under_replicated", "1 when the partition's ISR is smaller than its replicas, else 0.",
		  0);
	part_flag(ctl, t, md, "partition_under_min_isr",
		  "1 when the partition's ISR is smaller than min.insync.replicas (acks=all refused), else 0.", 1);
	fam(t, "partition_failed", "gauge",
	    "1 when the partition's log failed (an I/O error: offline on this node until it restarts), else 0.");
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];

		for (int32_t i = 0; i < tp->nparts; i++) {
			int32_t shard;
			const struct part_pub *u = pub_of(ctl, tp, i, &shard);

			if (u) {
				textbuf_printf(t, "sluice_partition_failed");
				label_part(t, tp, i, shard);
				textbuf_printf(t, " %d\n", part_failed(u));
			}
		}
	}
	fam(t, "partition_no_space", "gauge",
	    "1 while the partition's log refuses appends because its filesystem is full, else 0.");
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];

		for (int32_t i = 0; i < tp->nparts; i++) {
			int32_t shard;
			const struct part_pub *u = pub_of(ctl, tp, i, &shard);

			if (u) {
				textbuf_printf(t, "sluice_partition_no_space");
				label_part(t, tp, i, shard);
				textbuf_printf(t, " %d\n", part_no_space(u));
			}
		}
	}
}

/* ---- groups ---------------------------------------------------------- */

struct group_walk {
	struct textbuf *t;
	int pass;
	int64_t now;
};

static void group_labels(struct textbuf *t, const struct group_view *g, const struct group_offset_view *o)
{
	textbuf_printf(t, "{group=\"");
	textbuf_escaped(t, g->id);
	if (o) {
		textbuf_printf(t, "\",topic=\"");
		textbuf_escaped(t, o->topic);
		textbuf_printf(t, "\",partition=\"%d", o->partition);
	}
	textbuf_printf(t, "\"}");
}

static void group_visit(const struct group_view *g, const struct group_offset_view *o, void *arg)
{
	struct group_walk *w = arg;
	struct textbuf *t = w->t;

	switch (w->pass) {
	case 0:
		if (o)
			return;
		textbuf_printf(t, "sluice_group_members");
		group_labels(t, g, NULL);
		textbuf_printf(t, " %d\n", g->members);
		return;
	case 1:
		if (o)
			return;
		textbuf_printf(t, "sluice_group_generation");
		group_labels(t, g, NULL);
		textbuf_printf(t, " %d\n", g->generation);
		return;
	case 2:
		if (o)
			return;
		textbuf_printf(t, "sluice_group_state{group=\"");
		textbuf_escaped(t, g->id);
		textbuf_printf(t, "\",state=\"%s\"} 1\n", g->state);
		return;
	case 3:
		if (!o)
			return;
		textbuf_printf(t, "sluice_group_committed_offset");
		group_labels(t, g, o);
		textbuf_printf(t, " %lld\n", (long long)o->committed);
		return;
	case 4:
		if (!o || o->high_watermark < 0)
			return;
		textbuf_printf(t, "sluice_group_lag_records");
		group_labels(t, g, o);
		textbuf_printf(t, " %lld\n",
			       (long long)(o->high_watermark > o->committed ? o->high_watermark - o->committed : 0));
		return;
	default:
		if (!o || o->high_watermark < 0)
			return;
		textbuf_printf(t, "sluice_group_oldest_unconsumed_age_seconds");
		group_labels(t, g, o);
		/* caught up as far as the scan knows: nothing waits (the age may
		 * be of a scan made before the last commit) */
		textbuf_printf(t, " %.3f\n", o->oldest_unconsumed_ts < 0 || o->high_watermark <= o->committed ||
			       w->now <= o->oldest_unconsumed_ts ? 0.0
			       : (double)(w->now - o->oldest_unconsumed_ts) / 1000.0);
		return;
	}
}

/* The coordinators' counters as a table, rendered by render_stat_fams:
 * each family's name, type and help, and up to STAT_SAMPLES samples, each
 * its labels ("" for none; NULL ends the list) and its value: the uint64_t
 * at `off` in the coordinator's stats struct, or what `fn` computes (a
 * count, never negative). */
#define STAT_SAMPLES 5

struct stat_src {
	struct ctl *ctl;
	const void *stats;   /* struct group_stats or struct txn_stats */
};

struct stat_sample {
	const char *labels;
	size_t off;
	uint64_t (*fn)(const struct stat_src *src);
};

struct stat_fam {
	const char *name, *type, *help;
	struct stat_sample s[STAT_SAMPLES];
};

static void render_stat_fams(struct textbuf *t, const struct stat_fam *f, size_t n, const struct stat_src *src)
{
	for (; n--; f++) {
		fam(t, f->name, f->type, f->help);
		for (int j = 0; j < STAT_SAMPLES && f->s[j].labels; j++) {
			const struct stat_sample *x = &f->s[j];
			uint64_t v = x->fn ? x->fn(src) : *(const uint64_t *)((const char *)src->stats + x->off);

			textbuf_printf(t, "sluice_%s%s %llu\n", f->name, x->labels, (unsigned long long)v);
		}
	}
}

static uint64_t group_coord_loaded(const struct stat_src *src)
{
	return (uint64_t)group_partitions_loaded(ctl_groups(src->ctl));
}

static uint64_t txn_coord_loaded(const struct stat_src *src)
{
	return ctl_txns(src->ctl) ? (uint64_t)txn_partitions_loaded(ctl_txns(src->ctl)) : 0;
}

#define GS(field) offsetof(struct group_stats, field), NULL
_Static_assert(GROUP_REBALANCE_CAUSES == 5, "group_fams lists five causes");
static const struct stat_fam group_fams[] = {
	{ "group_joins_total", "counter", "JoinGroup requests handled.", { { "", GS(joins) } } },
	{ "group_syncs_total", "counter", "SyncGroup requests handled.", { { "", GS(syncs) } } },
	{ "group_heartbeats_total", "counter", "Heartbeat requests handled.", { { "", GS(heartbeats) } } },
	{ "group_leaves_total", "counter", "LeaveGroup members handled.", { { "", GS(leaves) } } },
	{ "group_rebalances_total", "counter", "Generations completed (rebalances).", { { "", GS(rebalances) } } },
	{ "group_rebalances_started_total", "counter",
	  "Rebalances started, by cause (join, rejoin, leave, session_timeout, assignment_too_large).",
	  { { "{cause=\"join\"}", GS(rebalance_causes[0]) },
	    { "{cause=\"rejoin\"}", GS(rebalance_causes[1]) },
	    { "{cause=\"leave\"}", GS(rebalance_causes[2]) },
	    { "{cause=\"session_timeout\"}", GS(rebalance_causes[3]) },
	    { "{cause=\"assignment_too_large\"}", GS(rebalance_causes[4]) } } },
	{ "group_members_expired_total", "counter", "Members removed after their session timed out.",
	  { { "", GS(members_expired) } } },
	{ "group_offset_commits_total", "counter", "Partitions' offsets committed.", { { "", GS(commits) } } },
	{ "group_offset_commits_refused_total", "counter",
	  "Partitions' commits refused, by reason (stale owner: another member owns it).",
	  { { "{reason=\"stale_generation\"}", GS(commit_refused_generation) },
	    { "{reason=\"unknown_member\"}", GS(commit_refused_member) },
	    { "{reason=\"rebalance_in_progress\"}", GS(commit_refused_rebalance) },
	    { "{reason=\"stale_owner\"}", GS(commit_refused_owner) },
	    { "{reason=\"fenced\"}", GS(commit_refused_fenced) } } },
	{ "group_offsets_expired_total", "counter", "Committed offsets removed by offsets.retention.minutes.",
	  { { "", GS(offsets_expired) } } },
	{ "coordinator_partitions_loaded", "gauge",
	  "Internal partitions this node coordinates (leads and has read back), by coordinator (group: "
	  "__consumer_offsets, transaction: __transaction_state).",
	  { { "{coordinator=\"group\"}", 0, group_coord_loaded },
	    { "{coordinator=\"transaction\"}", 0, txn_coord_loaded } } },
};
#undef GS

#define METRICS_LAG_SCAN_MS 500

static void render_groups(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	struct group_coord *gc = ctl_groups(ctl);
	static const char *const names[][2] = {
		{ "group_members", "Members of the consumer group." },
		{ "group_generation", "The group's generation (rebalances completed)." },
		{ "group_state", "1 for the group's current state." },
		{ "group_committed_offset", "The group's committed offset of the partition." },
		{ "group_lag_records", "High watermark minus committed offset (at the last lag scan)." },
		{ "group_oldest_unconsumed_age_seconds",
		  "Age of the oldest record the group has not consumed (0: caught up)." },
	};
	struct group_walk w = { t, 0, ctl_wall_ms(ctl) };

	if (!gc)
		return;
	for (w.pass = 0; w.pass < 6; w.pass++) {
		fam(t, names[w.pass][0], "gauge", names[w.pass][1]);
		group_foreach(gc, group_visit, &w);
	}
	render_stat_fams(t, group_fams, sizeof(group_fams) / sizeof(group_fams[0]),
			 &(struct stat_src){ ctl, group_coord_stats(gc) });
	/* answers land before the next scrape. At most one scan per
	 * METRICS_LAG_SCAN_MS (each asks the owner shards to read one batch
	 * per lagging partition), none once the broker stops (the shards may
	 * be gone and their rings never drain) */
	if (!__atomic_load_n(&b->stopping, __ATOMIC_RELAXED))
		group_lag_scan_every(gc, ctl_now_ms(ctl), METRICS_LAG_SCAN_MS);
}

/* One histogram series: cumulative counts at the bounds of every `step`-th
 * bucket (1: every bucket, the histogram's full precision; 4: two bounds
 * per power of two), the same bounds at every scrape; then _sum and
 * _count. A series with no sample yet is left out (it appears with its
 * first request). `labels` is the inside of {}. */
static void hist_series(struct textbuf *t, const char *name, const char *labels, const struct lathist *h,
			unsigned step)
{
	uint64_t cum = 0, count = LD(h->count);

	if (!count)
		return;
	for (unsigned i = 0; i < LATHIST_BUCKETS - 1; i++) {
		cum += LD(h->b[i]);
		if (i % step == 0)
			textbuf_printf(t, "sluice_%s_bucket{%s,le=\"%.9g\"} %llu\n", name, labels,
				       (double)lathist_upper(i) / 1e9, (unsigned long long)cum);
	}
	cum += LD(h->b[LATHIST_BUCKETS - 1]);
	/* the buckets may run one sample ahead of count: +Inf is their total */
	textbuf_printf(t, "sluice_%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
	textbuf_printf(t, "sluice_%s_sum{%s} %.9f\n", name, labels, (double)LD(h->sum_ns) / 1e9);
	textbuf_printf(t, "sluice_%s_count{%s} %llu\n", name, labels, (unsigned long long)(cum > count ? cum : count));
}

static void render_hists(struct broker *b, struct textbuf *t)
{
	static const char *const acks[] = { "0", "1", "all" };
	char labels[128];

	fam(t, "produce_latency_seconds", "histogram",
	    "Produce request to acknowledgement (by acks), on the shard's loop clock; buckets within 1/8.");
	for (int i = 0; i < b->set.nshards; i++)
		for (int a = 0; a < 3; a++) {
			snprintf(labels, sizeof(labels), "shard=\"%d\",acks=\"%s\"", i, acks[a]);
			hist_series(t, "produce_latency_seconds", labels, &broker_shard_published(b, i).hists->produce[a], 1);
		}
	fam(t, "fetch_latency_seconds", "histogram",
	    "Fetch request to response, long-poll waits included; buckets within 1/8.");
	for (int i = 0; i < b->set.nshards; i++) {
		snprintf(labels, sizeof(labels), "shard=\"%d\"", i);
		hist_series(t, "fetch_latency_seconds", labels, &broker_shard_published(b, i).hists->fetch, 1);
	}
	fam(t, "disk_write_latency_seconds", "histogram", "A log write queued to durable (per log.durability, every "
	    "earlier write of its log landed), on the shard's loop clock; buckets within 1/8.");
	for (int i = 0; i < b->set.nshards; i++) {
		snprintf(labels, sizeof(labels), "shard=\"%d\"", i);
		hist_series(t, "disk_write_latency_seconds", labels, broker_shard_published(b, i).write_lat, 1);
	}
	fam(t, "request_latency_seconds", "histogram",
	    "Request to response by API; two bounds per power of two.");
	for (int i = 0; i < b->set.nshards; i++)
		for (int k = 0; k < SHARD_LAT_APIS; k++) {
			const struct kafka_api *api = kafka_api_find((int16_t)k);

			if (!api)
				continue;
			snprintf(labels, sizeof(labels), "shard=\"%d\",api=\"%s\"", i, api->name);
			hist_series(t, "request_latency_seconds", labels, &broker_shard_published(b, i).hists->api[k], LATHIST_SUB / 2);
		}
}

/* The metadata quorum this node is a voter of (control/ctl_quorum.c). */
static void render_quorum(struct ctl *ctl, struct textbuf *t)
{
	struct quorum_view st;
	const struct lathist *h = ctl_quorum_commit_latency(ctl);

	ctl_quorum_describe(ctl, &st);
	fam(t, "controller_quorum_leader", "gauge", "The metadata quorum's leader (node id, -1: none known).");
	textbuf_printf(t, "sluice_controller_quorum_leader %d\n", st.leader);
	fam(t, "controller_quorum_is_leader", "gauge", "1 while this node leads the metadata quorum (the active controller).");
	textbuf_printf(t, "sluice_controller_quorum_is_leader %d\n", st.am_leader);
	fam(t, "controller_quorum_epoch", "gauge", "The metadata quorum's epoch (raft's term): one more per election.");
	textbuf_printf(t, "sluice_controller_quorum_epoch %llu\n", (unsigned long long)st.term);
	fam(t, "controller_quorum_voters", "gauge", "Voters of the metadata quorum.");
	textbuf_printf(t, "sluice_controller_quorum_voters %d\n", st.nvoters);
	fam(t, "controller_quorum_index", "gauge", "The metadata log on this node by index: its last entry (log_end), "
	    "the last known committed (committed: Kafka's high watermark) and the last applied to the image.");
	textbuf_printf(t, "sluice_controller_quorum_index{index=\"log_end\"} %llu\n", (unsigned long long)st.last_index);
	textbuf_printf(t, "sluice_controller_quorum_index{index=\"committed\"} %llu\n",
		       (unsigned long long)st.commit_index);
	textbuf_printf(t, "sluice_controller_quorum_index{index=\"applied\"} %llu\n", (unsigned long long)st.last_applied);
	if (h) {
		fam(t, "controller_commit_latency_seconds", "histogram", "A metadata record this node proposed, to "
		    "applied here (committed by a majority of the voters, durable on each); buckets within 1/8.");
		hist_series(t, "controller_commit_latency_seconds", "node=\"self\"", h, 1);
	}
}

static uint64_t txn_open_now(const struct stat_src *src)
{
	return (uint64_t)txn_open_count(ctl_txns(src->ctl));
}

static uint64_t txn_markers_here(const struct stat_src *src)
{
	const struct txn_stats *s = src->stats;

	return s->markers - s->remote_markers;
}

#define TS(field) offsetof(struct txn_stats, field), NULL
static const struct stat_fam txn_fams[] = {
	{ "txn_init_producer_ids_total", "counter", "InitProducerId requests with a transactional id served.",
	  { { "", TS(inits) } } },
	{ "txn_fenced_total", "counter", "Transactional producers fenced by a newer InitProducerId of their id.",
	  { { "", TS(fenced_by_init) } } },
	{ "txn_begun_total", "counter", "Transactions begun (their first AddPartitionsToTxn or AddOffsetsToTxn).",
	  { { "", TS(begun) } } },
	{ "txn_ended_total", "counter", "Transactions ended, by result (commit, abort; aborts include timeouts).",
	  { { "{result=\"commit\"}", TS(committed) }, { "{result=\"abort\"}", TS(aborted) } } },
	{ "txn_timed_out_total", "counter", "Transactions aborted by the coordinator after transaction.timeout.ms.",
	  { { "", TS(timed_out) } } },
	{ "txn_open", "gauge", "Transactions open now (Ongoing, PrepareCommit or PrepareAbort) among the "
	  "transactional ids this node coordinates: each holds back read_committed consumers of its partitions.",
	  { { "", 0, txn_open_now } } },
	{ "txn_markers_total", "counter", "COMMIT/ABORT markers written durably, by where (here: by this node's "
	  "shards; other_node: WriteTxnMarkers to the partition's leader).",
	  { { "{where=\"here\"}", 0, txn_markers_here }, { "{where=\"other_node\"}", TS(remote_markers) } } },
	{ "txn_marker_requests_total", "counter", "WriteTxnMarkers requests sent to other nodes: one per leader "
	  "and decision, with every partition of the transaction it leads.", { { "", TS(remote_marker_requests) } } },
	{ "txn_marker_retries_total", "counter", "Markers written again after a failure (every second, the "
	  "leader looked up again).", { { "", TS(marker_retries) } } },
	{ "txn_verifications_total", "counter", "KIP-890 checks that a partition is in an ongoing transaction, by "
	  "who answered (here: this node's coordinator state; other_node: AddPartitionsToTxn VerifyOnly to the id's "
	  "coordinator).", { { "{answered=\"here\"}", TS(verifies) }, { "{answered=\"other_node\"}", TS(remote_verifies) } } },
	{ "txn_late_requests_refused_total", "counter", "Requests of an earlier transaction refused "
	  "INVALID_TXN_STATE (taken up before the current transaction began).", { { "", TS(late_refused) } } },
	{ "txn_partitions_loads_total", "counter", "__transaction_state partitions read back (at start and when "
	  "this node became their leader).", { { "", TS(partitions_loaded) } } },
};
#undef TS

/* The transaction coordinator's counters (control/txn.h), and its open
 * transactions now. */
static void render_txns(struct ctl *ctl, struct textbuf *t)
{
	const struct txn_coord *tc = ctl_txns(ctl);

	if (!tc)
		return;
	render_stat_fams(t, txn_fams, sizeof(txn_fams) / sizeof(txn_fams[0]),
			 &(struct stat_src){ ctl, txn_coord_stats(tc) });
}

/* The control thread's inter-broker client (control/peer_kafka.h): its
 * KIP-368 re-authentications. */
static void render_peers(struct ctl *ctl, struct textbuf *t)
{
	const struct peer_kafka *pk = ctl_peers(ctl);
	const struct peer_kafka_stats *st;

	if (!pk)
		return;
	st = peer_kafka_stats(pk);
	fam(t, "interbroker_reauthentications_total", "counter", "KIP-368 re-authentications of the control "
	    "thread's connections to other brokers (WriteTxnMarkers, AddPartitionsToTxn VerifyOnly) on an "
	    "inter-broker listener that gives sessions a lifetime, by result: ok, or failed (the connection "
	    "closed, its requests failed).");
	textbuf_printf(t, "sluice_interbroker_reauthentications_total{result=\"ok\"} %llu\n",
		       (unsigned long long)st->reauths_ok);
	textbuf_printf(t, "sluice_interbroker_reauthentications_total{result=\"failed\"} %llu\n",
		       (unsigned long long)st->reauths_failed);
}

void metrics_render(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	render_process(ctl, b, t);
	render_quorum(ctl, t);
	render_shards(b, t);
	render_hists(b, t);
	render_partitions(ctl, b, t);
	render_groups(ctl, b, t);
	render_txns(ctl, t);
	render_peers(ctl, t);
}

/* ---- JSON ------------------------------------------------------------ */

int metrics_health(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;
	const char *status = "ready";
	int nfailed = 0;

	if (!ctl_is_ready(ctl))
		status = "recovering";
	else if (__atomic_load_n(&b->stopping, __ATOMIC_RELAXED))
		status = "stopping";
	textbuf_printf(t, "{\"reasons\": [");
	if (strcmp(status, "ready"))
		textbuf_printf(t, "\"%s\"", !strcmp(status, "recovering") ? "recovering: replaying the metadata log and "
			       "opening partitions" : "stopping: the broker is shutting down");
	for (int k = 0; md && k < md->ntopics; k++) {
		const struct md_topic *tp = md->topics[k];

		for (int32_t i = 0; i < tp->nparts; i++) {
			const struct part_pub *u = pub_of(ctl, tp, i, NULL);
			int64_t err = u ? LD(u->err) : 0;

			if (!part_failed(u))
				continue;
			textbuf_printf(t, "%s\"log failed: ", strcmp(status, "ready") || nfailed ? ", " : "");
			textbuf_escaped(t, tp->name);
			textbuf_printf(t, "-%d: %s\"", i, strerror((int)-err));
			nfailed++;
		}
	}
	{
		/* nearly out of file descriptors: connections, segments and
		 * partitions are about to fail */
		int64_t in_use, limit;

		if (fd_usage(&in_use, &limit) == 0 && limit != INT64_MAX &&
		    limit - in_use < fd_reserve(limit) / 4) {
			textbuf_printf(t, "%s\"file descriptors: %lld of the limit of %lld in use (RLIMIT_NOFILE): "
				       "raise ulimit -n\"", strcmp(status, "ready") || nfailed ? ", " : "",
				       (long long)in_use, (long long)limit);
			nfailed++;
		}
	}
	if (nfailed && !strcmp(status, "ready"))
		status = "degraded";
	textbuf_printf(t, "], \"status\": \"%s\"}\n", status);
	return !strcmp(status, "ready");
}

void metrics_shards_json(struct ctl *ctl, struct broker *b, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;

	textbuf_printf(t, "{\"shards\": [");
	for (int i = 0; i < b->set.nshards; i++) {
		const struct shard_stats *s = broker_shard_published(b, i).stats;
		int nparts = 0;
		int64_t bytes = 0;

		for (int k = 0; md && k < md->ntopics; k++)
			for (int32_t j = 0; j < md->topics[k]->nparts; j++) {
				int32_t shard;
				const struct part_pub *u = pub_of(ctl, md->topics[k], j, &shard);

				if (u && shard == i) {   /* the partitions this node holds */
					nparts++;
					bytes += LD(u->size_bytes);
				}
			}
		textbuf_printf(t, "%s\n  {\"shard\": %d, \"partitions\": %d, \"size_bytes\": %lld, "
			       "\"connections_open\": %llu, \"requests\": %llu, \"loops\": %llu, \"busy_cycles\": %llu, "
			       "\"produce_bytes\": %llu, \"fetch_bytes\": %llu}", i ? "," : "", i, nparts, (long long)bytes,
			       (unsigned long long)LD(s->connections_open), (unsigned long long)LD(s->requests),
			       (unsigned long long)LD(s->loops), (unsigned long long)LD(s->busy_cycles),
			       (unsigned long long)LD(s->produce_bytes), (unsigned long long)LD(s->fetch_bytes));
	}
	textbuf_printf(t, "\n]}\n");
}

int metrics_partition_json(struct ctl *ctl, struct broker *b, const char *topic, int32_t n, struct textbuf *t)
{
	const struct md_snapshot *md = b->md;
	const struct md_topic *tp = md ? md_find(md, topic, (int32_t)strlen(topic)) : NULL;
	const struct md_partition *mp;
	const struct ctl_home *h;
	const struct part_pub *u;

	if (!tp || n < 0 || n >= tp->nparts)
		return -ENOENT;
	mp = &tp->parts[n];
	h = ctl_part_home(ctl, tp->id, n);
	u = h ? h->part_pub : NULL;
	textbuf_printf(t, "{\"topic\": \"");
	textbuf_escaped(t, tp->name);
	/* shard -1: not held on this node */
	textbuf_printf(t, "\", \"partition\": %d, \"shard\": %d, \"leader_epoch\": %d, \"open\": %s", n,
		       h ? h->shard : -1, mp->leader_epoch, h && h->opened == 1 ? "true" : "false");
	if (u)
		textbuf_printf(t, ", \"log_start_offset\": %lld, \"log_end_offset\": %lld, \"high_watermark\": %lld, "
			       "\"last_stable_offset\": %lld, \"size_bytes\": %lld, \"segments\": %lld, "
			       "\"produce_batches\": %llu, \"produce_records\": %llu, \"produce_bytes\": %llu, "
			       "\"error\": \"%s\"",
			       (long long)LD(u->log_start), (long long)LD(u->log_end), (long long)LD(u->high_watermark),
			       (long long)LD(u->last_stable), (long long)LD(u->size_bytes), (long long)LD(u->segments),
			       (unsigned long long)LD(u->produce_batches), (unsigned long long)LD(u->produce_records),
			       (unsigned long long)LD(u->produce_bytes),
			       LD(u->err) ? strerror((int)-LD(u->err)) : "");
	/* the metadata log's (on one node: this node) */
	textbuf_printf(t, ", \"replicas\": [");
	for (int32_t i = 0; i < mp->nreplicas; i++)
		textbuf_printf(t, "%s%d", i ? ", " : "", mp->replicas[i]);
	textbuf_printf(t, "], \"isr\": [");
	for (int32_t i = 0; i < mp->nisr; i++)
		textbuf_printf(t, "%s%d", i ? ", " : "", mp->isr[i]);
	textbuf_printf(t, "]}\n");
	return 0;
}
