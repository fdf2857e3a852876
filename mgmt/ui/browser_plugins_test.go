package ui_test

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/federation"
	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
	"github.com/warrenmq/warren/shovel"
)

// wirePlugins runs a shovel runner over the broker's shovel parameters,
// as cmd/warren does, and a federation runner that sees one federated
// exchange whose policy names an upstream that does not exist (its error
// entry is a link status row without a second broker).
func wirePlugins(t *testing.T) func(*mgmt.Config, *server.Server) {
	return func(cfg *mgmt.Config, srv *server.Server) {
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		local := func() (shovel.Local, error) {
			user, password := srv.InternalCredential()
			return shovel.Local{Addr: srv.Addr().String(), User: user, Password: password}, nil
		}
		sh := shovel.New(shovel.Config{
			Params: func() []shovel.Param {
				var out []shovel.Param
				for _, p := range srv.Parameters() {
					if p.Component == "shovel" {
						out = append(out, shovel.Param{Vhost: p.Vhost, Name: p.Name, Value: p.Value})
					}
				}
				return out
			},
			Local:  local,
			Delete: func(vhost, name string) error { return srv.DeleteParameter("shovel", vhost, name) },
			Node:   srv.NodeName(), Logger: logger,
		})
		srv.OnParameterChange(func(component string) {
			if component == "shovel" {
				sh.Changed()
			}
		})
		sh.Start()
		fed := federation.New(federation.Config{
			Params: func() []federation.Param { return nil },
			Targets: func() []federation.Target {
				return []federation.Target{{Vhost: "/", Name: "fed.x", Type: "fanout", Policy: map[string]any{"federation-upstream": "nowhere"}}}
			},
			Bindings:    func(string, string) []federation.Binding { return nil },
			QueueActive: func(string, string) bool { return false },
			Local: func() (federation.Local, error) {
				l, err := local()
				return federation.Local{Addr: l.Addr, User: l.User, Password: l.Password}, err
			},
			Node: srv.NodeName(), Logger: logger,
		})
		fed.Start()
		t.Cleanup(func() { sh.Close(); fed.Close() }) // before the server's Close (cleanups run last first)
		cfg.Shovels, cfg.Federation = sh, fed
	}
}

// TestUIBrowserShovelsAndFederation adds a shovel in the Shovels page and
// sees it running and moving a message, restarts it, deletes it; adds a
// federation upstream, sees it listed and deletes it, and sees a link's
// error status in the Federation page.
func TestUIBrowserShovelsAndFederation(t *testing.T) {
	s := newSessionWith(t, "#/shovels", wirePlugins(t))
	const shovelForm = "Add a shovel"
	s.do("add shovel",
		chromedp.SendKeys(field(shovelForm, "Name"), "ui-move"),
		chromedp.SendKeys(field(shovelForm, "Source queue"), "ui-src"),
		chromedp.SendKeys(field(shovelForm, "Destination queue"), "ui-dest"),
		chromedp.Click(submit(shovelForm)))
	s.formOK("add shovel", shovelForm, `Shovel "ui-move" added.`)
	row := `document.querySelector('tr[data-key="//ui-move"]')`
	s.wait("shovel listed running", row+` && `+row+`.textContent.includes('running')`)

	conn, err := amqp.Dial(s.amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish("", "ui-src", false, false, amqp.Publishing{Body: []byte("moved")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, ok, err := ch.Get("ui-dest", true)
		if err != nil {
			t.Fatal(err)
		}
		if ok && string(m.Body) == "moved" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shovel added in the UI did not move the message")
		}
		time.Sleep(20 * time.Millisecond)
	}

	s.click("restart shovel", `tr[data-key="//ui-move"] button[aria-label^="Restart"]`)
	s.confirm("confirm restart")
	s.wait("restart announced", `[...document.querySelectorAll('#toasts .toast')].some((t) => t.textContent.includes('Restarted shovel "ui-move"'))`)
	s.wait("running again", row+` && `+row+`.textContent.includes('running')`)
	s.screenshot("shovels.png")
	s.click("delete shovel", `tr[data-key="//ui-move"] button[aria-label^="Delete"]`)
	s.confirm("confirm delete")
	s.wait("shovel gone", `!`+row)
	if code := s.apiGet("/parameters/shovel/%2F/ui-move", nil); code != http.StatusNotFound {
		t.Errorf("GET the shovel parameter after delete: %d, want 404", code)
	}

	s.do("federation page", chromedp.Navigate(s.base+"/#/federation"))
	const upForm = "Add an upstream"
	s.do("add upstream",
		chromedp.SendKeys(field(upForm, "Name"), "ui-up"),
		chromedp.SendKeys(field(upForm, "URI"), "amqp://127.0.0.1:1"),
		chromedp.Click(submit(upForm)))
	s.formOK("add upstream", upForm, `Upstream "ui-up" added.`)
	up := `document.querySelector('tr[data-key="//ui-up"]')`
	s.wait("upstream listed", up+` && `+up+`.textContent.includes('amqp://127.0.0.1:1')`)
	var value struct {
		Value map[string]any `json:"value"`
	}
	if code := s.apiGet("/parameters/federation-upstream/%2F/ui-up", &value); code != http.StatusOK ||
		value.Value["uri"] != "amqp://127.0.0.1:1" || value.Value["ack-mode"] != "on-confirm" {
		t.Errorf("GET the upstream: %d %v", code, value.Value)
	}
	s.wait("the link's error shown", `[...document.querySelectorAll('tr[data-key]')].some((r) => r.textContent.includes('fed.x') && r.textContent.includes('error'))`)
	s.screenshot("federation.png")
	s.click("delete upstream", `tr[data-key="//ui-up"] button[aria-label^="Delete"]`)
	s.confirm("confirm upstream delete")
	s.wait("upstream gone", `!`+up)
}
