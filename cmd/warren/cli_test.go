package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/spf13/pflag"
)

// TestHelpPrintsEveryKey: warren --help (and -h) prints every key to stdout
// and exits 0, without starting a broker.
func TestHelpPrintsEveryKey(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out, errOut bytes.Buffer
		if code := run([]string{arg, "--data-dir", filepath.Join(t.TempDir(), "never")}, &out, &errOut, nil); code != 0 {
			t.Fatalf("%s: exit %d: %s", arg, code, errOut.String())
		}
		for _, s := range settings {
			if !strings.Contains(out.String(), "--"+s.key+" ") {
				t.Errorf("%s does not list --%s:\n%s", arg, s.key, out.String())
			}
		}
		if !strings.Contains(out.String(), "--config") || !strings.Contains(out.String(), "WARREN_") {
			t.Errorf("%s output:\n%s", arg, out.String())
		}
	}
}

// readmeKeys returns the keys of the README's configuration table and
// whether each is marked flag only or file only.
func readmeKeys(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := make(map[string]string)
	keyCell := regexp.MustCompile("`([a-z0-9-]+)`")
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| key | default | meaning |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "| `") {
			break // the table ended
		}
		cells := strings.Split(line, "|")
		mark := ""
		switch {
		case strings.Contains(line, "(flag only)"):
			mark = "flag"
		case strings.Contains(line, "(file only)"):
			mark = "file"
		}
		for _, m := range keyCell.FindAllStringSubmatch(cells[1], -1) {
			keys[m[1]] = mark
		}
	}
	must(t, sc.Err())
	if len(keys) < len(settings) {
		t.Fatalf("README table has %d keys, the flag set %d", len(keys), len(settings))
	}
	return keys
}

// probeValue is a non-default value of s's type, as the environment writes
// it, and as YAML does.
func probeValue(s setting) (env, yaml string) {
	switch s.def.(type) {
	case string:
		return "ops-probe", `"ops-probe"`
	case int:
		return "7", "7"
	case float64:
		return "0.7", "0.7"
	case time.Duration:
		return "7s", "7s"
	case []string:
		return "a b", "[a, b]"
	case bool:
		return "true", "true"
	}
	panic(fmt.Sprintf("setting %s has type %T", s.key, s.def))
}

// TestREADMEKeysAreFlagsEnvAndYAML walks the README's configuration table:
// every key is a flag, a WARREN_* variable and a YAML key that each reach
// the configuration, except those the README marks flag only or file only;
// and every flag is in the table.
func TestREADMEKeysAreFlagsEnvAndYAML(t *testing.T) {
	keys := readmeKeys(t)
	fs, _, _ := newFlagSet(io.Discard)
	byKey := make(map[string]setting)
	for _, s := range settings {
		byKey[s.key] = s
	}
	for key, mark := range keys {
		_, isSetting := byKey[key]
		switch {
		case mark == "file" && (fs.Lookup(key) != nil || isSetting):
			t.Errorf("%s: the README says file only, but it is a flag", key)
		case mark == "flag" && fs.Lookup(key) == nil:
			t.Errorf("%s: the README says flag only, but there is no such flag", key)
		case mark == "" && (fs.Lookup(key) == nil || !isSetting):
			t.Errorf("%s: in the README but not a flag and setting", key)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := keys[f.Name]; !ok {
			t.Errorf("--%s is not in the README's table", f.Name)
		}
	})
	var yaml strings.Builder
	for _, s := range settings {
		env, y := probeValue(s)
		t.Setenv("WARREN_"+strings.ToUpper(strings.ReplaceAll(s.key, "-", "_")), env)
		fmt.Fprintf(&yaml, "%s: %s\n", s.key, y)
	}
	checkProbed(t, "environment", nil)
	for _, s := range settings {
		os.Unsetenv("WARREN_" + strings.ToUpper(strings.ReplaceAll(s.key, "-", "_")))
	}
	file := filepath.Join(t.TempDir(), "warren.yaml")
	must(t, os.WriteFile(file, []byte(yaml.String()), 0o644))
	checkProbed(t, "YAML", []string{"--config", file})
}

// checkProbed loads the configuration with args and checks every setting
// holds its probe value.
func checkProbed(t *testing.T, source string, args []string) {
	t.Helper()
	_, v, _, _ := loadConfig(args, io.Discard) // the probe values need not make a valid broker
	if v == nil {
		t.Fatalf("%s: no configuration loaded", source)
	}
	for _, s := range settings {
		var ok bool
		switch s.def.(type) {
		case string:
			ok = v.GetString(s.key) == "ops-probe"
		case int:
			ok = v.GetInt(s.key) == 7
		case float64:
			ok = v.GetFloat64(s.key) == 0.7
		case time.Duration:
			ok = v.GetDuration(s.key) == 7*time.Second
		case []string:
			l := stringList(v, s.key)
			ok = len(l) == 2 && l[0] == "a" && l[1] == "b"
		case bool:
			ok = v.GetBool(s.key)
		}
		if !ok {
			t.Errorf("%s: %s did not reach the configuration (got %v)", source, s.key, v.Get(s.key))
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startRun runs the broker in the background and waits for its AMQP
// listener at amqpAddr; the returned function stops it and checks exit 0.
func startRun(t *testing.T, amqpAddr string, args ...string) func() {
	t.Helper()
	sigs := make(chan os.Signal, 1)
	exit := make(chan int, 1)
	var errOut lockedWriter
	go func() { exit <- run(args, io.Discard, &errOut, sigs) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := amqp091.Dial("amqp://guest:guest@" + amqpAddr + "/")
		if err == nil {
			c.Close()
			break
		}
		// A refusal is an answer: the broker is serving, only without a
		// guest that may open "/" (a boot with load-definitions makes none).
		if _, ok := err.(*amqp091.Error); ok {
			break
		}
		select {
		case code := <-exit:
			t.Fatalf("broker exited %d: %s", code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sigs <- syscall.SIGTERM
		select {
		case code := <-exit:
			if code != 0 {
				t.Errorf("exit %d: %s", code, errOut.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return")
		}
	}
	t.Cleanup(stop)
	return stop
}

// runFails runs the broker, which must exit non-zero within a few seconds,
// and returns what it wrote to stderr.
func runFails(t *testing.T, args ...string) string {
	t.Helper()
	var errOut lockedWriter
	exit := make(chan int, 1)
	sigs := make(chan os.Signal) // never sent: a broker that starts would block
	go func() { exit <- run(args, io.Discard, &errOut, sigs) }()
	select {
	case code := <-exit:
		if code == 0 {
			t.Fatalf("%v: exit 0", args)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%v: the broker started or hangs; stderr: %s", args, errOut.String())
	}
	return errOut.String()
}

// TestListenerTakenExitsNamingKey: when a listener's port is taken, warren
// exits non-zero at once naming the key and the address.
func TestListenerTakenExitsNamingKey(t *testing.T) {
	quiet(t)
	for _, key := range []string{"amqp-listen", "mgmt-listen", "metrics-listen"} {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		addrs := map[string]string{"amqp-listen": "127.0.0.1:0", "mgmt-listen": "127.0.0.1:0", "metrics-listen": "127.0.0.1:0"}
		addrs[key] = taken.Addr().String()
		args := []string{"--data-dir", t.TempDir()}
		for k, a := range addrs {
			args = append(args, "--"+k, a)
		}
		stderr := runFails(t, args...)
		taken.Close()
		if want := key + " " + addrs[key]; !strings.Contains(stderr, want) || !strings.Contains(stderr, "address already in use") {
			t.Errorf("%s taken: stderr %q, want %q and the cause", key, stderr, want)
		}
	}
}

// TestSecondBrokerOnDataDirExits: a second warren on a running one's data
// directory exits at once with the holder's pid.
func TestSecondBrokerOnDataDirExits(t *testing.T) {
	quiet(t)
	dir := t.TempDir()
	addr := freePort(t)
	stop := startRun(t, addr, "--amqp-listen", addr, "--mgmt-listen", "", "--metrics-listen", "", "--data-dir", dir)
	stderr := runFails(t, "--amqp-listen", "127.0.0.1:0", "--mgmt-listen", "", "--metrics-listen", "", "--data-dir", dir)
	if !strings.Contains(stderr, "data directory in use") || !strings.Contains(stderr, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("stderr %q", stderr)
	}
	stop()
}

// TestDefaultListenersDualStack: the default listeners have no host, so
// they take IPv4 and IPv6 connections alike; reached at 127.0.0.1 and [::1].
func TestDefaultListenersDualStack(t *testing.T) {
	quiet(t)
	want := map[string]string{"amqp-listen": ":5672", "mgmt-listen": ":15672", "metrics-listen": ":15692"}
	for _, s := range settings {
		if w, ok := want[s.key]; ok && s.def != w {
			t.Errorf("%s defaults to %v, want %s", s.key, s.def, w)
		}
	}
	v6 := true
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		v6 = false
		t.Logf("no IPv6 loopback (%v): only 127.0.0.1 is checked", err)
	} else {
		ln.Close()
	}
	ports := make(map[string]string)
	for key := range want {
		ports[key] = dualStackPort(t)
	}
	stop := startRun(t, "127.0.0.1:"+ports["amqp-listen"], "--data-dir", t.TempDir(),
		"--amqp-listen", ":"+ports["amqp-listen"], "--mgmt-listen", ":"+ports["mgmt-listen"], "--metrics-listen", ":"+ports["metrics-listen"])
	hosts := []string{"127.0.0.1"}
	if v6 {
		hosts = append(hosts, "::1")
	}
	for _, h := range hosts {
		c, err := amqp091.Dial("amqp://guest:guest@" + net.JoinHostPort(h, ports["amqp-listen"]) + "/")
		if err != nil {
			t.Fatalf("AMQP at %s: %v", h, err)
		}
		c.Close()
		for key, path := range map[string]string{"mgmt-listen": "/api/overview", "metrics-listen": "/metrics"} {
			u := "http://" + net.JoinHostPort(h, ports[key]) + path
			if code := httpGet(t, u); code != http.StatusOK {
				t.Errorf("%s: status %d", u, code)
			}
		}
	}
	stop()
}

// dualStackPort returns a port free on every address, IPv4 and IPv6.
func dualStackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	must(t, err)
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	must(t, err)
	return port
}

// httpGet polls u (the HTTP listeners start just after AMQP) and returns the
// status of the first answer.
func httpGet(t *testing.T, u string) int {
	t.Helper()
	var lastErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		req, err := http.NewRequest("GET", u, nil)
		must(t, err)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Fatalf("%s: %v", u, lastErr)
	return 0
}

// quiet sends the broker's log to a buffer for the test.
func quiet(t *testing.T) {
	old := logOutput
	logOutput = &lockedWriter{}
	t.Cleanup(func() { logOutput = old })
}

// lockedWriter collects what the broker's goroutines write.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
