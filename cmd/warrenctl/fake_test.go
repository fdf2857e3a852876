package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a management API on 127.0.0.1 that answers with responses
// recorded from RabbitMQ 3.10 (testdata/rabbitmq, see testdata/record) and
// remembers every request, so tests check both what warrenctl sends and how
// it renders what RabbitMQ answers.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	routes  map[string]reply // "METHOD /escaped/path"
	seen    []seenRequest
	handler http.HandlerFunc // overrides routes when set
}

// reply is one canned answer.
type reply struct {
	status int
	file   string // under testdata/rabbitmq, without .json
	body   string // used when file is empty
	header map[string]string
}

// seenRequest is what the fake received.
type seenRequest struct {
	method, path, query string
	user, password      string
	header              http.Header
	body                []byte
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, routes: make(map[string]reply)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// on registers the answer to method and escaped path.
func (f *fakeAPI) on(method, path string, r reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.status == 0 {
		r.status = http.StatusOK
	}
	f.routes[method+" "+path] = r
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake API: reading body: %v", err)
	}
	user, pass, _ := r.BasicAuth()
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{
		method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
		user: user, password: pass, header: r.Header.Clone(), body: body,
	})
	rep, ok := f.routes[r.Method+" "+r.URL.EscapedPath()]
	h := f.handler
	f.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	if !ok {
		// RabbitMQ's answer for a path it does not know.
		rep = reply{status: http.StatusNotFound, file: "queue-missing"}
	}
	data := []byte(rep.body)
	if rep.file != "" {
		data = fixture(f.t, rep.file)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if len(data) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.status)
	w.Write(data)
}

// requests returns what the fake has received so far.
func (f *fakeAPI) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

// last returns the most recent request, failing the test if there is none.
func (f *fakeAPI) last() seenRequest {
	f.t.Helper()
	rs := f.requests()
	if len(rs) == 0 {
		f.t.Fatal("no request reached the API")
	}
	return rs[len(rs)-1]
}

// fixture reads testdata/rabbitmq/name.json.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rabbitmq", name+".json"))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return b
}

// result is one warrenctl run.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs warrenctl in-process with stdin and args.
func cli(t testing.TB, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// ctl runs warrenctl against the fake with no stdin.
func (f *fakeAPI) ctl(args ...string) result {
	f.t.Helper()
	return cli(f.t, "", append([]string{"--url", f.srv.URL}, args...)...)
}

// mustOK fails unless the run succeeded.
func (r result) mustOK(t testing.TB) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r
}

// table splits table output into rows of whitespace-separated cells.
func table(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}

// jsonEqual reports whether two JSON documents hold the same values.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// bodyOf decodes a request body sent as JSON.
func bodyOf(t testing.TB, r seenRequest) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v\n%s", r.method, r.path, err, r.body)
	}
	return m
}

// sortedKeys returns a map's keys in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
