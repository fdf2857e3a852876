package ui_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
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
