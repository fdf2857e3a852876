package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAPIErrorsShowErrorAndReason(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/queues/%2F/warrenctl-no-such-queue", reply{status: http.StatusNotFound, file: "queue-missing"})
	f.on("PUT", "/api/queues/%2F/bad", reply{status: http.StatusBadRequest, file: "queue-put-badjson"})
	f.on("GET", "/api/queues", reply{status: http.StatusUnauthorized, file: "login-failed"})
	f.on("GET", "/api/exchanges", reply{status: http.StatusBadGateway, body: "<html>upstream\ndown</html>"})
	f.on("GET", "/api/users", reply{status: http.StatusInternalServerError, body: `{"error":"internal","reason":{"term":["a",1]}}`})

	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "warrenctl-no-such-queue"}, "POST /api/queues/%2F/warrenctl-no-such-queue/get: 404 Not Found: Object Not Found: Not Found"},
		{[]string{"declare", "queue", "bad"}, "PUT /api/queues/%2F/bad: 400 Bad Request: bad_request: not_json"},
		{[]string{"list", "queues"}, "GET /api/queues: 401 Unauthorized: not_authorized: Login failed (check --user and --password"},
		{[]string{"list", "exchanges"}, `GET /api/exchanges: 502 Bad Gateway: <html>upstream down</html>`},
		{[]string{"list", "users"}, `GET /api/users: 500 Internal Server Error: internal: {"term":["a",1]}`},
	}
	for _, tt := range tests {
		r := f.ctl(tt.args...)
		if r.code != exitFailed {
			t.Errorf("%v: exit %d", tt.args, r.code)
		}
		if !strings.HasPrefix(r.stderr, "warrenctl: "+tt.want) {
			t.Errorf("%v: stderr\n%q\nwant prefix\n%q", tt.args, r.stderr, "warrenctl: "+tt.want)
		}
	}
}

func TestUnreachableAPI(t *testing.T) {
	// A port nothing listens on: bind one, note it, close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := cli(t, "", "--url", "http://"+addr, "list", "queues")
	if r.code != exitUnavailable {
		t.Errorf("exit %d, want %d", r.code, exitUnavailable)
	}
	for _, want := range []string{"cannot connect to the management API at http://" + addr, "connection refused", "--mgmt-listen", "--url"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}

	r = cli(t, "", "--url", "http://no-such-host.invalid:15672", "status")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "cannot resolve the host") {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}

	// An API that accepts but never answers.
	slow := newFakeAPI(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow.handler = func(w http.ResponseWriter, r *http.Request) { <-release }
	r = slow.ctl("--timeout", "50ms", "list", "queues")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "did not answer within 50ms") {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	f := newFakeAPI(t)
	tests := []struct {
		args []string
		want string
	}{
		{nil, "usage: warrenctl"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"list", "widgets"}, `unknown command "list widgets"`},
		{[]string{"--nope", "list", "queues"}, "flag provided but not defined: -nope"},
		{[]string{"list", "queues", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"--format", "yaml", "list", "queues"}, `must be table or json, not "yaml"`},
		{[]string{"declare", "queue"}, "declare queue: wrong number of arguments (0)"},
		{[]string{"declare", "queue", "a", "b"}, "wrong number of arguments (2)"},
		{[]string{"--url", "ftp://x", "list", "queues"}, "the scheme must be http or https"},
		{[]string{"--url", "http://", "list", "queues"}, "has no host"},
	}
	for _, tt := range tests {
		r := cli(t, "", append([]string{"--url", f.srv.URL}, tt.args...)...)
		if tt.args != nil && tt.args[0] == "--url" {
			r = cli(t, "", tt.args...)
		}
		if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent for bad command lines", n)
	}
}

func TestHelpAndVersion(t *testing.T) {
	r := cli(t, "", "help").mustOK(t)
	for _, c := range commands() {
		if !strings.Contains(r.stdout, c.name) {
			t.Errorf("help lacks %q", c.name)
		}
	}
	r = cli(t, "", "help", "declare", "queue").mustOK(t)
	for _, want := range []string{"usage: warrenctl declare queue [flags] NAME", "-durable", "-arg", "-url"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help declare queue lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := cli(t, "", "help", "nope"); r.code != exitUsage {
		t.Errorf("help nope: exit %d", r.code)
	}
	if r := cli(t, "", "declare", "queue", "-h"); r.code != exitOK || !strings.Contains(r.stderr, "-auto-delete") {
		t.Errorf("-h: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, "", "-h"); r.code != exitOK || !strings.Contains(r.stdout, "commands:") {
		t.Errorf("-h: exit %d", r.code)
	}
	if r := cli(t, "", "version").mustOK(t); r.stdout != "warrenctl dev\n" {
		t.Errorf("version %q", r.stdout)
	}
}

func TestURLAndFlagHandling(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/prefix/api/queues", reply{body: "[]"})
	f.on("GET", "/api/queues/%2F", reply{body: "[]"})
	f.on("PUT", "/api/queues/%2F/-dash", reply{status: http.StatusCreated})

	// A path prefix (a reverse proxy) and credentials in the URL.
	host := strings.TrimPrefix(f.srv.URL, "http://")
	cli(t, "", "--url", "http://admin:pw@"+host+"/prefix/", "list", "queues").mustOK(t)
	if r := f.last(); r.path != "/prefix/api/queues" || r.user != "admin" || r.password != "pw" {
		t.Errorf("request %s as %s:%s", r.path, r.user, r.password)
	}
	// --user wins over the URL's credentials.
	cli(t, "", "--url", "http://admin:pw@"+host+"/prefix", "--user", "bob", "--password", "b", "list", "queues").mustOK(t)
	if r := f.last(); r.user != "bob" || r.password != "b" {
		t.Errorf("credentials %s:%s", r.user, r.password)
	}
	// Global flags after the command, mixed with its own.
	f.ctl("list", "queues", "--format", "json", "--vhost", "/", "--timeout", "5s").mustOK(t)
	if r := f.last(); r.path != "/api/queues/%2F" {
		t.Errorf("path %s", r.path)
	}
	// After "--" a name may start with a dash.
	f.ctl("declare", "queue", "--durable=false", "--", "-dash").mustOK(t)
	if r := f.last(); r.path != "/api/queues/%2F/-dash" {
		t.Errorf("path %s", r.path)
	}
}

func TestGlobalDefaults(t *testing.T) {
	e := newEnv(nil, nil, nil)
	if e.g.timeout != 60*time.Second || e.g.url != "http://localhost:15672" || e.g.user != "guest" || e.g.vhost != "/" || e.g.format != "table" {
		t.Errorf("defaults: %+v", e.g)
	}
}
