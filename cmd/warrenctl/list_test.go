package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestListEveryKindRendersRecordedAnswers(t *testing.T) {
	f := newFakeAPI(t)
	for _, l := range listings {
		f.on("GET", "/api/"+l.path, reply{file: l.kind})
	}
	for _, l := range listings {
		t.Run(l.kind, func(t *testing.T) {
			r := f.ctl("list", l.kind).mustOK(t)
			var recorded []map[string]any
			if err := json.Unmarshal(fixture(t, l.kind), &recorded); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
			if len(lines) != len(recorded)+1 {
				t.Fatalf("%d lines for %d objects:\n%s", len(lines), len(recorded), r.stdout)
			}
			if got := strings.Fields(lines[0]); !slices.Equal(got, l.columns) {
				t.Errorf("header %v, want %v", got, l.columns)
			}
			req := f.last()
			if req.path != "/api/"+l.path || req.user != "guest" || req.password != "guest" {
				t.Errorf("request %s as %s:%s", req.path, req.user, req.password)
			}
		})
	}
}

func TestListQueuesValues(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/queues", reply{file: "queues"})
	rows := table(f.ctl("list", "queues").mustOK(t).stdout)
	var found bool
	for _, row := range rows[1:] {
		if row[1] == "aliveness-test" {
			found = true
			if want := []string{"/", "aliveness-test", "classic", "false", "false", "0", "0", "0"}; !slices.Equal(row, want) {
				t.Errorf("row %v, want %v", row, want)
			}
		}
	}
	if !found {
		t.Errorf("aliveness-test not listed:\n%v", rows)
	}
}

func TestListNestedColumnsAndLists(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/consumers", reply{file: "consumers"})
	f.on("GET", "/api/users", reply{file: "users"})
	f.on("GET", "/api/exchanges", reply{file: "exchanges"})

	rows := table(f.ctl("list", "consumers").mustOK(t).stdout)
	// queue.vhost queue.name consumer_tag channel_details.name (4 words) ...
	if got := rows[1]; got[0] != "/" || !strings.HasPrefix(got[1], "amq.gen-") || got[2] != "warrenctl-recorder-consumer" {
		t.Errorf("consumer row %v", got)
	}
	// Tags arrive as a JSON array and print comma-separated.
	if out := f.ctl("list", "users").mustOK(t).stdout; !strings.Contains(out, "guest  administrator") {
		t.Errorf("users:\n%s", out)
	}
	out := f.ctl("list", "exchanges", "--columns", "name,message_stats.publish_in,arguments").mustOK(t).stdout
	rows = table(out)
	if !slices.Equal(rows[0], []string{"name", "message_stats.publish_in", "arguments"}) {
		t.Errorf("header %v", rows[0])
	}
	var direct []string
	for _, r := range rows {
		if len(r) > 0 && r[0] == "amq.direct" {
			direct = r
		}
	}
	if !slices.Equal(direct, []string{"amq.direct", "{}"}) {
		t.Errorf("amq.direct row %v (no message_stats, empty arguments)", direct)
	}
}

func TestListJSONKeepsTheAnswer(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/connections", reply{file: "connections"})
	r := f.ctl("--format", "json", "list", "connections").mustOK(t)
	if !jsonEqual(t, []byte(r.stdout), fixture(t, "connections")) {
		t.Errorf("JSON output differs from the API's answer:\n%s", r.stdout)
	}
	// Big integers stay exact (connected_at is milliseconds since 1970).
	if !strings.Contains(r.stdout, `"connected_at": 1796033`) {
		t.Errorf("connected_at not kept as an integer:\n%s", r.stdout)
	}
}

func TestListVhostScopedPaths(t *testing.T) {
	f := newFakeAPI(t)
	tests := []struct {
		args []string
		path string
	}{
		{[]string{"list", "queues", "--vhost", "/"}, "/api/queues/%2F"},
		{[]string{"--vhost", "rabbit/hole", "list", "exchanges"}, "/api/exchanges/rabbit%2Fhole"},
		{[]string{"list", "bindings", "--vhost=a b"}, "/api/bindings/a%20b"},
		{[]string{"list", "connections", "--vhost", "/"}, "/api/vhosts/%2F/connections"},
		{[]string{"list", "channels", "--vhost", "v%1"}, "/api/vhosts/v%251/channels"},
		{[]string{"list", "consumers", "--vhost", "/"}, "/api/consumers/%2F"},
		{[]string{"list", "policies", "--vhost", "/"}, "/api/policies/%2F"},
		{[]string{"list", "permissions", "--vhost", "/"}, "/api/vhosts/%2F/permissions"},
		// Not per vhost: the flag does not narrow them.
		{[]string{"list", "users", "--vhost", "/"}, "/api/users"},
		{[]string{"list", "vhosts", "--vhost", "/"}, "/api/vhosts"},
		// Without --vhost, lists cover every vhost.
		{[]string{"list", "queues"}, "/api/queues"},
	}
	for _, tt := range tests {
		f.on("GET", tt.path, reply{body: "[]"})
		f.ctl(tt.args...).mustOK(t)
		if got := f.last().path; got != tt.path {
			t.Errorf("%v requested %s, want %s", tt.args, got, tt.path)
		}
	}
}

func TestListEmpty(t *testing.T) {
	f := newFakeAPI(t)
	f.on("GET", "/api/policies", reply{body: "[]"})
	out := f.ctl("list", "policies").mustOK(t).stdout
	if rows := table(out); len(rows) != 1 || rows[0][0] != "vhost" {
		t.Errorf("empty list should print the header only:\n%s", out)
	}
	if out := f.ctl("list", "policies", "--format", "json").mustOK(t).stdout; strings.TrimSpace(out) != "[]" {
		t.Errorf("empty JSON list: %q", out)
	}
}

func TestCellEscapesControlCharacters(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"plain", "plain"},
		{"tab\there", `"tab\there"`},
		{"line\nbreak", `"line\nbreak"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{json.Number("12345678901234567890"), "12345678901234567890"},
		{true, "true"},
		{[]any{"a", "b"}, "a,b"},
		{[]any{map[string]any{"k": "v"}}, `[{"k":"v"}]`},
		{map[string]any{"b": json.Number("1"), "a": "x"}, `{"a":"x","b":1}`},
		{map[string]any{"k": "new\nline"}, `{"k":"new\nline"}`}, // JSON escapes it already
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%#v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
