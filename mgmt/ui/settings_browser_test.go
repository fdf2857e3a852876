package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestUIBrowserSettingsPages drives the pages RabbitMQ's Admin tab has and
// Warren's lacked: limits (set, enforced, cleared), feature flags (listed,
// an enable Warren refuses shown as an error), runtime and global
// parameters; then the typed policy editor and the chart range selector.
// Each step is checked through the API or AMQP.
func TestUIBrowserSettingsPages(t *testing.T) {
	s := newSession(t, "#/limits")
	checkLimits(s)
	checkFeatureFlags(s)
	checkParameters(s)
	checkTypedPolicy(s)
	checkChartRange(s)
}

func checkLimits(s *session) {
	t := s.t
	t.Helper()
	const form = "Set a virtual host limit"
	s.do("set max-connections 0 on /",
		chromedp.SetValue(field(form, "Limit"), "max-connections"),
		chromedp.SetValue(field(form, "Value"), "0"),
		chromedp.Click(submit(form)))
	s.formOK("set limit", form, `Limit max-connections of "/" set to 0.`)
	s.wait("limit listed", `!!document.querySelector('tr[data-key="//max-connections"]')`)
	var limits []struct {
		Vhost string         `json:"vhost"`
		Value map[string]any `json:"value"`
	}
	if code := s.apiGet("/vhost-limits/%2F", &limits); code != http.StatusOK || len(limits) != 1 || limits[0].Value["max-connections"] != float64(0) {
		t.Fatalf("GET /api/vhost-limits/%%2F: %d %+v", code, limits)
	}
	_, err := amqp.Dial(s.amqpURL)
	if e, ok := err.(*amqp.Error); !ok || e.Code != 530 {
		t.Fatalf("connection under the UI's limit: %v, want 530", err)
	}
	s.screenshot("limits.png")
	s.click("clear the limit", `button[data-focus-key="del:/vhost-limits/%2F/max-connections"]`)
	s.confirm("confirm clear")
	s.wait("limit gone", `!document.querySelector('tr[data-key="//max-connections"]')`)
	c, err := amqp.Dial(s.amqpURL)
	if err != nil {
		t.Fatalf("connection after the limit was cleared: %v", err)
	}
	c.Close()

	const userForm = "Set a user limit"
	s.wait("users listed", `[...document.querySelector('form[aria-label="`+userForm+`"] select').options].some((o) => o.value === 'guest')`)
	s.do("set max-channels 3 on guest",
		chromedp.SetValue(field(userForm, "Limit"), "max-channels"),
		chromedp.SetValue(field(userForm, "Value"), "3"),
		chromedp.Click(submit(userForm)))
	s.formOK("set user limit", userForm, `Limit max-channels of "guest" set to 3.`)
	s.wait("user limit listed", `!!document.querySelector('tr[data-key="guest/max-channels"]')`)
	var ulimits []struct {
		Value map[string]any `json:"value"`
	}
	if code := s.apiGet("/user-limits/guest", &ulimits); code != http.StatusOK || len(ulimits) != 1 || ulimits[0].Value["max-channels"] != float64(3) {
		t.Fatalf("GET /api/user-limits/guest: %d %+v", code, ulimits)
	}
}

func checkFeatureFlags(s *session) {
	t := s.t
	t.Helper()
	s.do("feature flags page", chromedp.Navigate(s.base+"/#/feature-flags"))
	s.wait("flags listed", `!!document.querySelector('tr[data-key="stream_queue"]') && !!document.querySelector('tr[data-key="quorum_queue"]')`)
	if got := s.eval(`document.querySelector('tr[data-key="stream_queue"] td').textContent`); got != "enabled" {
		t.Errorf("stream_queue shows %q, want enabled", got)
	}
	// quorum_queue is disabled until Warren replicates queues; enabling it
	// is refused and the refusal shown, not a success.
	if s.evalBool(`!!document.querySelector('tr[data-key="quorum_queue"] button')`) {
		s.expectRefusal("/feature-flags/quorum_queue/enable")
		s.click("enable quorum_queue", `button[data-focus-key="enable:quorum_queue"]`)
		got := s.waitText("refusal shown", `[...document.querySelectorAll('#toasts .toast-error')].map((t) => t.textContent).find((t) => t.includes('quorum_queue')) || ''`)
		if !strings.Contains(got, "cannot be enabled") {
			t.Errorf("enable refusal shows %q", got)
		}
	}
}

func checkParameters(s *session) {
	t := s.t
	t.Helper()
	s.do("parameters page", chromedp.Navigate(s.base+"/#/parameters"))
	const form = "Set a runtime parameter"
	s.do("set an upstream",
		chromedp.SetValue(field(form, "Component"), "federation-upstream"),
		chromedp.SendKeys(field(form, "Name"), "ui-up"),
		chromedp.SendKeys(field(form, "Value (JSON object)"), `{"uri": "amqp://127.0.0.1:5999", "expires": 60000}`),
		chromedp.Click(submit(form)))
	s.formOK("set parameter", form, `Parameter "ui-up" set.`)
	s.wait("parameter listed", `!!document.querySelector('tr[data-key="federation-upstream///ui-up"]')`)
	var p struct {
		Value map[string]any `json:"value"`
	}
	if code := s.apiGet("/parameters/federation-upstream/%2F/ui-up", &p); code != http.StatusOK || p.Value["uri"] != "amqp://127.0.0.1:5999" {
		t.Fatalf("GET the upstream: %d %+v", code, p)
	}
	// A value the federation plugin would refuse: the API's reason shows.
	s.expectRefusal("/parameters/federation-upstream/%2F/ui-bad")
	s.do("set a bad upstream",
		chromedp.SendKeys(field(form, "Name"), "ui-bad"),
		chromedp.SetValue(field(form, "Value (JSON object)"), `{"expires": 60000}`),
		chromedp.Click(submit(form)))
	if got := s.formResult("bad parameter", form); !strings.HasPrefix(got, "error: ") {
		t.Errorf("an upstream without uri: %q, want the API's refusal", got)
	}
	s.click("clear the upstream", `button[data-focus-key="del:/parameters/federation-upstream/%2F/ui-up"]`)
	s.confirm("confirm clear")
	s.wait("parameter gone", `!document.querySelector('tr[data-key="federation-upstream///ui-up"]')`)

	const gform = "Set a global parameter"
	s.do("set a global parameter",
		chromedp.SendKeys(field(gform, "Name"), "ui-note"),
		chromedp.SendKeys(field(gform, "Value (JSON)"), `{"k": [1, "two"]}`),
		chromedp.Click(submit(gform)))
	s.formOK("set global parameter", gform, `Global parameter "ui-note" set.`)
	s.wait("global parameter listed", `!!document.querySelector('tr[data-key="ui-note"]')`)
	var g struct {
		Value map[string]any `json:"value"`
	}
	if code := s.apiGet("/global-parameters/ui-note", &g); code != http.StatusOK || len(g.Value["k"].([]any)) != 2 {
		t.Fatalf("GET the global parameter: %d %+v", code, g)
	}
	s.screenshot("parameters.png")
}

// checkTypedPolicy fills the policy form's typed rows: a number, a string
// in a second row and a quick-insert key, applied to classic queues.
func checkTypedPolicy(s *session) {
	t := s.t
	t.Helper()
	s.do("policies page", chromedp.Navigate(s.base+"/#/policies"))
	const form = "User policies: add or update"
	s.do("a bad number",
		chromedp.SendKeys(field(form, "Name"), "ui-typed"),
		chromedp.SetValue(field(form, "Pattern (regular expression)"), "^typed"),
		chromedp.SetValue(field(form, "Apply to"), "classic_queues"),
		chromedp.SendKeys(field(form, "Key 1"), "max-length"),
		chromedp.SendKeys(field(form, "Value 1"), "five"),
		chromedp.SetValue(field(form, "Type 1"), "number"),
		chromedp.Click(submit(form)))
	if got := s.formResult("bad number", form); got != `error: The value of "max-length" is not a number: "five".` {
		t.Errorf("a non-number in a number row: %q", got)
	}
	s.do("fix it, add a row",
		chromedp.SetValue(field(form, "Value 1"), "5"),
		chromedp.Click(chromedp.CSS(`form[aria-label="`+form+`"] .typed-rows > button`)),
		chromedp.SendKeys(field(form, "Key 2"), "overflow"),
		chromedp.SendKeys(field(form, "Value 2"), "reject-publish"))
	s.click("quick insert message-ttl", `form[aria-label="`+form+`"] .quick-tags button:nth-child(1)`)
	s.do("save", chromedp.Click(submit(form)))
	s.formOK("save typed policy", form, `Policy "ui-typed" saved.`)
	var pol struct {
		ApplyTo    string         `json:"apply-to"`
		Definition map[string]any `json:"definition"`
	}
	if code := s.apiGet("/policies/%2F/ui-typed", &pol); code != http.StatusOK || pol.ApplyTo != "classic_queues" ||
		pol.Definition["max-length"] != float64(5) || pol.Definition["overflow"] != "reject-publish" ||
		pol.Definition["message-ttl"] != float64(60000) || len(pol.Definition) != 3 {
		t.Fatalf("GET /api/policies/%%2F/ui-typed: %d %+v", code, pol)
	}
}

// checkChartRange picks "Last hour" on the overview and sees the next
// overview request ask for an hour of samples every minute, and the choice
// kept on another page.
func checkChartRange(s *session) {
	t := s.t
	t.Helper()
	s.do("overview", chromedp.Navigate(s.base+"/#/overview"))
	s.wait("overview charts", `!!document.querySelector('figure.chart') && [...document.querySelectorAll('label')].some((l) => l.textContent === 'Chart range')`)
	// The churn panel is filled from churn_rates: a rate in every cell
	// ("–" when the overview lacks them).
	s.wait("churn panel filled", `(() => {
		const t = [...document.querySelectorAll('table')].find((t) => t.caption && t.caption.textContent === 'Churn');
		const cells = t ? [...t.querySelectorAll('tbody td')] : [];
		return cells.length === 6 && cells.every((c) => c.textContent.endsWith('/s'));
	})()`)
	s.do("watch requests", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__urls = [];
		const orig = window.fetch;
		window.fetch = (...args) => { window.__urls.push(String(args[0])); return orig(...args); };
	})()`))
	s.do("pick last hour", chromedp.SetValue(chromedp.JSPath(`[...document.querySelectorAll('label')].find((l) => l.textContent === 'Chart range').control`), "3600"),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('label')].find((l) => l.textContent === 'Chart range').control.dispatchEvent(new Event('change'))`))
	s.wait("an hour asked for", `window.__urls.some((u) => u.includes('overview?') && u.includes('lengths_age=3600') && u.includes('lengths_incr=60') && u.includes('msg_rates_age=3600'))`)
	s.do("exchange page", chromedp.Navigate(s.base+"/#/exchanges/%2F/amq.direct"))
	s.wait("range kept", `[...document.querySelectorAll('label')].some((l) => l.textContent === 'Chart range' && l.control.value === '3600')`)
	if got := s.eval(`[...document.querySelectorAll('label')].find((l) => l.textContent === 'Chart range').control.selectedOptions[0].textContent`); got != "Last hour" {
		t.Errorf("range shows %q", got)
	}
}
