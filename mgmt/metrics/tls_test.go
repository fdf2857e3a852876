package metrics

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/internal/testcert"
	"github.com/warrenmq/warren/server"
)

func TestHTTPSMetrics(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := testcert.SelfSigned(t, dir)
	tc, err := server.NewTLSConfig(server.TLSFiles{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = filepath.Join(dir, "data")
	scfg.MemoryHighWatermark = 0
	scfg.Logger = testLogger()
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listen, cfg.TLS = "127.0.0.1:0", tc
	cfg.Options.Logger = scfg.Logger
	exp, err := New(srv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	res, err := client.Get("https://" + exp.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("HTTPS scrape: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.TLS == nil || !strings.Contains(string(body), "rabbitmq_") {
		t.Fatalf("HTTPS scrape: status %d, tls %v, body %.200s", res.StatusCode, res.TLS != nil, body)
	}
}
