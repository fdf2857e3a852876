package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/msgstore"
	"github.com/warrenmq/warren/server"
)

func TestVersionFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "warren ") {
		t.Fatalf("output %q", out.String())
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "warren.yaml")
	yaml := `amqp-listen: 127.0.0.1:1111
frame-max: 65536
heartbeat: 30s
vhosts: [orders]
vhost-flush-policies:
  orders: os
users:
  - name: app
    password: pw
    tags: [management]
    permissions:
      orders: {configure: "^app", write: ".*", read: ".*"}
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARREN_FRAME_MAX", "32768")
	cfg, _, _, err := loadConfig([]string{"--config", file, "--heartbeat", "5s"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AMQPListen != "127.0.0.1:1111" {
		t.Errorf("file value lost: %q", cfg.AMQPListen)
	}
	if cfg.FrameMax != 32768 {
		t.Errorf("environment should beat the file: %d", cfg.FrameMax)
	}
	if cfg.Heartbeat != 5*time.Second {
		t.Errorf("flag should beat the file: %s", cfg.Heartbeat)
	}
	if cfg.VhostFlush["orders"] != msgstore.FlushOS {
		t.Errorf("vhost flush policy %v", cfg.VhostFlush)
	}
	if len(cfg.Vhosts) != 1 || cfg.Vhosts[0] != "orders" {
		t.Errorf("vhosts %v", cfg.Vhosts)
	}
	if len(cfg.Users) != 1 || cfg.Users[0].Permissions["orders"].Configure != "^app" {
		t.Errorf("users %+v", cfg.Users)
	}
	if cfg.DataDir != "./data" || cfg.ChannelMax != 2047 {
		t.Errorf("defaults lost: %+v", cfg)
	}
	if cfg.NodeName != server.DefaultConfig().NodeName {
		t.Errorf("default node name lost: %q", cfg.NodeName)
	}
}

// node-name reaches server.Config, and vhosts is a flag like every scalar key.
func TestNodeNameAndVhostsFlags(t *testing.T) {
	cfg, _, _, err := loadConfig([]string{"--node-name", "warren@seams", "--vhosts", "a,b"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeName != "warren@seams" {
		t.Errorf("NodeName %q, want warren@seams", cfg.NodeName)
	}
	if len(cfg.Vhosts) != 2 || cfg.Vhosts[0] != "a" || cfg.Vhosts[1] != "b" {
		t.Errorf("vhosts %v, want [a b]", cfg.Vhosts)
	}
	t.Setenv("WARREN_NODE_NAME", "warren@env")
	if cfg, _, _, err = loadConfig(nil, &bytes.Buffer{}); err != nil || cfg.NodeName != "warren@env" {
		t.Errorf("NodeName from the environment %q (%v)", cfg.NodeName, err)
	}
}

func TestInvalidConfigExits2(t *testing.T) {
	for _, args := range [][]string{
		{"--frame-max", "100"},
		{"--log-format", "xml"},
		{"--config", "/nonexistent/warren.yaml"},
		{"--no-such-flag"},
		{"--flush-policy", "sometimes"},
		{"--queue-head-messages", "0"},
	} {
		var errOut bytes.Buffer
		if code := run(args, &bytes.Buffer{}, &errOut, nil); code != 2 {
			t.Errorf("%v: exit %d (%s)", args, code, errOut.String())
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRunServesAndShutsDownOnSignal starts the binary's run function, connects
// a client, delivers SIGTERM and checks the client sees 320 and run exits 0.
func TestRunServesAndShutsDownOnSignal(t *testing.T) {
	addr, mgmtAddr, metricsAddr, pprofAddr := freePort(t), freePort(t), freePort(t), freePort(t)
	old := logOutput
	logOutput = &bytes.Buffer{}
	t.Cleanup(func() { logOutput = old })
	sigs := make(chan os.Signal, 1)
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"--amqp-listen", addr, "--mgmt-listen", mgmtAddr, "--metrics-listen", metricsAddr,
			"--pprof-listen", pprofAddr, "--data-dir", t.TempDir()}, &bytes.Buffer{}, &bytes.Buffer{}, sigs)
	}()
	var conn *amqp091.Connection
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err = amqp091.Dial("amqp://guest:guest@" + addr + "/")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The management API (with the UI) and the metrics answer too. They start
	// just after the AMQP listener, so each is polled until it answers.
	for _, u := range []string{"http://" + mgmtAddr + "/api/overview", "http://" + mgmtAddr + "/", "http://" + metricsAddr + "/metrics",
		"http://" + pprofAddr + "/debug/pprof/heap?debug=1"} {
		var status, size int
		var lastErr error
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			req, _ := http.NewRequest("GET", u, nil)
			req.SetBasicAuth("guest", "guest")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				lastErr = err
				time.Sleep(20 * time.Millisecond)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, size = resp.StatusCode, len(body)
			break
		}
		if status != 200 || size == 0 {
			t.Fatalf("%s: status %d, %d bytes, last error %v", u, status, size, lastErr)
		}
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	sigs <- syscall.SIGTERM
	select {
	case e := <-closed:
		if e == nil || e.Code != 320 {
			t.Fatalf("client saw %v, want 320", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client not closed")
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return")
	}
}
