package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// maxResponse bounds how much of one response warrenctl reads: a definitions
// export of a very large broker fits, a runaway stream does not.
const maxResponse = 1 << 30

// client talks to one management HTTP API with basic auth.
type client struct {
	base     string // scheme://host[:port][/prefix], no trailing slash
	user     string
	password string
	timeout  time.Duration
	http     *http.Client
}

// newClient checks rawURL and builds a client for it. Credentials in the URL
// (http://user:pass@host) are used unless explicit says user and password
// were given as flags.
func newClient(rawURL, user, password string, explicit bool, timeout time.Duration) (*client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, usagef("--url %q: %v", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, usagef("--url %q: the scheme must be http or https", rawURL)
	}
	if u.Host == "" {
		return nil, usagef("--url %q has no host", rawURL)
	}
	if u.User != nil && !explicit {
		user = u.User.Username()
		password, _ = u.User.Password()
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	return &client{
		base: strings.TrimSuffix(u.String(), "/"), user: user, password: password, timeout: timeout,
		http: &http.Client{Timeout: timeout},
	}, nil
}

// apiPath joins "/api" and path segments, percent-encoding each segment so a
// vhost "/" travels as %2F, as RabbitMQ's API expects.
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/api")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// exchangeSegment names an exchange in a path: the default exchange "" is
// spelled amq.default there.
func exchangeSegment(name string) string {
	if name == "" {
		return "amq.default"
	}
	return name
}

// response is one HTTP exchange's outcome.
type response struct {
	status int
	header http.Header
	body   []byte
}

// request is one call to the API.
type request struct {
	method string
	path   string // from apiPath, already escaped
	query  url.Values
	body   any // JSON-encoded unless it is json.RawMessage or nil
	header map[string]string
}

// send performs r and returns the response whatever its status; the error is
// for requests that got no HTTP answer at all.
func (c *client) send(r request) (*response, error) {
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case json.RawMessage:
		body = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encoding the request body: %w", err)
		}
		body = bytes.NewReader(enc)
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	req, err := http.NewRequest(r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", r.method, r.path, err)
	}
	req.SetBasicAuth(c.user, c.password)
	// JSON preferred, anything accepted: RabbitMQ's purge endpoint, for one,
	// answers 406 to a request that accepts JSON only.
	req.Header.Set("Accept", "application/json, */*;q=0.1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &unreachableError{url: c.base, timeout: c.timeout, err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, &unreachableError{url: c.base, timeout: c.timeout, err: fmt.Errorf("reading the response to %s %s: %w", r.method, r.path, err)}
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("%s %s: response larger than %d bytes", r.method, r.path, maxResponse)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// call performs r and turns any status outside 2xx into an *apiError.
func (c *client) call(r request) (*response, error) {
	resp, err := c.send(r)
	if err != nil {
		return nil, err
	}
	if resp.status < 200 || resp.status > 299 {
		return nil, newAPIError(r.method, r.path, resp)
	}
	return resp, nil
}

// get fetches path and returns the body of a 2xx answer.
func (c *client) get(path string, query url.Values) ([]byte, error) {
	resp, err := c.call(request{method: http.MethodGet, path: path, query: query})
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

// getJSON fetches path and decodes it into out, keeping numbers exact.
func (c *client) getJSON(path string, query url.Values, out any) error {
	body, err := c.get(path, query)
	if err != nil {
		return err
	}
	return decodeJSON(body, out, "GET "+path)
}

// decodeJSON decodes an API answer with json.Number for numbers.
func decodeJSON(body []byte, out any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: the answer is not the JSON expected: %w", what, err)
	}
	return nil
}

// apiError is an answer outside 2xx, with RabbitMQ's {"error","reason"} body
// when the API sent one.
type apiError struct {
	method, path string
	status       int
	errText      string // the body's "error"
	reason       string // the body's "reason"
	body         string // the body when it is not that JSON, shortened
}

func newAPIError(method, path string, resp *response) *apiError {
	e := &apiError{method: method, path: path, status: resp.status}
	var body struct {
		Error  any `json:"error"`
		Reason any `json:"reason"`
	}
	if json.Unmarshal(resp.body, &body) == nil && (body.Error != nil || body.Reason != nil) {
		e.errText, e.reason = jsonText(body.Error), jsonText(body.Reason)
		return e
	}
	// One line, so the message stays readable and greppable.
	text := strings.Join(strings.Fields(strings.ToValidUTF8(string(resp.body), "\uFFFD")), " ")
	if len(text) > 300 {
		text = strings.ToValidUTF8(text[:300], "") + "…"
	}
	e.body = text
	return e
}

// jsonText renders a decoded JSON value of an error body as text: RabbitMQ
// sends strings, but a reason may be any term.
func jsonText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return strings.Join(strings.Fields(v), " ")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Error renders the failure with the API's own words, plus a hint for the
// statuses users most often meet.
func (e *apiError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.method, e.path, e.status, http.StatusText(e.status))
	switch {
	case e.errText != "" && e.reason != "" && e.reason != e.errText:
		fmt.Fprintf(&b, ": %s: %s", e.errText, e.reason)
	case e.errText != "":
		fmt.Fprintf(&b, ": %s", e.errText)
	case e.reason != "":
		fmt.Fprintf(&b, ": %s", e.reason)
	case e.body != "":
		fmt.Fprintf(&b, ": %s", e.body)
	}
	switch e.status {
	case http.StatusUnauthorized:
		b.WriteString(" (check --user and --password; the user needs the management, policymaker, monitoring or administrator tag)")
	case http.StatusNotFound:
		if e.errText == "" && e.body != "" {
			b.WriteString(" (is --url the management API?)")
		}
	}
	return b.String()
}

// unreachableError means the API gave no HTTP answer.
type unreachableError struct {
	url     string
	timeout time.Duration
	err     error
}

func (e *unreachableError) Unwrap() error { return e.err }

// Error says what went wrong in terms of what to do next.
func (e *unreachableError) Error() string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(e.err, syscall.ECONNREFUSED):
		return fmt.Sprintf("cannot connect to the management API at %s: connection refused. "+
			"Is the Warren broker running with its management listener enabled (--mgmt-listen, port 15672 by default)? "+
			"Use --url to point warrenctl at another address", e.url)
	case errors.As(e.err, &dns):
		return fmt.Sprintf("cannot resolve the host of %s: %v (check --url)", e.url, dns)
	case errors.As(e.err, &ne) && ne.Timeout():
		return fmt.Sprintf("the management API at %s did not answer within %s (raise --timeout for slow calls such as large exports)", e.url, e.timeout)
	}
	return fmt.Sprintf("cannot reach the management API at %s: %v", e.url, e.err)
}
