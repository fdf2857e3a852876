package mgmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/warrenmq/warren/amqp"
	"github.com/warrenmq/warren/server"
)

// errorBody is RabbitMQ's error response: {"error":…,"reason":…}.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// errNotFoundBody is the body of every 404 for an unknown object; the
// strings come from Erlang's HTTP reason phrase and clients compare them.
var errNotFoundBody = errorBody{"Object Not Found", "Not Found"}

// httpError is an error with the status and body to answer it with.
type httpError struct {
	status int
	body   errorBody
}

// Error describes the response, for logs.
func (e *httpError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.body.Error, e.body.Reason)
}

var errNotFound = &httpError{http.StatusNotFound, errNotFoundBody}

// errVhostNotFound answers a declaration in a vhost that does not exist.
var errVhostNotFound = &httpError{http.StatusNotFound, errorBody{"not_found", "vhost_not_found"}}

func errBadRequest(reason string) error {
	return &httpError{http.StatusBadRequest, errorBody{"bad_request", reason}}
}

// channelError is RabbitMQ's answer to a channel exception raised by an
// API call it makes over a channel as the user: 400, the code and the text.
func channelError(e *amqp.Error) error {
	return errBadRequest(fmt.Sprintf("%d %s", e.Code, e.ReplyText()))
}

func errNotAuthorised(reason string) error {
	return &httpError{http.StatusUnauthorized, errorBody{"not_authorised", reason}}
}

// writeJSON writes v as the response with status. Every body is JSON,
// whatever the client's Accept header asks for.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		fmt.Fprintf(&buf, `{"error":"internal_server_error","reason":%q}`+"\n", err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	// A write error means the client went away; there is no one to tell.
	_, _ = w.Write(buf.Bytes())
}

// writeError turns an error from a handler or the server into RabbitMQ's
// status and body.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var ae *amqp.Error
	switch {
	case errors.As(err, &he):
		writeJSON(w, he.status, he.body)
	case server.IsClusterUnavailable(err):
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"service_unavailable", clusterUnavailableReason(err)})
	case errors.As(err, &ae):
		switch ae.Code {
		case amqp.NotFound:
			writeJSON(w, http.StatusNotFound, errorBody{"not_found", ae.Text})
		case amqp.AccessRefused, amqp.NotAllowed:
			writeJSON(w, http.StatusUnauthorized, errorBody{"not_authorised", "Access refused."})
		case amqp.InternalError:
			a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", ae.Text)
			writeJSON(w, http.StatusInternalServerError, errorBody{"internal_server_error", ae.Text})
		default:
			writeJSON(w, http.StatusBadRequest, errorBody{"bad_request", ae.Text})
		}
	case errors.Is(err, server.ErrNotFound), errors.Is(err, server.ErrNoSuchUser), errors.Is(err, server.ErrNoSuchVhost):
		writeJSON(w, http.StatusNotFound, errNotFoundBody)
	case errors.Is(err, server.ErrInvalid):
		writeJSON(w, http.StatusBadRequest, errorBody{"bad_request", invalidReason(err)})
	default:
		a.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{"internal_server_error", err.Error()})
	}
}

// invalidReason strips the sentinel's text from a server validation error,
// leaving RabbitMQ's reason.
func invalidReason(err error) string {
	msg := err.Error()
	prefix := server.ErrInvalid.Error() + ": "
	if i := strings.Index(msg, prefix); i >= 0 {
		return msg[i+len(prefix):]
	}
	return msg
}

// readBody reads a request body up to the configured limit.
func (rq *request) readBody() ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(rq.w, rq.r.Body, rq.a.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{http.StatusRequestEntityTooLarge, errorBody{"bad_request", fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}}
		}
		return nil, errBadRequest("could not read the request body: " + err.Error())
	}
	return body, nil
}

// decodeObject parses a JSON object, integers as int64 and other numbers
// as float64. An empty body is an empty object (PUT /vhosts/x allows it).
// bodyObject reads the request body as a JSON object, answering RabbitMQ's
// 400 not_json when it is not one.
func (rq *request) bodyObject() (map[string]any, error) {
	raw, err := rq.readBody()
	if err != nil {
		return nil, err
	}
	return decodeObject(raw, "not_json")
}

func decodeObject(body []byte, malformed string) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeJSON(body)
	if err != nil {
		return nil, errBadRequest(malformed)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errBadRequest(malformed)
	}
	return m, nil
}

// decodeJSON parses one JSON value with numbers preserved.
func decodeJSON(body []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return fromJSON(v), nil
}

// fromJSON converts json.Number values to int64 or float64, recursively.
func fromJSON(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, err := v.Float64()
		if err != nil {
			return v.String()
		}
		return f
	case []any:
		for i := range v {
			v[i] = fromJSON(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = fromJSON(v[k])
		}
	}
	return v
}

// body is a decoded JSON request object with typed accessors that answer
// RabbitMQ's 400s for values of the wrong type.
type body map[string]any

func (b body) has(key string) bool { _, ok := b[key]; return ok }

func (b body) str(key string) (string, error) {
	switch v := b[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	}
	return "", errBadRequest(fmt.Sprintf("%s must be a string", key))
}

// boolean accepts JSON booleans and the strings "true" and "false", which
// some clients send.
func (b body) boolean(key string, def bool) (bool, error) {
	switch v := b[key].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		switch v {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, errBadRequest(fmt.Sprintf("%s must be a boolean", key))
}

func (b body) integer(key string, def int64) (int64, error) {
	switch v := b[key].(type) {
	case nil:
		return def, nil
	case int64:
		return v, nil
	case string:
		var n int64
		if _, err := fmt.Sscan(v, &n); err == nil {
			return n, nil
		}
	}
	return 0, errBadRequest(fmt.Sprintf("%s must be an integer", key))
}

// table reads an object as an AMQP field table; absent or null is nil.
func (b body) table(key string) (amqp.Table, error) {
	switch v := b[key].(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return jsonToTable(v), nil
	}
	return nil, errBadRequest(fmt.Sprintf("%s must be an object", key))
}

// tags reads user or vhost tags given as a comma-separated string or an array.
func (b body) tags(key string) ([]string, error) {
	switch v := b[key].(type) {
	case nil:
		return []string{}, nil
	case string:
		return splitTags(v), nil
	case []any:
		out := make([]string, 0, len(v))
		for _, t := range v {
			s, ok := t.(string)
			if !ok {
				return nil, errBadRequest(key + " must be strings")
			}
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	}
	return nil, errBadRequest(key + " must be a string or an array")
}

func splitTags(s string) []string {
	out := []string{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// jsonToTable converts a decoded JSON object to an AMQP table: integers are
// 64-bit signed, other numbers doubles, null is void.
func jsonToTable(m map[string]any) amqp.Table {
	t := make(amqp.Table, len(m))
	for k, v := range m {
		t[k] = jsonToField(v)
	}
	return t
}

func jsonToField(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return jsonToTable(v)
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = jsonToField(v[i])
		}
		return out
	}
	return v
}

// tableJSON converts an AMQP table to JSON values; it is never nil, so
// empty arguments encode as {} rather than null.
func tableJSON(t amqp.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = fieldJSON(v)
	}
	return out
}

func fieldJSON(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		return tableJSON(v)
	case []any:
		out := make([]any, len(v))
		for i := range v {
			out[i] = fieldJSON(v[i])
		}
		return out
	case []byte:
		return string(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil // JSON has no NaN or infinity
		}
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil
		}
	case amqp.Decimal:
		f := float64(v.Value)
		for i := uint8(0); i < v.Scale; i++ {
			f /= 10
		}
		return f
	case interface{ Unix() int64 }:
		return v.Unix()
	}
	return v
}
