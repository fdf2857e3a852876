package mgmt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/testcert"
	"github.com/warrenmq/warren/server"
)

// failedCheck asserts a 503 with RabbitMQ's failed body and reason.
func failedCheck(t *testing.T, e *env, path, reason string) map[string]any {
	t.Helper()
	r := e.get(path, noAuth())
	if strings.Contains(path, "checks/virtual-hosts") || strings.Contains(path, "certificate-expiration") {
		r = e.get(path)
	}
	if r.status != 503 {
		t.Fatalf("%s: %d %s, want 503", path, r.status, r.body)
	}
	o := r.object(t)
	if o["status"] != "failed" || o["reason"] != reason {
		t.Fatalf("%s: body %s, want reason %q", path, r.body, reason)
	}
	return o
}

// TestMgmtHealthConnectionLimit fills the node's max-connections: the
// connection-limit and ready-to-serve checks fail until one closes.
func TestMgmtHealthConnectionLimit(t *testing.T) {
	e := newEnv(t, func(s *server.Config, _ *Config) { s.MaxConnections = 2 })
	var conns []*amqp091.Connection
	for range 2 {
		conns = append(conns, e.dial(e.amqpURL))
	}
	failedCheck(t, e, "/api/health/checks/below-node-connection-limit", "node connection limit is reached")
	o := failedCheck(t, e, "/api/health/checks/ready-to-serve-clients", "node connection limit is reached")
	if num(t, o["connections"]) != 2 {
		t.Errorf("connections in the body: %v", o["connections"])
	}
	conns[0].Close()
	waitFor(t, 5*time.Second, func() error {
		if r := e.get("/api/health/checks/below-node-connection-limit", noAuth()); r.status != 200 {
			return fmt.Errorf("still %d %s", r.status, r.body)
		}
		return nil
	})
	e.must(e.get("/api/health/checks/ready-to-serve-clients", noAuth()), 200, "ready with a free slot")
}

// TestMgmtHealthNotServing closes the broker under a running API: the
// service checks fail.
func TestMgmtHealthNotServing(t *testing.T) {
	e := newEnv(t)
	e.must(e.get("/api/health/checks/is-in-service", noAuth()), 200, "serving")
	e.srv.Close()
	failedCheck(t, e, "/api/health/checks/is-in-service", "this rabbit node is not currently available to serve")
	failedCheck(t, e, "/api/health/checks/ready-to-serve-clients", "the rabbit node is not currently available to serve")
}

// TestMgmtHealthCertificateExpiration reads the AMQPS listener's
// certificate, which expires in an hour.
func TestMgmtHealthCertificateExpiration(t *testing.T) {
	certFile, keyFile, _ := testcert.SelfSigned(t, t.TempDir())
	e := newEnv(t, func(s *server.Config, _ *Config) {
		s.TLSCertFile, s.TLSKeyFile, s.AMQPSListen = certFile, keyFile, "127.0.0.1:0"
	})
	e.must(e.get("/api/health/checks/certificate-expiration/0/days"), 200, "not expired now")
	o := failedCheck(t, e, "/api/health/checks/certificate-expiration/1/days", "Certificates expiring")
	expired := o["expired"].([]any)
	if len(expired) != 1 {
		t.Fatalf("expired listeners: %v", expired)
	}
	l := expired[0].(map[string]any)
	_, port := server.SplitHostPort(e.srv.AMQPSAddr().String())
	if l["certfile"] != certFile || l["protocol"] != "amqp/ssl" || num(t, l["port"]) != float64(port) ||
		len(l["certfile_expires_on"].([]any)) != 1 || len(l["cacertfile_expires_on"].([]any)) != 0 {
		t.Errorf("expired listener: %v", l)
	}
	for path, reason := range map[string]string{
		"/api/health/checks/certificate-expiration/x/days":       "Invalid expiration value.",
		"/api/health/checks/certificate-expiration/1/fortnights": "Time unit not recognised. Supported units: days, weeks, months, years.",
	} {
		r := e.get(path)
		if r.status != 400 || r.object(t)["reason"] != reason {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
	// A certificate file that is gone fails the check rather than passing.
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	failedCheck(t, e, "/api/health/checks/certificate-expiration/0/days", "Certificates expiring")
}

// TestMgmtHealthVirtualHostsDown fills the disk under a broker process (a
// file size limit): once persistent publishes are refused, the vhost is
// reported down.
func TestMgmtHealthVirtualHostsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker process")
	}
	e := startChildEnv(t, 2<<20)
	e.must(e.get("/api/health/checks/virtual-hosts"), 200, "before the disk fills")
	c := e.dial(e.amqpURL)
	ch := e.channel(c)
	if _, err := ch.QueueDeclare("fill", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 10<<10)
	nacked := false
	for i := 0; i < 1000 && !nacked; i++ {
		dc, err := ch.PublishWithDeferredConfirm("", "fill", false, false, amqp091.Publishing{DeliveryMode: 2, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		nacked = !dc.Wait()
	}
	if !nacked {
		t.Fatal("no publish was refused under the file size limit")
	}
	o := failedCheck(t, e, "/api/health/checks/virtual-hosts", "Some virtual hosts are down")
	if vs := o["virtual-hosts"].([]any); len(vs) != 1 || vs[0] != "/" {
		t.Errorf("virtual-hosts: %v", vs)
	}
}

// startChildEnv runs a broker with its API in a child process of the test
// binary whose files may not grow past fsize bytes.
func startChildEnv(t *testing.T, fsize int) *env {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WARREN_MGMT_CHILD="+t.TempDir(), "WARREN_MGMT_CHILD_FSIZE="+strconv.Itoa(fsize))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child broker: %v", err)
	}
	var amqpAddr, httpAddr string
	if _, err := fmt.Sscanf(line, "amqp=%s http=%s", &amqpAddr, &httpAddr); err != nil {
		t.Fatalf("child broker said %q: %v", line, err)
	}
	e := &env{t: t, base: "http://" + httpAddr, amqpURL: "amqp://guest:guest@" + amqpAddr + "/", client: newTestClient()}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// runChildEnv is the child of startChildEnv: it prints its addresses and
// serves until killed.
func runChildEnv(dir string) {
	if n, err := strconv.ParseUint(os.Getenv("WARREN_MGMT_CHILD_FSIZE"), 10, 64); err == nil {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			fmt.Fprintln(os.Stderr, "child broker: file size limit:", err)
			os.Exit(3)
		}
	}
	scfg := server.DefaultConfig()
	scfg.AMQPListen, scfg.DataDir, scfg.NodeName = "127.0.0.1:0", filepath.Join(dir, "data"), testNode
	scfg.MemoryHighWatermark, scfg.Logger = 0, testLogger()
	srv, err := server.New(scfg)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child broker:", err)
		os.Exit(3)
	}
	cfg := DefaultConfig()
	cfg.Listen, cfg.Logger, cfg.Server = "127.0.0.1:0", scfg.Logger, srv
	api, err := New(cfg)
	if err == nil {
		err = api.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child api:", err)
		os.Exit(3)
	}
	fmt.Printf("amqp=%s http=%s\n", srv.Addr(), api.Addr())
	select {}
}

// TestMgmtFeatureFlags lists RabbitMQ 3.10's flags, enabled only where
// Warren has the feature.
func TestMgmtFeatureFlags(t *testing.T) {
	e := newEnv(t)
	r := e.must(e.get("/api/feature-flags"), 200, "feature flags")
	states := map[string]string{}
	for _, f := range r.array(t) {
		m := f.(map[string]any)
		states[m["name"].(string)] = m["state"].(string)
		if m["stability"] != "stable" || m["desc"] == "" {
			t.Errorf("flag %v", m)
		}
	}
	want := map[string]string{
		"classic_mirrored_queue_version": "disabled", "drop_unroutable_metric": "enabled", "empty_basic_get_metric": "enabled",
		"implicit_default_bindings": "enabled", "maintenance_mode_status": "disabled", "quorum_queue": "enabled",
		"stream_queue": "enabled", "user_limits": "enabled", "virtual_host_metadata": "enabled",
	}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("feature flags %v, want %v", states, want)
	}
	if r := e.get("/api/feature-flags", asUser("guest", "wrong")); r.status != 401 {
		t.Errorf("feature flags with a wrong password: %d", r.status)
	}
	// Enabling: an enabled flag 204 (RabbitMQ 3.10 answers so for a flag
	// already on), an unknown one 3.10's 400, one Warren lacks 400.
	e.must(e.do("PUT", "/api/feature-flags/stream_queue/enable", nil), 204, "enable an enabled flag")
	expectBody(t, e.do("PUT", "/api/feature-flags/nope/enable", nil), 400, "bad_request", "unsupported")
	e.must(e.do("PUT", "/api/feature-flags/quorum_queue/enable", nil), 204, "enable quorum_queue, which is on")
	expectBody(t, e.do("PUT", "/api/feature-flags/maintenance_mode_status/enable", nil), 400, "bad_request",
		"feature flag 'maintenance_mode_status' cannot be enabled: Warren does not have this feature yet")
	if r := e.get("/api/feature-flags/stream_queue/enable"); r.status != 405 {
		t.Errorf("GET of enable: %d, want 405", r.status)
	}
}
