package mgmt

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/warrenmq/warren/server"
)

// RabbitMQ-compatible versions reported where tools expect RabbitMQ's: the
// release whose management API this package implements. Tools gate features
// on rabbitmq_version, so it must look like a RabbitMQ version.
const (
	RabbitMQVersion   = "3.10.8"
	ManagementVersion = "3.10.8"
)

// API is the management HTTP API of one broker. Create it with New, serve
// it with Start (or mount Handler elsewhere) and stop it with Close.
//
// It owns two goroutines: the statistics sampler, started by New, and the
// HTTP server's accept loop, started by Start. Close stops both and waits.
type API struct {
	cfg     Config
	srv     *server.Server
	log     *slog.Logger
	routes  []*route
	stats   *sampler
	started time.Time
	// maxThreads is the Go runtime's OS thread limit, reported as proc_total.
	maxThreads int

	mu     sync.Mutex // guards hs, ln, closed
	hs     *http.Server
	ln     net.Listener
	closed bool

	quit chan struct{} // closed by Close; stops the sampler
	wg   sync.WaitGroup
}

// New validates cfg and builds the API. It starts the statistics sampler,
// so every API must be closed.
func New(cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &API{
		cfg: cfg, srv: cfg.Server, log: cfg.Logger.With("component", "mgmt"),
		started: time.Now(), quit: make(chan struct{}),
	}
	// SetMaxThreads has no getter: set a higher limit and restore the old one.
	a.maxThreads = debug.SetMaxThreads(1 << 30)
	debug.SetMaxThreads(a.maxThreads)
	// The node's name (a cluster's configured name) is the cluster name
	// until one is set; it is not stored.
	a.srv.SetDefaultClusterName(cmp.Or(a.srv.ClusterConfigName(), a.srv.NodeName()))
	a.routes = a.buildRoutes()
	a.stats = newSampler(a.srv, cfg.StatsInterval, cfg.StatsHistory, cfg.ObjectHistory)
	a.stats.sample(time.Now())
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.stats.run(a.quit)
	}()
	return a, nil
}

// Handler returns the API's HTTP handler: /api/... and, when Config.UI is
// set, everything else.
func (a *API) Handler() http.Handler { return http.HandlerFunc(a.serveHTTP) }

// Start listens on Config.Listen and serves in the background.
func (a *API) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if a.ln != nil {
		return ErrStarted
	}
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("mgmt: listen %s: %w", a.cfg.Listen, err)
	}
	ln = netutil.LimitListener(a.srv.SocketListener(ln), a.cfg.MaxConnections)
	if a.cfg.TLS != nil {
		ln = tls.NewListener(ln, a.cfg.TLS)
	}
	a.ln = ln
	a.hs = &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: a.cfg.ReadHeaderTimeout,
		ReadTimeout:       a.cfg.ReadTimeout,
		WriteTimeout:      a.cfg.WriteTimeout,
		IdleTimeout:       a.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	a.log.Info("management API listening", "addr", ln.Addr().String(), "tls", a.cfg.TLS != nil)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("management API stopped", "err", err)
		}
	}()
	return nil
}

// Addr returns the listener's address, or nil before Start.
func (a *API) Addr() net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ln == nil {
		return nil
	}
	return a.ln.Addr()
}

// Close stops the HTTP server (waiting up to 5 s for requests in flight) and
// the sampler. It is safe to call more than once.
func (a *API) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	hs := a.hs
	a.mu.Unlock()
	close(a.quit)
	var err error
	if hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = hs.Shutdown(ctx)
		cancel()
		if err != nil {
			err = errors.Join(err, hs.Close())
		}
	}
	a.wg.Wait()
	if err != nil {
		return fmt.Errorf("mgmt: closing the HTTP server: %w", err)
	}
	return nil
}

// authLevel is the least a user must be to call an endpoint.
type authLevel int

const (
	authNone        authLevel = iota // no credentials (Kubernetes probes)
	authMgmt                         // any management user
	authMonitor                      // monitoring or administrator
	authPolicymaker                  // policymaker or administrator
	authAdmin                        // administrator
)

// handlerFunc serves one endpoint; a returned error becomes the response.
type handlerFunc func(*request) error

type endpoint struct {
	auth authLevel
	fn   handlerFunc
}

// route is a path pattern: literal segments and {param} segments.
type route struct {
	segs    []string
	methods map[string]endpoint
}

func (rt *route) match(segs []string) (map[string]string, bool) {
	if len(segs) != len(rt.segs) {
		return nil, false
	}
	var params map[string]string
	for i, s := range rt.segs {
		if strings.HasPrefix(s, "{") {
			if params == nil {
				params = make(map[string]string, 4)
			}
			params[s[1:len(s)-1]] = segs[i]
			continue
		}
		if s != segs[i] {
			return nil, false
		}
	}
	return params, true
}

func (rt *route) allow() string {
	ms := []string{"OPTIONS"}
	for m := range rt.methods {
		ms = append(ms, m)
		if m == http.MethodGet {
			ms = append(ms, http.MethodHead)
		}
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// routeTable collects routes in registration order; literal routes must be
// registered before parameterised routes they overlap with.
type routeTable struct{ routes []*route }

func (t *routeTable) handle(method, pattern string, auth authLevel, fn handlerFunc) {
	segs := strings.Split(strings.Trim(pattern, "/"), "/")
	for _, rt := range t.routes {
		if slices.Equal(rt.segs, segs) {
			rt.methods[method] = endpoint{auth, fn}
			return
		}
	}
	t.routes = append(t.routes, &route{segs: segs, methods: map[string]endpoint{method: {auth, fn}}})
}

// request is one API call being served.
type request struct {
	a      *API
	w      http.ResponseWriter
	r      *http.Request
	params map[string]string
	query  url.Values
	user   server.UserInfo
	tags   tagSet
}

func (rq *request) param(name string) string { return rq.params[name] }

// splitPath splits an escaped path below /api into unescaped segments.
func splitPath(escaped string) ([]string, error) {
	rest := strings.TrimPrefix(escaped, "/api")
	rest = strings.TrimPrefix(rest, "/")
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return nil, nil
	}
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, err
		}
		parts[i] = u
	}
	return parts, nil
}

func (a *API) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		// Until an endpoint reads the body, a response ends the connection:
		// net/http would otherwise read the whole body before answering,
		// and a client that announces a body it never sends would get its
		// 401 only at ReadTimeout. RabbitMQ answers at once.
		w.Header().Set("Connection", "close")
	}
	escaped := r.URL.EscapedPath()
	if escaped != "/api" && !strings.HasPrefix(escaped, "/api/") {
		if a.cfg.UI != nil {
			a.cfg.UI.ServeHTTP(w, r)
			return
		}
		writeJSON(w, http.StatusNotFound, errNotFoundBody)
		return
	}
	segs, err := splitPath(escaped)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{"bad_request", "malformed path: " + err.Error()})
		return
	}
	var rt *route
	var params map[string]string
	for _, cand := range a.routes {
		if p, ok := cand.match(segs); ok {
			rt, params = cand, p
			break
		}
	}
	if rt == nil {
		writeJSON(w, http.StatusNotFound, errNotFoundBody)
		return
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if method == http.MethodOptions {
		w.Header().Set("Allow", rt.allow())
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ep, ok := rt.methods[method]
	if !ok {
		w.Header().Set("Allow", rt.allow())
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	rq := &request{a: a, w: w, r: r, params: params, query: r.URL.Query()}
	if !a.authorize(rq, ep.auth) {
		return
	}
	if !jsonOrNoBody(r) {
		// RabbitMQ's 415 has no body.
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	w.Header().Del("Connection")
	if err := ep.fn(rq); err != nil {
		a.writeError(w, r, err)
	}
}

// jsonOrNoBody reports whether a request may change state: a PUT or POST
// must declare Content-Type application/json (any case, parameters
// allowed). A cross-site HTML form can send text/plain, form-encoded and
// multipart bodies with credentials a browser has cached, never JSON, so
// every state-changing endpoint refuses the others with 415, as RabbitMQ's
// definitions, limits and operator-policy endpoints do (its other endpoints
// accept any type). A PUT without a body or Content-Type is accepted
// (`curl -X PUT .../api/vhosts/v`, as RabbitMQ's documentation shows): a
// browser sends a cross-site PUT only after a CORS preflight, which this
// API never grants. DELETE is not checked, as in RabbitMQ.
func jsonOrNoBody(r *http.Request) bool {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.Method == http.MethodPut && r.ContentLength == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// tagSet holds a user's management tags with RabbitMQ's hierarchy applied:
// administrator implies monitoring and policymaker, and each implies
// management.
type tagSet struct{ admin, monitor, policymaker, mgmt bool }

func tagsOf(tags []string) tagSet {
	var t tagSet
	for _, tag := range tags {
		switch tag {
		case "administrator":
			t.admin, t.monitor, t.policymaker, t.mgmt = true, true, true, true
		case "monitoring":
			t.monitor, t.mgmt = true, true
		case "policymaker":
			t.policymaker, t.mgmt = true, true
		case "management":
			t.mgmt = true
		}
	}
	return t
}

// authorize authenticates the request with HTTP basic auth and checks the
// user's tags against level, writing RabbitMQ's 401 responses on failure.
func (a *API) authorize(rq *request, level authLevel) bool {
	if level == authNone {
		return true
	}
	name, pass, ok := rq.r.BasicAuth()
	if !ok {
		rq.w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		rq.w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	u, err := a.srv.Login(name, pass, server.IsLoopback(rq.r.RemoteAddr))
	switch {
	case errors.Is(err, server.ErrLoopbackOnly):
		writeJSON(rq.w, http.StatusUnauthorized, errorBody{"not_authorised", "User can only log in via localhost"})
		return false
	case err != nil:
		writeJSON(rq.w, http.StatusUnauthorized, errorBody{"not_authorized", "Login failed"})
		return false
	}
	rq.user, rq.tags = u, tagsOf(u.Tags)
	deny := ""
	switch {
	case !rq.tags.mgmt:
		deny = "Not management user"
	case level == authMonitor && !rq.tags.monitor:
		deny = "Not monitor user"
	case level == authPolicymaker && !rq.tags.policymaker:
		deny = "User not authorised to access object"
	case level == authAdmin && !rq.tags.admin:
		deny = "Not administrator user"
	}
	if deny != "" {
		writeJSON(rq.w, http.StatusUnauthorized, errorBody{"not_authorised", deny})
		return false
	}
	return true
}

// vhost returns the vhost named by a path parameter if the user may use it:
// a vhost that does not exist is 404; administrators may use every vhost,
// other users those they have permissions on (401 otherwise).
func (rq *request) vhost(param string) (*server.Vhost, error) {
	name := rq.param(param)
	vh := rq.a.srv.Vhost(name)
	if vh == nil {
		return nil, errNotFound
	}
	if !rq.tags.admin && !rq.a.srv.HasVhostAccess(rq.user.Name, name) {
		return nil, errNotAuthorised("User not authorised to access virtual host")
	}
	return vh, nil
}

// visibleVhosts returns the vhosts whose objects (queues, exchanges,
// bindings, consumers, policies) the user sees in cross-vhost lists: those
// it has permissions on, whatever its tags, as RabbitMQ's filter_vhost.
func (rq *request) visibleVhosts() []*server.Vhost {
	all := rq.a.srv.Vhosts()
	out := all[:0]
	for _, vh := range all {
		if rq.a.srv.HasVhostAccess(rq.user.Name, vh.Name()) {
			out = append(out, vh)
		}
	}
	return out
}

// scopeVhosts returns the vhost of the {vhost} parameter when the route has
// one, or every visible vhost.
func (rq *request) scopeVhosts() ([]*server.Vhost, error) {
	if _, ok := rq.params["vhost"]; ok {
		vh, err := rq.vhost("vhost")
		if err != nil {
			return nil, err
		}
		return []*server.Vhost{vh}, nil
	}
	return rq.visibleVhosts(), nil
}

// permit checks an AMQP permission of the user, as RabbitMQ's management
// plugin does by acting over a channel as that user.
func (rq *request) permit(vhost string, kind server.Access, resource string) error {
	if !rq.a.srv.Permitted(rq.user.Name, vhost, kind, resource) {
		return errNotAuthorised("Access refused.")
	}
	return nil
}
