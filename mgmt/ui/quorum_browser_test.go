package ui_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hashicorp/memberlist"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/cluster"
	"github.com/warrenmq/warren/server"
)

// TestUIBrowserQuorumQueue declares a quorum queue with the UI's form; the
// list's Node column shows its leader, and the queue's page shows type,
// leader, online and members (RabbitMQ's quorum queue page) instead of a
// node, as the API reports them.
func TestUIBrowserQuorumQueue(t *testing.T) {
	s := newSession(t, "#/queues")
	s.do("declare quorum queue",
		chromedp.SetValue(field("Add a queue", "Type"), "quorum"),
		chromedp.SendKeys(field("Add a queue", "Name"), "ui-qq"),
		chromedp.Click(submit("Add a queue")))
	s.formOK("declare quorum queue", "Add a queue", `Queue "ui-qq" declared.`)
	var q struct {
		Type    string   `json:"type"`
		Leader  string   `json:"leader"`
		Members []string `json:"members"`
	}
	if code := s.apiGet("/queues/%2F/ui-qq", &q); code != http.StatusOK || q.Type != "quorum" || q.Leader == "" || len(q.Members) != 1 {
		t.Fatalf("GET /api/queues/%%2F/ui-qq: %d %+v", code, q)
	}
	// The cell under the Node header of the queue's row.
	cell := func(header string) string {
		return `(() => {
			const t = document.querySelector('table.list');
			const i = [...t.querySelectorAll('thead th')].findIndex((th) => th.textContent.trim().startsWith('` + header + `'));
			const row = t.querySelector('tbody tr[data-key="//ui-qq"]');
			return i >= 0 && row ? row.children[i].textContent : '';
		})()`
	}
	if got := s.waitText("leader in the list", cell("Node")); got != q.Leader {
		t.Errorf("list Node column %q, want the leader %q", got, q.Leader)
	}
	if got := s.eval(cell("Type")); got != "quorum" {
		t.Errorf("list Type column %q", got)
	}

	s.click("open the quorum queue", `a[href="#/queues/%2F/ui-qq"]`)
	detail := func(term string) string {
		return `(() => {
			const dt = [...document.querySelectorAll('main dl.details dt')].find((d) => d.textContent === '` + term + `');
			return dt ? dt.nextElementSibling.textContent : '';
		})()`
	}
	if got := s.waitText("leader on the page", detail("Leader")); got != q.Leader {
		t.Errorf("page Leader %q, want %q", got, q.Leader)
	}
	for term, want := range map[string]string{"Type": "quorum", "Online": q.Leader, "Members": q.Leader} {
		if got := s.eval(detail(term)); got != want {
			t.Errorf("page %s %q, want %q", term, got, want)
		}
	}
	if got := s.eval(detail("Node")); got != "" {
		t.Errorf("a quorum queue's page shows Node %q; RabbitMQ's shows its leader and members", got)
	}
	s.screenshot("quorum-queue.png")
}

// startClusterBrokers starts three brokers as one in-process cluster with
// timings short enough for a loaded machine, and returns them once the
// first sees all three alive and guest can log in to it.
func startClusterBrokers(t *testing.T) []*server.Server {
	t.Helper()
	srvs := make([]*server.Server, 3)
	var seed string
	for i := range srvs {
		c := cluster.DefaultConfig()
		c.BindAddr, c.Secret, c.ClusterName = "127.0.0.1:0", "a ui cluster test secret", "ui-test"
		c.BootstrapExpect = 3
		if i > 0 {
			c.Seeds = []string{seed}
		}
		c.HeartbeatTimeout, c.ElectionTimeout = 500*time.Millisecond, 500*time.Millisecond
		c.LeaderLeaseTimeout, c.CommitTimeout = 250*time.Millisecond, 10*time.Millisecond
		c.ReconnectInterval, c.PromoteAfter, c.ReconcileInterval = 500*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
		g := memberlist.DefaultLocalConfig()
		g.ProbeInterval, g.ProbeTimeout, g.GossipInterval = 200*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		c.Gossip = g
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		cfg := server.DefaultConfig()
		cfg.AMQPListen, cfg.DataDir, cfg.MemoryHighWatermark = "127.0.0.1:0", t.TempDir(), 0
		cfg.NodeName, cfg.Cluster = fmt.Sprintf("warren@u%d", i+1), c
		cfg.Logger = c.Logger
		srv, err := server.New(cfg)
		if err != nil {
			t.Fatalf("server.New: %v", err)
		}
		if err := srv.Start(); err != nil {
			t.Fatalf("server.Start: %v", err)
		}
		t.Cleanup(func() { srv.Close() })
		srvs[i] = srv
		if i == 0 {
			seed = srv.ClusterNode().Addr()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		alive := 0
		for _, m := range srvs[0].ClusterNode().Members() {
			if m.State == cluster.StateAlive {
				alive++
			}
		}
		conn, err := amqp.Dial("amqp://guest:guest@" + srvs[0].Addr().String() + "/")
		if err == nil {
			conn.Close()
			if alive == 3 {
				return srvs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not formed: %d alive, login: %v", alive, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUIBrowserQuorumQueueCluster: a quorum queue on three nodes is listed
// with its leader and "+2" (its members in the title), and its page shows
// all three members, online.
func TestUIBrowserQuorumQueueCluster(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("browser test needs %s: %v", chromiumPath, err)
	}
	srvs := startClusterBrokers(t)
	amqpURL := "amqp://guest:guest@" + srvs[0].Addr().String() + "/"
	s := openSession(t, srvs[0], amqpURL, "#/queues", nil)
	s.do("declare quorum queue",
		chromedp.SetValue(field("Add a queue", "Type"), "quorum"),
		chromedp.SendKeys(field("Add a queue", "Name"), "ui-cq3"),
		chromedp.Click(submit("Add a queue")))
	s.formOK("declare quorum queue", "Add a queue", `Queue "ui-cq3" declared.`)
	const all = "warren@u1, warren@u2, warren@u3"
	s.wait("leader and two more members listed", `(() => {
		const row = document.querySelector('table.list tbody tr[data-key="//ui-cq3"]');
		const abbr = row && row.querySelector('abbr');
		return !!abbr && row.textContent.includes('warren@u1 +2') && abbr.title === 'Members: `+all+`';
	})()`)
	s.click("open the queue", `a[href="#/queues/%2F/ui-cq3"]`)
	s.wait("members and online on the page", `(() => {
		const dd = (term) => { const dt = [...document.querySelectorAll('main dl.details dt')].find((d) => d.textContent === term); return dt ? dt.nextElementSibling.textContent : ''; };
		return dd('Leader') === 'warren@u1' && dd('Members') === '`+all+`' && dd('Online') === '`+all+`';
	})()`)
	s.screenshot("quorum-queue-cluster.png")
}
