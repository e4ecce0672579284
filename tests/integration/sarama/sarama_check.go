// tests/integration/sarama/sarama_check.go — Sarama 1.22.1 (Debian's
// golang-github-shopify-sarama-dev, Version = V2_1_0_0) against a running
// sluiced, driven by ../test_sarama.py. Built in GOPATH mode from Debian's
// sources, no module download (tests/integration/sarama/module.mk).
//
//	sarama_check admin BOOT TOPIC GROUP
//	    create TOPIC (3 partitions) and TOPIC-gone, list and describe them,
//	    delete TOPIC-gone, list again; list groups, describe GROUP, list its
//	    offsets (what another client committed before).
//	sarama_check produce BOOT TOPIC N sync|async CODEC PARTITIONER
//	    N keyed records ("key-I" / "value-I"): sync is an idempotent
//	    SyncProducer, async an AsyncProducer; both acks=all. CODEC: none,
//	    gzip, snappy, lz4, zstd. PARTITIONER: fnv (NewHashPartitioner, the
//	    default), reference (NewReferenceHashPartitioner), murmur2
//	    (NewCustomPartitioner with WithAbsFirst and Java's murmur2 hash,
//	    below), murmur2-noabs (NewCustomHashPartitioner with the same hash),
//	    manual (partition I % 3). Reports each record's partition and offset.
//	sarama_check read BOOT TOPIC N
//	    a group-less consumer of every partition from the oldest offset until
//	    N records; reports them.
//	sarama_check churn BOOT TOPIC GROUP
//	    TOPIC has 4 partitions. Member A joins alone; 20 records per
//	    partition; B joins (2 + 2); 10 more; B leaves (A owns all 4); 10
//	    more; B joins again; 10 more; B leaves; 5 more that A reads without
//	    marking (the uncommitted window); A closes. Every record read is
//	    marked (MarkMessage) at once except the window's, and Sarama commits
//	    what is marked every 100 ms and when a session ends. Reports every
//	    record read (member, partition, offset), the window, the members'
//	    claims, Sarama's ListConsumerGroupOffsets and the errors Sarama
//	    returned (Consumer.Return.Errors).
//	sarama_check resume BOOT TOPIC GROUP WANT
//	    a new process: 10 more records per partition, then member C joins,
//	    reads until WANT records (and 300 ms more: anything extra shows up),
//	    marks them, closes; reports the records, the offsets and errors.
//
// Prints one JSON object on stdout ({"ok": ..., "error": ...}); exits 1 on
// failure. Waits are conditions under a hang guard, not timing thresholds.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"log"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// hangGuard: the test's own (SLUICE_HANG_GUARD, 120 s) less 10 s, so that
// this program reports what it waited for before the test gives up on it
var hangGuard = 110 * time.Second

// ---- Java's murmur2 as a hash.Hash32 (Sarama 1.22 has none) ---------------

// murmur2 is Kafka's Utils.murmur2 (seed 0x9747b28c) over everything written
// since the last Reset: Sarama hands the partitioner's hasher the whole key.
type murmur2 struct{ data []byte }

func newMurmur2() hash.Hash32 { return &murmur2{} }

func (m *murmur2) Write(p []byte) (int, error) { m.data = append(m.data, p...); return len(p), nil }
func (m *murmur2) Reset()                      { m.data = m.data[:0] }
func (m *murmur2) Size() int                   { return 4 }
func (m *murmur2) BlockSize() int              { return 4 }
func (m *murmur2) Sum(b []byte) []byte {
	s := m.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

func (m *murmur2) Sum32() uint32 {
	const mul, r = uint32(0x5bd1e995), 24
	d := m.data
	n := len(d)
	h := uint32(0x9747b28c) ^ uint32(n)
	whole := n &^ 3
	for i := 0; i < whole; i += 4 {
		k := uint32(d[i]) | uint32(d[i+1])<<8 | uint32(d[i+2])<<16 | uint32(d[i+3])<<24
		k *= mul
		k ^= k >> r
		k *= mul
		h *= mul
		h ^= k
	}
	switch n & 3 {
	case 3:
		h ^= uint32(d[whole+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(d[whole+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(d[whole])
		h *= mul
	}
	h ^= h >> 13
	h *= mul
	h ^= h >> 15
	return h
}

// ---- configuration ---------------------------------------------------------

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "sluice-sarama"
	c.Version = sarama.V2_1_0_0
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	c.Net.DialTimeout = 10 * time.Second
	c.Net.ReadTimeout = 40 * time.Second
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Group.Session.Timeout = 10 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	c.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	c.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	return c
}

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
	"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

var partitioners = map[string]sarama.PartitionerConstructor{
	"fnv":           sarama.NewHashPartitioner,
	"reference":     sarama.NewReferenceHashPartitioner,
	"murmur2":       sarama.NewCustomPartitioner(sarama.WithAbsFirst(), sarama.WithCustomHashFunction(newMurmur2)),
	"murmur2-noabs": sarama.NewCustomHashPartitioner(newMurmur2),
	"manual":        sarama.NewManualPartitioner,
}

type out map[string]interface{}

func waitFor(cond func() bool, what func() string) error {
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("hang guard waiting for: %s", what())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// ---- admin -----------------------------------------------------------------

func admin(boot, topic, group string, res out) error {
	adm, err := sarama.NewClusterAdmin([]string{boot}, config())
	if err != nil {
		return fmt.Errorf("NewClusterAdmin: %v", err)
	}
	defer adm.Close()
	gone := topic + "-gone"
	for _, t := range []string{topic, gone} {
		if err := adm.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
			return fmt.Errorf("CreateTopic %s: %v", t, err)
		}
	}
	list := func() (map[string]int32, error) {
		ts, err := adm.ListTopics()
		if err != nil {
			return nil, fmt.Errorf("ListTopics: %v", err)
		}
		m := map[string]int32{}
		for name, d := range ts {
			m[name] = d.NumPartitions
		}
		return m, nil
	}
	if res["listed"], err = list(); err != nil {
		return err
	}
	md, err := adm.DescribeTopics([]string{topic, gone})
	if err != nil {
		return fmt.Errorf("DescribeTopics: %v", err)
	}
	var described []out
	for _, t := range md {
		var parts []out
		for _, p := range t.Partitions {
			parts = append(parts, out{"id": p.ID, "leader": p.Leader, "replicas": p.Replicas, "isr": p.Isr,
				"err": int(p.Err)})
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i]["id"].(int32) < parts[j]["id"].(int32) })
		described = append(described, out{"name": t.Name, "err": int(t.Err), "partitions": parts})
	}
	res["described"] = described
	if err := adm.DeleteTopic(gone); err != nil {
		return fmt.Errorf("DeleteTopic %s: %v", gone, err)
	}
	// the broker's metadata answers without it once the deletion applied
	var after map[string]int32
	err = waitFor(func() bool {
		after, err = list()
		_, still := after[gone]
		return err == nil && !still
	}, func() string { return fmt.Sprintf("%s gone from ListTopics: %v %v", gone, after, err) })
	if err != nil {
		return err
	}
	res["listedAfterDelete"] = after
	groups, err := adm.ListConsumerGroups()
	if err != nil {
		return fmt.Errorf("ListConsumerGroups: %v", err)
	}
	res["groups"] = groups
	gd, err := adm.DescribeConsumerGroups([]string{group})
	if err != nil {
		return fmt.Errorf("DescribeConsumerGroups: %v", err)
	}
	var descs []out
	for _, g := range gd {
		descs = append(descs, out{"groupId": g.GroupId, "err": int(g.Err), "state": g.State,
			"protocolType": g.ProtocolType, "members": len(g.Members)})
	}
	res["describedGroups"] = descs
	res["offsets"], err = groupOffsets(adm, group, "")
	return err
}

// groupOffsets is ListConsumerGroupOffsets (OffsetFetch v1) of every
// partition the group committed ({topic: {partition: offset}}); topic ""
// asks for all the topics ListTopics shows.
func groupOffsets(adm sarama.ClusterAdmin, group, topic string) (map[string]map[string]int64, error) {
	want := map[string][]int32{}
	ts, err := adm.ListTopics()
	if err != nil {
		return nil, fmt.Errorf("ListTopics: %v", err)
	}
	for name, d := range ts {
		if topic != "" && name != topic {
			continue
		}
		for p := int32(0); p < d.NumPartitions; p++ {
			want[name] = append(want[name], p)
		}
	}
	resp, err := adm.ListConsumerGroupOffsets(group, want)
	if err != nil {
		return nil, fmt.Errorf("ListConsumerGroupOffsets %s: %v", group, err)
	}
	got := map[string]map[string]int64{}
	for t, ps := range resp.Blocks {
		for p, b := range ps {
			if b.Err != sarama.ErrNoError {
				return nil, fmt.Errorf("ListConsumerGroupOffsets %s %s[%d]: %v", group, t, p, b.Err)
			}
			if b.Offset < 0 {
				continue
			}
			if got[t] == nil {
				got[t] = map[string]int64{}
			}
			got[t][strconv.Itoa(int(p))] = b.Offset
		}
	}
	return got, nil
}

// ---- producers and a plain consumer ------------------------------------------

func produce(boot, topic string, n int, mode, codec, part string, res out) error {
	c := config()
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	cc, ok := codecs[codec]
	pc, ok2 := partitioners[part]
	if !ok || !ok2 {
		return fmt.Errorf("unknown codec %q or partitioner %q", codec, part)
	}
	c.Producer.Compression = cc
	c.Producer.Partitioner = pc
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("key-%d", i)),
			Value: sarama.StringEncoder(fmt.Sprintf("value-%d", i)), Partition: int32(i % 3), Metadata: i}
	}
	switch mode {
	case "sync":
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
		p, err := sarama.NewSyncProducer([]string{boot}, c)
		if err != nil {
			return fmt.Errorf("NewSyncProducer: %v", err)
		}
		defer p.Close()
		// one SendMessages call: the records go in batches, the way an
		// application's bulk send does
		if err := p.SendMessages(msgs); err != nil {
			return fmt.Errorf("SendMessages: %v", err)
		}
	case "async":
		c.Producer.Flush.Messages = 50
		p, err := sarama.NewAsyncProducer([]string{boot}, c)
		if err != nil {
			return fmt.Errorf("NewAsyncProducer: %v", err)
		}
		go func() {
			for _, m := range msgs {
				p.Input() <- m
			}
		}()
		timeout := time.After(hangGuard)
		for done := 0; done < n; done++ {
			select {
			case <-p.Successes():
			case e := <-p.Errors():
				p.AsyncClose()
				return fmt.Errorf("async producer: %v", e.Err)
			case <-timeout:
				return fmt.Errorf("async producer: %d of %d acknowledged (hang guard)", done, n)
			}
		}
		if err := p.Close(); err != nil {
			return fmt.Errorf("AsyncProducer.Close: %v", err)
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	var sent []out
	for _, m := range msgs {
		sent = append(sent, out{"i": m.Metadata, "partition": m.Partition, "offset": m.Offset})
	}
	res["sent"] = sent
	return nil
}

func read(boot, topic string, n int, res out) error {
	cons, err := sarama.NewConsumer([]string{boot}, config())
	if err != nil {
		return fmt.Errorf("NewConsumer: %v", err)
	}
	defer cons.Close()
	parts, err := cons.Partitions(topic)
	if err != nil {
		return fmt.Errorf("Partitions %s: %v", topic, err)
	}
	ch := make(chan *sarama.ConsumerMessage)
	for _, p := range parts {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("ConsumePartition %s[%d]: %v", topic, p, err)
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				ch <- m
			}
		}()
	}
	var recs []out
	timeout := time.After(hangGuard)
	for len(recs) < n {
		select {
		case m := <-ch:
			recs = append(recs, out{"partition": m.Partition, "offset": m.Offset, "key": string(m.Key),
				"value": string(m.Value)})
		case <-timeout:
			return fmt.Errorf("read %d of %d records (hang guard)", len(recs), n)
		}
	}
	res["records"] = recs
	return nil
}

// ---- consumer group members ------------------------------------------------

type rec struct {
	Member    string `json:"member"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Marked    bool   `json:"marked"`
}

// member is one ConsumerGroup whose Consume loop runs in its own goroutine
// until leave(); the handler records and marks what it reads. Its state is
// under its process's shared lock (the handlers of all members, the error
// readers and the test's waits touch it).
type member struct {
	name   string
	sh     *shared
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}

	claims  []int32 // the current session's claims (nil between sessions)
	session int     // sessions set up so far
	noMark  bool    // read without marking: the uncommitted window
}

// shared: one process's members, every record they read and every error
// Sarama returned, under mu.
type shared struct {
	mu      sync.Mutex
	members []*member
	recs    []rec
	errs    []string
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.sh.mu.Lock()
	defer m.sh.mu.Unlock()
	m.claims = []int32{}
	for _, ps := range s.Claims() {
		m.claims = append(m.claims, ps...)
	}
	sort.Slice(m.claims, func(i, j int) bool { return m.claims[i] < m.claims[j] })
	m.session++
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error {
	m.sh.mu.Lock()
	m.claims = nil
	m.sh.mu.Unlock()
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.sh.mu.Lock()
		mark := !m.noMark
		m.sh.recs = append(m.sh.recs, rec{m.name, msg.Partition, msg.Offset, string(msg.Key), mark})
		m.sh.mu.Unlock()
		if mark {
			s.MarkMessage(msg, "")
		}
	}
	return nil
}

func (m *member) state() ([]int32, int) {
	m.sh.mu.Lock()
	defer m.sh.mu.Unlock()
	return append([]int32(nil), m.claims...), m.session
}

func (sh *shared) fail(format string, a ...interface{}) {
	sh.mu.Lock()
	sh.errs = append(sh.errs, fmt.Sprintf(format, a...))
	sh.mu.Unlock()
}

func (sh *shared) join(boot, groupID, topic, name string) (*member, error) {
	g, err := sarama.NewConsumerGroup([]string{boot}, groupID, config())
	if err != nil {
		return nil, fmt.Errorf("NewConsumerGroup %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, sh: sh, group: g, cancel: cancel, done: make(chan struct{})}
	sh.mu.Lock()
	sh.members = append(sh.members, m)
	sh.mu.Unlock()
	go func() {
		for e := range g.Errors() {
			sh.fail("%s: %v", name, e)
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil && ctx.Err() == nil {
				sh.fail("%s: Consume: %v", name, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return m, nil
}

func (sh *shared) count() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.recs)
}

func (sh *shared) report(res out) {
	sh.mu.Lock()
	res["records"] = sh.recs
	res["errors"] = sh.errs
	sh.mu.Unlock()
}

// leave ends the member's Consume loop and closes it: the session's
// offsets are committed one last time, then LeaveGroup.
func (m *member) leave() error {
	m.cancel()
	if err := m.group.Close(); err != nil {
		return fmt.Errorf("%s: Close: %v", m.name, err)
	}
	select {
	case <-m.done:
	case <-time.After(hangGuard):
		return fmt.Errorf("%s: Consume did not return after Close (hang guard)", m.name)
	}
	return nil
}

func manualProducer(boot string) (sarama.SyncProducer, error) {
	c := config()
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{boot}, c)
	if err != nil {
		return nil, fmt.Errorf("NewSyncProducer: %v", err)
	}
	return p, nil
}

// produceEach sends per records to each of partitions 0..parts-1, keyed
// "TAG-PARTITION-I".
func produceEach(p sarama.SyncProducer, topic string, parts, per int, tag string) error {
	var msgs []*sarama.ProducerMessage
	for part := 0; part < parts; part++ {
		for i := 0; i < per; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(part),
				Key: sarama.StringEncoder(fmt.Sprintf("%s-%d-%d", tag, part, i)), Value: sarama.StringEncoder("v")})
		}
	}
	if err := p.SendMessages(msgs); err != nil {
		return fmt.Errorf("SendMessages %s: %v", tag, err)
	}
	return nil
}

const groupParts = 4

func churn(boot, topic, groupID string, res out) error {
	adm, err := sarama.NewClusterAdmin([]string{boot}, config())
	if err != nil {
		return fmt.Errorf("NewClusterAdmin: %v", err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: groupParts, ReplicationFactor: 1}, false); err != nil {
		return fmt.Errorf("CreateTopic %s: %v", topic, err)
	}
	prod, err := manualProducer(boot)
	if err != nil {
		return err
	}
	defer prod.Close()
	sh := &shared{}
	defer sh.report(res)
	var steps []out
	step := func(name string, ms ...*member) {
		o := out{"step": name}
		for _, m := range ms {
			claims, sessions := m.state()
			o[m.name] = out{"claims": claims, "sessions": sessions}
		}
		steps = append(steps, o)
		res["steps"] = steps
	}
	owns := func(m *member, n int) func() bool {
		return func() bool { c, _ := m.state(); return len(c) == n }
	}
	split := func(a, b *member) func() bool {
		return func() bool {
			ca, _ := a.state()
			cb, _ := b.state()
			seen := map[int32]bool{}
			for _, p := range append(ca, cb...) {
				seen[p] = true
			}
			return len(ca) == 2 && len(cb) == 2 && len(seen) == groupParts
		}
	}
	claimsOf := func(ms ...*member) func() string {
		return func() string {
			s := ""
			for _, m := range ms {
				c, n := m.state()
				s += fmt.Sprintf("%s claims %v (session %d) ", m.name, c, n)
			}
			sh.mu.Lock()
			defer sh.mu.Unlock()
			return s + fmt.Sprintf("errors %v", sh.errs)
		}
	}
	readAll := func(n int) error {
		return waitFor(func() bool { return sh.count() >= n },
			func() string { return fmt.Sprintf("%d of %d records read", sh.count(), n) })
	}

	a, err := sh.join(boot, groupID, topic, "A")
	if err != nil {
		return err
	}
	if err := waitFor(owns(a, groupParts), claimsOf(a)); err != nil {
		return err
	}
	step("A alone", a)
	total := 0
	for _, ph := range []struct {
		tag    string
		before func() error
	}{
		{"one", nil},
		{"two", func() error { // B joins: 2 + 2
			b, err := sh.join(boot, groupID, topic, "B")
			if err != nil {
				return err
			}
			if err := waitFor(split(a, b), claimsOf(a, b)); err != nil {
				return err
			}
			step("B joined", a, b)
			return nil
		}},
		{"three", func() error { // B leaves: A owns all 4
			b := sh.members[1]
			if err := b.leave(); err != nil {
				return err
			}
			if err := waitFor(owns(a, groupParts), claimsOf(a)); err != nil {
				return err
			}
			step("B left", a)
			return nil
		}},
		{"four", func() error { // B joins again
			b, err := sh.join(boot, groupID, topic, "B2")
			if err != nil {
				return err
			}
			if err := waitFor(split(a, b), claimsOf(a, b)); err != nil {
				return err
			}
			step("B2 joined", a, b)
			return nil
		}},
	} {
		if ph.before != nil {
			if err := ph.before(); err != nil {
				return err
			}
		}
		per := 10
		if ph.tag == "one" {
			per = 20
		}
		if err := produceEach(prod, topic, groupParts, per, ph.tag); err != nil {
			return err
		}
		total += per * groupParts
		if err := readAll(total); err != nil {
			return err
		}
	}
	b2 := sh.members[2]
	if err := b2.leave(); err != nil {
		return err
	}
	if err := waitFor(owns(a, groupParts), claimsOf(a)); err != nil {
		return err
	}
	step("B2 left", a)
	// let A's last marks be committed before the window opens: nothing
	// else is to be read until then
	time.Sleep(300 * time.Millisecond)
	sh.mu.Lock()
	a.noMark = true
	sh.mu.Unlock()
	if err := produceEach(prod, topic, groupParts, 5, "window"); err != nil {
		return err
	}
	total += 5 * groupParts
	if err := readAll(total); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // anything read twice shows up now
	if err := a.leave(); err != nil {
		return err
	}
	res["committed"], err = groupOffsets(adm, groupID, topic)
	return err
}

func resume(boot, topic, groupID string, want int, res out) error {
	adm, err := sarama.NewClusterAdmin([]string{boot}, config())
	if err != nil {
		return fmt.Errorf("NewClusterAdmin: %v", err)
	}
	defer adm.Close()
	prod, err := manualProducer(boot)
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := produceEach(prod, topic, groupParts, 10, "five"); err != nil {
		return err
	}
	res["committedBefore"], err = groupOffsets(adm, groupID, topic)
	if err != nil {
		return err
	}
	sh := &shared{}
	defer sh.report(res)
	c, err := sh.join(boot, groupID, topic, "C")
	if err != nil {
		return err
	}
	if err := waitFor(func() bool { return sh.count() >= want },
		func() string { return fmt.Sprintf("C read %d of %d records", sh.count(), want) }); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // anything extra shows up now
	if err := c.leave(); err != nil {
		return err
	}
	res["committed"], err = groupOffsets(adm, groupID, topic)
	return err
}

func main() {
	if g, err := strconv.Atoi(os.Getenv("SLUICE_HANG_GUARD")); err == nil && g > 20 {
		hangGuard = time.Duration(g-10) * time.Second
	}
	if os.Getenv("SARAMA_LOG") != "" {
		sarama.Logger = log.New(os.Stderr, "sarama ", log.Lmicroseconds)
	}
	args := os.Args[1:]
	usage := "usage: sarama_check admin|produce|read|churn|resume BOOT TOPIC ... (see the file's header)"
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, boot, topic := args[0], args[1], args[2]
	res := out{"ok": false, "cmd": cmd}
	t0 := time.Now()
	var err error
	atoi := func(s string) int {
		n, e := strconv.Atoi(s)
		if e != nil {
			err = e
		}
		return n
	}
	switch {
	case cmd == "admin" && len(args) == 4:
		err = admin(boot, topic, args[3], res)
	case cmd == "produce" && len(args) == 7:
		n := atoi(args[3])
		if err == nil {
			err = produce(boot, topic, n, args[4], args[5], args[6], res)
		}
	case cmd == "read" && len(args) == 4:
		n := atoi(args[3])
		if err == nil {
			err = read(boot, topic, n, res)
		}
	case cmd == "churn" && len(args) == 4:
		err = churn(boot, topic, args[3], res)
	case cmd == "resume" && len(args) == 5:
		n := atoi(args[4])
		if err == nil {
			err = resume(boot, topic, args[3], n, res)
		}
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	res["ms"] = time.Since(t0).Milliseconds()
	if err != nil {
		res["error"] = err.Error()
	} else {
		res["ok"] = true
	}
	b, jerr := json.Marshal(res)
	if jerr != nil {
		fmt.Printf("{\"ok\": false, \"error\": %q}\n", "json: "+jerr.Error())
		os.Exit(1)
	}
	fmt.Println(string(b))
	if err != nil {
		os.Exit(1)
	}
}
