package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// FuzzWriteTable feeds arbitrary API answers to the table renderer: whatever
// the values hold, each object is exactly one line.
func FuzzWriteTable(f *testing.F) {
	f.Add([]byte(`[{"name":"a","n":1,"tags":["x","y"],"nested":{"k":"v"}}]`))
	f.Add([]byte(`[{"name":"tab\there\nnewline","n":1e400}]`))
	f.Add([]byte(`[{"name":"\u0000\u001f\u007f\u0085\u2028"},{},{"name":null}]`))
	f.Add([]byte(`[{"a":{"b":{"c":[1,[2,{"d":"e\nf"}]]}}}]`))
	f.Add([]byte(`[{"key\nwith\tbreaks":1}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []map[string]any
		if decodeJSON(data, &rows, "fuzz") != nil {
			return
		}
		cols := []string{"name", "a.b.c", "n"}
		if len(rows) > 0 {
			for k := range rows[0] {
				cols = append(cols, k)
			}
		}
		var out bytes.Buffer
		if err := writeTable(&out, rows, cols); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(out.String(), "\n"); got != len(rows)+1 {
			t.Fatalf("%d lines for %d rows:\n%s", got, len(rows), out.String())
		}
	})
}

// FuzzAPIError decodes arbitrary error bodies: the message is one line and
// never empty.
func FuzzAPIError(f *testing.F) {
	f.Add(500, []byte(`{"error":"Object Not Found","reason":"Not Found"}`))
	f.Add(400, []byte(`{"error":"bad_request","reason":{"nested":["term"]}}`))
	f.Add(502, []byte("<html>\nbad gateway\n</html>"))
	f.Add(401, []byte("\xff\xfe not utf-8 \r\n"))
	f.Add(404, []byte(`{"reason":"line\nbreak"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		msg := newAPIError(http.MethodGet, "/api/x", &response{status: status, body: body}).Error()
		if msg == "" || strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("message %q", msg)
		}
		if !json.Valid(body) && len(strings.Fields(string(body))) > 0 && !strings.Contains(msg, ": ") {
			t.Fatalf("body lost: %q", msg)
		}
	})
}
