package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/mgmt/ui"
	"github.com/warrenmq/warren/server"
)

// chromiumPath is Debian's chromium, which CI installs.
const chromiumPath = "/usr/bin/chromium"

// shotsEnv names an optional directory that also receives the screenshots,
// for a person to look at; the test always writes them under t.TempDir().
const shotsEnv = "WARREN_UI_SCREENSHOTS"

// session is one browser logged in to the UI of a real broker.
type session struct {
	t        *testing.T
	ctx      context.Context
	base     string // http://127.0.0.1:port of the management listener
	amqpURL  string
	problems func() []string
	// refusals are API paths a test makes fail on purpose; the browser's
	// log line for their error status is not a problem.
	refusals []string
}

// expectRefusal excuses the browser's network error for one API path the
// test makes the server refuse.
func (s *session) expectRefusal(apiPath string) {
	s.refusals = append(s.refusals, "/api"+apiPath+")")
}

// newSession starts a broker, the management API with the UI, and headless
// chromium, then logs in with the keyboard. It opens startHash first, so the
// login page must send the user back there.
func newSession(t *testing.T, startHash string) *session {
	t.Helper()
	return newSessionWith(t, startHash, nil)
}

// newSessionWith is newSession with wire, when not nil, adding to the
// management API's configuration (the plugin runners) before it starts.
func newSessionWith(t *testing.T, startHash string, wire func(*mgmt.Config, *server.Server)) *session {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("browser test needs %s (apt-get install chromium): %v", chromiumPath, err)
	}
	srv, amqpURL := startBroker(t)
	return openSession(t, srv, amqpURL, startHash, wire)
}

// openSession is newSessionWith on a broker the test started.
func openSession(t *testing.T, srv *server.Server, amqpURL, startHash string, wire func(*mgmt.Config, *server.Server)) *session {
	t.Helper()
	s := &session{t: t, base: startMgmt(t, srv, wire), amqpURL: amqpURL}
	s.ctx, s.problems = browser(t)
	t.Cleanup(func() {
		for _, p := range s.problems() {
			if !slices.ContainsFunc(s.refusals, func(r string) bool {
				return strings.HasPrefix(p, "network error: ") && strings.HasSuffix(p, r)
			}) {
				t.Errorf("browser: %s", p)
			}
		}
	})
	// A short poll interval lets the tests watch refreshes without waiting
	// 5 s each time; it is read when the page loads, hence the reload.
	s.do("open UI",
		chromedp.Navigate(s.base+"/"),
		chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('warren.poll-ms', '300'); location.hash = '`+startHash+`'`),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`input[name=username]`)))
	if hash := s.eval(`location.hash`); hash != "#/login" {
		t.Errorf("before login the UI shows %q, want #/login", hash)
	}
	// Enter in the password field submits the form: no mouse needed.
	s.do("log in",
		chromedp.SendKeys(chromedp.CSS(`input[name=username]`), "guest"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "guest\r"))
	s.wait("back where the user started", `location.hash === '`+startHash+`' && !document.getElementById('topbar').hidden && !!document.querySelector('main h1')`)
	if auth := s.eval(`sessionStorage.getItem('warren.auth') || ''`); !strings.HasPrefix(auth, "Basic ") {
		t.Errorf("credentials in sessionStorage = %q, want a Basic header", auth)
	}
	return s
}

// startBroker runs a real broker on 127.0.0.1:0 and returns it with its AMQP URL.
func startBroker(t *testing.T) (*server.Server, string) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.MemoryHighWatermark = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("server.Close: %v", err)
		}
	})
	return srv, "amqp://guest:guest@" + srv.Addr().String() + "/"
}

// startMgmt serves the management API, with the UI at "/", on 127.0.0.1:0
// and returns its base URL. A short sampler interval makes rates and the
// charts' samples appear within the test.
func startMgmt(t *testing.T, srv *server.Server, wire func(*mgmt.Config, *server.Server)) string {
	t.Helper()
	cfg := mgmt.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Server = srv
	cfg.UI = ui.Handler()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.StatsInterval = 100 * time.Millisecond
	if wire != nil {
		wire(&cfg, srv)
	}
	api, err := mgmt.New(cfg)
	if err != nil {
		t.Fatalf("mgmt.New: %v", err)
	}
	if err := api.Start(); err != nil {
		t.Fatalf("mgmt Start: %v", err)
	}
	t.Cleanup(func() {
		if err := api.Close(); err != nil {
			t.Errorf("mgmt Close: %v", err)
		}
	})
	return "http://" + api.Addr().String()
}

// browser starts headless chromium with a fresh profile. The function it
// returns reports the page's uncaught exceptions, console errors and browser
// log errors so far.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 900), // a common laptop screen
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	var mu sync.Mutex
	var problems []string
	err := chromedp.Listen(ctx, func(ev any) {
		// Runs on chromedp's reader goroutine: record and return at once.
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *cdplog.EventEntryAdded:
			// The browser's own errors: a module that failed to load, a CSP
			// violation, a failed request.
			if e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, fmt.Sprintf("%s error: %s (%s)", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				problems = append(problems, "console."+string(e.Type)+": "+strings.Join(parts, " "))
			}
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

func (s *session) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	s.t.Helper()
	if err := chromedp.Do(s.ctx, actions...); err != nil {
		s.t.Fatalf("%s: %v", step, err)
	}
}

// click clicks the element sel finds. The UI re-renders its lists on every
// poll, so an element found an instant ago may have been replaced when the
// click lands (CDP: "Could not find node with given id"); the click is then
// retried on the new element, a few times, as a user would click again.
func (s *session) click(step, sel string) {
	s.t.Helper()
	var err error
	for range 5 {
		if err = chromedp.Do(s.ctx, chromedp.Click(chromedp.CSS(sel))); err == nil || !strings.Contains(err.Error(), "Could not find node") {
			break
		}
	}
	if err != nil {
		s.t.Fatalf("%s: %v", step, err)
	}
}

// wait polls a JavaScript predicate until it is truthy.
func (s *session) wait(step, expr string) {
	s.t.Helper()
	if _, err := chromedp.Run(s.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		s.t.Fatalf("%s: waiting for %s: %v", step, expr, err)
	}
}

// waitText polls a JavaScript expression until it gives a non-empty string.
func (s *session) waitText(step, expr string) string {
	s.t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Poll[string](`(`+expr+`) || ''`, chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		s.t.Fatalf("%s: waiting for %s: %v", step, expr, err)
	}
	return v
}

// eval evaluates a JavaScript expression whose value is a string.
func (s *session) eval(expr string) string {
	s.t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		s.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (s *session) evalBool(expr string) bool {
	s.t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		s.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// field finds a form control the way a user does: by the form's accessible
// name and the text of the control's <label>. A control without a working
// label is not found, so this also checks the labels.
func field(form, label string) chromedp.JSPath {
	return chromedp.JSPath(fmt.Sprintf(`(() => {
		const f = document.querySelector('form[aria-label=%q]');
		const l = f && [...f.querySelectorAll('label')].find((x) => x.textContent === %q);
		return l ? document.getElementById(l.htmlFor) : null;
	})()`, form, label))
}

func submit(form string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`form[aria-label=%q] button[type=submit]`, form))
}

// confirm clicks the confirming button of the modal dialog.
func (s *session) confirm(step string) {
	s.t.Helper()
	s.click(step, `dialog.confirm[open] button[value=ok]`)
}

// formResult waits for the form's result line or its error and returns it.
func (s *session) formResult(step, form string) string {
	s.t.Helper()
	return s.waitText(step, fmt.Sprintf(`(() => {
		const f = document.querySelector('form[aria-label=%q]');
		const err = f && f.querySelector('.error:not([hidden])');
		if (err) return 'error: ' + err.textContent;
		const res = f && f.querySelector('.result');
		return res ? res.textContent : '';
	})()`, form))
}

// formOK waits for a toast or result after submitting form, and fails on
// the form's inline error.
func (s *session) formOK(step, form, toast string) {
	s.t.Helper()
	got := s.waitText(step, fmt.Sprintf(`(() => {
		const f = document.querySelector('form[aria-label=%q]');
		const err = f && f.querySelector('.error:not([hidden])');
		if (err) return 'error: ' + err.textContent;
		return [...document.querySelectorAll('#toasts .toast')].map((t) => t.textContent).find((t) => t.includes(%q)) || '';
	})()`, form, toast))
	if strings.HasPrefix(got, "error: ") {
		s.t.Fatalf("%s: %s", step, got)
	}
}

func (s *session) screenshot(name string) {
	s.t.Helper()
	buf, err := chromedp.Run(s.ctx, chromedp.FullScreenshot(100)) // 100 means PNG
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(s.t.TempDir(), name)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		s.t.Fatalf("write screenshot: %v", err)
	}
	if dir := os.Getenv(shotsEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
			s.t.Errorf("copy screenshot to %s: %v", dir, err)
		}
	}
	s.t.Logf("screenshot %s (%d bytes)", p, len(buf))
}

// apiGet reads the management API directly, as an independent check of
// what the UI did.
func (s *session) apiGet(path string, out any) int {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+"/api"+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	if out != nil && res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			s.t.Fatalf("GET %s: decode: %v", path, err)
		}
	}
	return res.StatusCode
}

// TestUIBrowserQueueRoundTrip drives the UI in headless chromium against a
// real broker and management API: log in with the keyboard, declare a queue,
// publish a message, get it back and see it on the page; then open every page
// and check that it renders and refreshes without a script error, and that
// polling stops while the tab is hidden.
func TestUIBrowserQueueRoundTrip(t *testing.T) {
	s := newSession(t, "#/queues")

	const queue = "ui-test-q"
	s.do("declare queue",
		chromedp.SendKeys(field("Add a queue", "Name"), queue),
		chromedp.Click(submit("Add a queue")))
	const queueHash = "#/queues/%2F/" + queue
	link := `a[href="` + queueHash + `"]`
	s.wait("queue listed", `!!document.querySelector('`+link+`')`)
	checkQueueOverAMQP(t, s.amqpURL, queue, 0)

	// Publish on the queue's page; the payload carries markup that must show
	// as text.
	const payload = `hello from chromium <b id="injected">not bold</b> & ünïcode`
	s.click("open queue page", link)
	s.wait("queue page", `document.querySelector('h1').textContent === 'Queue `+queue+`'`)
	s.do("publish",
		chromedp.SendKeys(field("Publish message", "Payload"), payload),
		chromedp.Click(submit("Publish message")))
	if got := s.formResult("publish", "Publish message"); got != "Message published." {
		t.Fatalf("publish result %q, want %q", got, "Message published.")
	}
	checkQueueOverAMQP(t, s.amqpURL, queue, 1)

	// Get it back (requeued, the default ack mode) and read it off the page.
	s.do("get", chromedp.Click(submit("Get messages")))
	if got := s.waitText("fetched message", `(document.querySelector('.messages pre.payload') || {}).textContent`); got != payload {
		t.Errorf("page shows payload %q, want %q", got, payload)
	}
	if s.evalBool(`!!document.getElementById('injected')`) {
		t.Errorf("the payload's markup became an element: broker data must be inserted as text")
	}
	msgText := s.eval(`document.querySelector('.messages').textContent`)
	for _, want := range []string{"Routing key", queue, "Redelivered"} {
		if !strings.Contains(msgText, want) {
			t.Errorf("message view lacks %q: %q", want, msgText)
		}
	}
	// The queue's counts refresh by polling: one ready message.
	s.wait("queue counts", `[...document.querySelectorAll('table.counts tbody tr')]
		.some((r) => r.querySelector('th').textContent === 'Ready' && r.querySelector('td').textContent === '1')`)
	s.screenshot("queue.png")
	checkQueueOverAMQP(t, s.amqpURL, queue, 1)

	checkEveryPage(s)
	s.do("back to the queue", chromedp.Navigate(s.base+"/"+queueHash))
	checkPollingPausesWhenHidden(s)
}

// checkQueueOverAMQP confirms, independently of the UI, that the queue exists
// with the given number of ready messages.
func checkQueueOverAMQP(t *testing.T, url, queue string, ready int) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("amqp dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("amqp channel: %v", err)
	}
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("queue %q not on the broker: %v", queue, err)
	}
	if q.Messages != ready {
		t.Errorf("queue %q has %d ready messages, want %d", queue, q.Messages, ready)
	}
}

// checkEveryPage opens each page from the navigation and waits until its
// first refresh succeeded ("Updated hh:mm:ss") with no error shown.
func checkEveryPage(s *session) {
	s.t.Helper()
	pages := map[string]string{
		"overview": "Overview", "connections": "Connections", "channels": "Channels", "exchanges": "Exchanges",
		"queues": "Queues", "users": "Users", "vhosts": "Virtual hosts", "permissions": "Permissions",
		"policies": "Policies", "definitions": "Definitions", "limits": "Limits", "feature-flags": "Feature flags",
		"parameters": "Parameters", "shovels": "Shovels", "federation": "Federation",
	}
	var navLinks []string
	if err := json.Unmarshal([]byte(s.eval(`JSON.stringify([...document.querySelectorAll('#nav-list a')].map((a) => a.getAttribute('href')))`)), &navLinks); err != nil {
		s.t.Fatal(err)
	}
	if len(navLinks) != len(pages) {
		s.t.Errorf("navigation has %d links %v, want %d", len(navLinks), navLinks, len(pages))
	}
	for _, href := range navLinks {
		key := strings.TrimPrefix(href, "#/")
		title, ok := pages[key]
		if !ok {
			s.t.Errorf("unexpected navigation link %q", href)
			continue
		}
		s.do("open "+href, chromedp.Navigate(s.base+"/"+href))
		s.wait(href, `document.querySelector('h1') && document.querySelector('h1').textContent === '`+title+`'`)
		if s.eval(`document.querySelector('#nav-list a[aria-current=page]').getAttribute('href')`) != href {
			s.t.Errorf("page %s: navigation does not mark it current", href)
		}
		if key == "definitions" {
			continue // nothing to poll
		}
		state := s.waitText(href+" refresh", `(() => {
			const err = document.querySelector('.page-error:not([hidden])');
			if (err) return 'error: ' + err.textContent;
			return document.getElementById('updated').textContent.startsWith('Updated') ? 'ok' : '';
		})()`)
		if state != "ok" {
			s.t.Errorf("page %s: %s", href, state)
		}
		// Errors inside a page's sections (a list that failed to load).
		if msg := s.eval(`[...document.querySelectorAll('main .error:not([hidden])')].map((e) => e.textContent).join('; ')`); msg != "" {
			s.t.Errorf("page %s shows errors: %s", href, msg)
		}
		if key == "overview" {
			s.wait("overview charts", `document.querySelectorAll('figure.chart svg polyline, figure.chart svg circle').length > 0`)
			s.screenshot("overview.png")
		}
	}
}

// checkPollingPausesWhenHidden counts API requests while the document reports
// itself hidden, then visible again.
func checkPollingPausesWhenHidden(s *session) {
	s.t.Helper()
	s.do("count API calls", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__apiCalls = 0;
		const orig = window.fetch;
		window.fetch = (...args) => { if (String(args[0]).startsWith('api/')) window.__apiCalls++; return orig(...args); };
		window.__hidden = false;
		Object.defineProperty(document, 'hidden', {configurable: true, get: () => window.__hidden});
		Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => (window.__hidden ? 'hidden' : 'visible')});
	})()`))
	// With a 300 ms interval, a visible page polls several times a second.
	s.wait("polling while visible", `window.__apiCalls >= 3`)
	s.do("hide", chromedp.Evaluate[chromedp.Void](`window.__hidden = true; document.dispatchEvent(new Event('visibilitychange'))`))
	s.wait("paused indicator", `document.getElementById('updated').textContent === 'Paused while the tab is hidden'`)
	// Proving that nothing happens takes waiting: a request already in flight
	// may still land, then several poll intervals must pass without one.
	time.Sleep(400 * time.Millisecond)
	before := s.eval(`String(window.__apiCalls)`)
	time.Sleep(1500 * time.Millisecond)
	if after := s.eval(`String(window.__apiCalls)`); after != before {
		s.t.Errorf("API calls went from %s to %s while the tab was hidden, want none", before, after)
	}
	s.do("show", chromedp.Evaluate[chromedp.Void](`window.__hidden = false; document.dispatchEvent(new Event('visibilitychange'))`))
	s.wait("polling resumes", `window.__apiCalls > `+before)
}

// TestUIBrowserAdminFlows exercises the other forms against the real API:
// users, vhosts, permissions, policies, exchanges with bind, publish and
// unbind, list filter and sort, definitions export and import, and force
// closing a connection. Each step is checked through the API or AMQP too.
func TestUIBrowserAdminFlows(t *testing.T) {
	s := newSession(t, "#/users")
	checkAccounts(s)
	checkPoliciesAndQueueList(s)
	checkExchange(s)
	checkDefinitions(s)
	checkForceClose(s)
}

// checkAccounts adds and deletes a user, adds a vhost and grants guest
// permissions on it.
func checkAccounts(s *session) {
	t := s.t
	t.Helper()
	// Users: add with tags, then delete through the confirmation dialog.
	s.do("add user",
		chromedp.SendKeys(field("Add or update a user", "Username"), "ops"),
		chromedp.SendKeys(field("Add or update a user", "Password"), "s3cret"),
		chromedp.SendKeys(field("Add or update a user", "Password (again)"), "s3cret"),
		chromedp.SendKeys(field("Add or update a user", "Tags (comma-separated)"), "monitoring"),
		chromedp.Click(submit("Add or update a user")))
	s.formOK("add user", "Add or update a user", `User "ops" saved.`)
	s.wait("user listed", `!!document.querySelector('tr[data-key="ops"]')`)
	var user struct {
		Tags []string `json:"tags"`
	}
	if code := s.apiGet("/users/ops", &user); code != http.StatusOK || len(user.Tags) != 1 || user.Tags[0] != "monitoring" {
		t.Errorf("GET /api/users/ops: %d, tags %v; want 200, [monitoring]", code, user.Tags)
	}
	s.click("delete user", `tr[data-key="ops"] button`)
	s.confirm("confirm user deletion")
	s.wait("user gone", `!document.querySelector('tr[data-key="ops"]')`)
	if code := s.apiGet("/users/ops", nil); code != http.StatusNotFound {
		t.Errorf("GET /api/users/ops after delete: %d, want 404", code)
	}

	// Vhosts: the new one appears in the list and in the header's picker.
	s.do("vhosts page", chromedp.Navigate(s.base+"/#/vhosts"))
	s.do("add vhost",
		chromedp.SendKeys(field("Add a virtual host", "Name"), "qa"),
		chromedp.SendKeys(field("Add a virtual host", "Description"), "for the UI test"),
		chromedp.Click(submit("Add a virtual host")))
	s.formOK("add vhost", "Add a virtual host", `Virtual host "qa" added.`)
	s.wait("vhost listed and in picker", `!!document.querySelector('tr[data-key="qa"]') && !!document.querySelector('#vhost-select option[value="qa"]')`)

	// Permissions for guest on the new vhost.
	s.do("permissions page", chromedp.Navigate(s.base+"/#/permissions"))
	s.wait("pickers filled", `(() => {
		const f = document.querySelector('form[aria-label="Set permission"]');
		return f && f.querySelector('option[value="qa"]') && f.querySelector('option[value="guest"]');
	})()`)
	s.do("set permission",
		chromedp.SetValue(field("Set permission", "User"), "guest"),
		chromedp.SetValue(field("Set permission", "Virtual host"), "qa"),
		chromedp.Click(submit("Set permission")))
	s.formOK("set permission", "Set permission", `Permissions of "guest" on "qa" set.`)
	s.wait("permission listed", `!!document.querySelector('tr[data-key="guest@qa"]')`)

}

// checkPoliciesAndQueueList adds a policy, declares queues, sorts and
// filters the queue list and sees the policy on a matching queue.
func checkPoliciesAndQueueList(s *session) {
	t := s.t
	t.Helper()
	s.do("policies page", chromedp.Navigate(s.base+"/#/policies"))
	const policyForm = "User policies: add or update"
	s.do("add policy",
		chromedp.SendKeys(field(policyForm, "Name"), "ui-ttl"),
		chromedp.SetValue(field(policyForm, "Pattern (regular expression)"), "^ui-"),
		chromedp.SendKeys(field(policyForm, "Definition (JSON object)"), `{"message-ttl": 60000}`),
		chromedp.Click(submit(policyForm)))
	s.formOK("add policy", policyForm, `Policy "ui-ttl" saved.`)
	s.wait("policy listed", `!!document.querySelector('tr[data-key="//ui-ttl"]')`)
	var policy struct {
		Pattern    string         `json:"pattern"`
		ApplyTo    string         `json:"apply-to"`
		Definition map[string]any `json:"definition"`
	}
	if code := s.apiGet("/policies/%2F/ui-ttl", &policy); code != http.StatusOK || policy.Pattern != "^ui-" ||
		policy.ApplyTo != "queues" || policy.Definition["message-ttl"] != float64(60000) {
		t.Errorf("GET /api/policies/%%2F/ui-ttl: %d %+v", code, policy)
	}

	// Queues: declare two, filter and sort the list.
	s.do("queues page", chromedp.Navigate(s.base+"/#/queues"))
	for _, q := range []string{"ui-a", "ui-b", "other"} {
		s.do("declare "+q,
			chromedp.SendKeys(field("Add a queue", "Name"), q),
			chromedp.Click(submit("Add a queue")))
		s.formOK("declare "+q, "Add a queue", `Queue "`+q+`" declared.`)
	}
	rows := `[...document.querySelectorAll('table.list tbody tr[data-key] a')].map((a) => a.textContent).join(',')`
	s.wait("three queues in the default order", rows+` === 'other,ui-a,ui-b'`)
	s.click("sort by name", `th button[data-focus-key="sort:name"]`)
	s.wait("sorted ascending", `!!document.querySelector('th[aria-sort="ascending"]') && `+rows+` === 'other,ui-a,ui-b'`)
	s.click("sort by name again", `th button[data-focus-key="sort:name"]`)
	s.wait("sorted descending", `!!document.querySelector('th[aria-sort="descending"]') && `+rows+` === 'ui-b,ui-a,other'`)
	s.do("filter", chromedp.SendKeys(field("Queues filter", "Filter by name"), "ui-"))
	s.wait("filtered", rows+` === 'ui-b,ui-a'`)
	s.click("open ui-a", `a[href="#/queues/%2F/ui-a"]`)
	s.wait("policy shown on queue", `document.querySelector('main dl.details') && document.querySelector('main dl.details').textContent.includes('ui-ttl')`)

}

// checkExchange declares an exchange, binds it to ui-a, publishes (routed),
// unbinds and publishes again (not routed).
func checkExchange(s *session) {
	t := s.t
	t.Helper()
	s.do("exchanges page", chromedp.Navigate(s.base+"/#/exchanges"))
	s.wait("exchange types", `!!document.querySelector('form[aria-label="Add an exchange"] option[value="topic"]')`)
	s.do("declare exchange",
		chromedp.SendKeys(field("Add an exchange", "Name"), "ui-x"),
		chromedp.SetValue(field("Add an exchange", "Type"), "topic"),
		chromedp.Click(submit("Add an exchange")))
	s.formOK("declare exchange", "Add an exchange", `Exchange "ui-x" declared.`)
	s.click("open exchange", `a[href="#/exchanges/%2F/ui-x"]`)
	s.wait("exchange page", `document.querySelector('h1').textContent === 'Exchange ui-x'`)
	s.do("bind",
		chromedp.SendKeys(field("Add binding", "Destination name"), "ui-a"),
		chromedp.SendKeys(field("Add binding", "Routing key"), "a.#"),
		chromedp.Click(submit("Add binding")))
	s.formOK("bind", "Add binding", "Binding added.")
	s.wait("binding listed", `[...document.querySelectorAll('main table.list tbody tr')].some((r) => r.textContent.includes('ui-a') && r.textContent.includes('a.#'))`)
	s.do("publish to exchange",
		chromedp.SendKeys(field("Publish message", "Routing key"), "a.b"),
		chromedp.SendKeys(field("Publish message", "Payload"), "via exchange"),
		chromedp.Click(submit("Publish message")))
	if got := s.formResult("publish to exchange", "Publish message"); got != "Message published." {
		t.Errorf("publish through bound exchange: %q", got)
	}
	checkQueueOverAMQP(t, s.amqpURL, "ui-a", 1)
	s.click("unbind", `main button[data-focus-key^="unbind:ui-x>queue:ui-a"]`)
	s.confirm("confirm unbind")
	s.wait("binding gone", `![...document.querySelectorAll('main table.list tbody tr')].some((r) => r.textContent.includes('a.#'))`)
	s.do("publish again", chromedp.Evaluate[chromedp.Void](`document.querySelector('form[aria-label="Publish message"] .result').textContent = ''`),
		chromedp.Click(submit("Publish message")))
	if got := s.formResult("publish unrouted", "Publish message"); got != "Message published, but not routed to any queue." {
		t.Errorf("publish after unbind: %q", got)
	}
}

// checkDefinitions downloads the definitions (capturing the file the page
// hands to the browser) and uploads a file that declares a new queue.
func checkDefinitions(s *session) {
	s.t.Helper()
	s.do("definitions page", chromedp.Navigate(s.base+"/#/definitions"),
		chromedp.Evaluate[chromedp.Void](`(() => {
			const orig = URL.createObjectURL;
			URL.createObjectURL = (blob) => { window.__exported = blob; return orig(blob); };
		})()`))
	s.do("export", chromedp.Click(submit("Export definitions")))
	if got := s.formResult("export", "Export definitions"); !strings.HasPrefix(got, "Saved warren_") {
		s.t.Fatalf("export result %q", got)
	}
	text, err := chromedp.Run(s.ctx, chromedp.Evaluate[string](`window.__exported.text()`, chromedp.EvalAwaitPromise))
	if err != nil {
		s.t.Fatalf("read exported file: %v", err)
	}
	var defs struct {
		Queues   []struct{ Name string } `json:"queues"`
		Policies []struct{ Name string } `json:"policies"`
		Vhosts   []struct{ Name string } `json:"vhosts"`
	}
	if err := json.Unmarshal([]byte(text), &defs); err != nil {
		s.t.Fatalf("exported file is not JSON: %v\n%s", err, text)
	}
	names := func(list []struct{ Name string }) string {
		var out []string
		for _, x := range list {
			out = append(out, x.Name)
		}
		return strings.Join(out, ",")
	}
	for _, check := range []struct{ what, got, want string }{
		{"queues", names(defs.Queues), "ui-a"}, {"policies", names(defs.Policies), "ui-ttl"}, {"vhosts", names(defs.Vhosts), "qa"},
	} {
		if !strings.Contains(","+check.got+",", ","+check.want+",") {
			s.t.Errorf("exported %s %q lack %q", check.what, check.got, check.want)
		}
	}

	file := filepath.Join(s.t.TempDir(), "defs.json")
	const upload = `{"queues": [{"name": "imported-q", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {}}]}`
	if err := os.WriteFile(file, []byte(upload), 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.do("import",
		chromedp.SetUploadFiles(field("Import definitions", "Definitions file"), []string{file}),
		chromedp.Click(submit("Import definitions")))
	if got := s.formResult("import", "Import definitions"); got != "Imported defs.json." {
		s.t.Fatalf("import result %q", got)
	}
	checkQueueOverAMQP(s.t, s.amqpURL, "imported-q", 0)
}

// checkForceClose closes a client's connection from its page and checks
// the client got CONNECTION_FORCED with the reason typed in.
func checkForceClose(s *session) {
	s.t.Helper()
	conn, err := amqp.DialConfig(s.amqpURL, amqp.Config{Properties: amqp.Table{"connection_name": "ui-victim"}})
	if err != nil {
		s.t.Fatalf("amqp dial: %v", err)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	s.do("connections page", chromedp.Navigate(s.base+"/#/connections"))
	link := s.waitText("connection listed", `(() => {
		const a = document.querySelector('main table.list tbody a');
		return a ? a.getAttribute('href') : '';
	})()`)
	s.do("open connection", chromedp.Navigate(s.base+"/"+link))
	s.wait("client properties", `document.querySelector('main').textContent.includes('ui-victim')`)
	s.do("force close",
		chromedp.SetValue(field("Close connection", "Reason"), "bye from the UI test"),
		chromedp.Click(submit("Close connection")))
	s.confirm("confirm close")
	s.wait("back on connections", `location.hash === '#/connections'`)
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced || !strings.Contains(e.Reason, "bye from the UI test") {
			s.t.Errorf("client saw close %+v, want 320 with the reason", e)
		}
	case <-time.After(10 * time.Second):
		s.t.Errorf("connection not closed 10 s after Force close")
	}
	s.wait("list empty", `document.querySelector('main table.list tbody').textContent.includes('No connections.')`)
}
