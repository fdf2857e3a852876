package mgmt

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/warrenmq/warren/mgmt/metrics"
)

// TestClusterQuorumCriticalHealthCheck: with a 3-replica quorum queue on
// three nodes, node-is-quorum-critical is ok everywhere and the leader's
// metrics show each mirror's replication lag; once the leader's node
// stops, each of the other two answers 503 with RabbitMQ 3.10's body
// naming the queue (stopping either would leave one of three), and the
// elected leader's metrics count one election. A classic queue never
// makes the check fail, and mirror-sync-critical stays ok (no mirrored
// classic queue).
func TestClusterQuorumCriticalHealthCheck(t *testing.T) {
	envs := startClusterEnvs(t)
	e := envs[0]
	e.must(e.put("/api/queues/%2F/qq", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}), 201, "declare")
	e.must(e.put("/api/queues/%2F/cq", map[string]any{"durable": true}), 201, "declare classic")
	for _, n := range envs {
		waitFor(t, 20*time.Second, func() error {
			r := n.get("/api/queues/%2F/qq")
			if r.status != 200 {
				return fmt.Errorf("queue on %s: %d", n.srv.NodeName(), r.status)
			}
			if online, _ := r.object(t)["online"].([]any); len(online) != 3 {
				return fmt.Errorf("online on %s: %v", n.srv.NodeName(), online)
			}
			return nil
		})
		n.must(n.get("/api/health/checks/node-is-quorum-critical"), 200, "all members up on "+n.srv.NodeName())
		n.must(n.get("/api/health/checks/node-is-mirror-sync-critical"), 200, "mirror sync on "+n.srv.NodeName())
	}

	q := map[string]string{"vhost": "/", "queue": "qq"}
	f := scrapeMetrics(t, e, "/metrics/per-object")
	for _, m := range []string{"warren@m2", "warren@m3"} {
		if _, ok := f.find("warren_quorum_replication_lag_records", map[string]string{"vhost": "/", "queue": "qq", "member": m}); !ok {
			t.Errorf("no replication lag of %s on the leader: %v", m, f["warren_quorum_replication_lag_records"])
		}
	}
	if v, _ := f.find("warren_quorum_queue_leader", q); v != 1 {
		t.Errorf("leader gauge on the leader: %v", v)
	}
	mf := scrapeMetrics(t, envs[1], "/metrics/per-object")
	if v, ok := mf.find("warren_quorum_queue_leader", q); !ok || v != 0 {
		t.Errorf("leader gauge on a mirror: %v %v", v, ok)
	}

	envs[0].srv.Close()
	want := map[string]any{"status": "failed",
		"reason": "There are quorum queues that would lose their quorum if the target node is shut down",
		"queues": []any{map[string]any{"readable_name": "queue 'qq' in vhost '/'", "name": "qq", "virtual_host": "/", "type": "quorum"}}}
	wantJSON, _ := json.Marshal(want)
	for _, n := range envs[1:] {
		waitFor(t, 20*time.Second, func() error {
			r := n.get("/api/health/checks/node-is-quorum-critical")
			var got any
			if err := json.Unmarshal(r.body, &got); err != nil {
				return fmt.Errorf("%s: %d %s: %v", n.srv.NodeName(), r.status, r.body, err)
			}
			gotJSON, _ := json.Marshal(got)
			if r.status != 503 || string(gotJSON) != string(wantJSON) {
				return fmt.Errorf("%s: %d %s, want 503 %s", n.srv.NodeName(), r.status, gotJSON, wantJSON)
			}
			return nil
		})
		n.must(n.get("/api/health/checks/node-is-mirror-sync-critical"), 200, "mirror sync, a member down, on "+n.srv.NodeName())
	}
	waitFor(t, 20*time.Second, func() error {
		for _, n := range envs[1:] {
			f := scrapeMetrics(t, n, "/metrics/per-object")
			if v, _ := f.find("warren_quorum_queue_leader", q); v == 1 {
				if el, _ := f.find("warren_quorum_queue_leader_elections_total", q); el != 1 {
					return fmt.Errorf("elections on the new leader %s: %v", n.srv.NodeName(), el)
				}
				return nil
			}
		}
		return fmt.Errorf("no new leader in the metrics")
	})
}

// scrapedFamilies is one parsed metrics scrape.
type scrapedFamilies map[string]*dto.MetricFamily

// find is the value of the first series of name whose labels include want.
func (f scrapedFamilies) find(name string, want map[string]string) (float64, bool) {
	for _, m := range f[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && got[k] == v
		}
		if match {
			if m.Counter != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// scrapeMetrics scrapes e's broker through the metrics package's handler
// on a loopback listener of the test's own.
func scrapeMetrics(t *testing.T, e *env, path string) scrapedFamilies {
	t.Helper()
	opts := metrics.DefaultOptions()
	opts.Logger = testLogger()
	hs := httptest.NewServer(metrics.Handler(e.srv, opts))
	defer hs.Close()
	r, err := hs.Client().Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return mfs
}

// TestQuorumCriticalSingleNode: a standalone node answers both checks as
// RabbitMQ's single node cluster, whatever its quorum queues.
func TestQuorumCriticalSingleNode(t *testing.T) {
	e := newEnv(t)
	e.must(e.put("/api/queues/%2F/qq", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum"}}), 201, "declare")
	for _, check := range []string{"node-is-quorum-critical", "node-is-mirror-sync-critical"} {
		body := e.must(e.get("/api/health/checks/"+check), 200, check).object(t)
		if body["status"] != "ok" || body["reason"] != "single node cluster" {
			t.Errorf("%s: %v", check, body)
		}
	}
}
