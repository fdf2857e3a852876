package mgmt

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/testcert"
	"github.com/warrenmq/warren/server"
)

func TestHTTPSManagementAPI(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := testcert.SelfSigned(t, dir)
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = filepath.Join(dir, "data")
	scfg.MemoryHighWatermark = 0
	scfg.Logger = testLogger()
	scfg.NodeName = testNode
	scfg.TLSCertFile, scfg.TLSKeyFile = certFile, keyFile
	scfg.AMQPSListen = "127.0.0.1:0"
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listen, cfg.Server, cfg.Logger = "127.0.0.1:0", srv, scfg.Logger
	cfg.TLS = srv.TLSConfig()
	if cfg.TLS == nil {
		t.Fatal("TLSConfig is nil with a certificate configured")
	}
	api, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}

	req, err := http.NewRequest(http.MethodGet, "https://"+api.Addr().String()+"/api/overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS request: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.TLS == nil {
		t.Fatalf("HTTPS overview: status %d, tls %v, body %s", res.StatusCode, res.TLS != nil, body)
	}

	// An AMQPS connection shows its TLS session in the connection list.
	ac, err := amqp091.DialTLS("amqps://guest:guest@"+srv.AMQPSAddr().String()+"/", &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("AMQPS dial: %v", err)
	}
	defer ac.Close()
	req, err = http.NewRequest(http.MethodGet, "https://"+api.Addr().String()+"/api/connections", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var conns []map[string]any
	err = json.NewDecoder(res.Body).Decode(&conns)
	res.Body.Close()
	if err != nil || len(conns) != 1 {
		t.Fatalf("connections: %v %v", conns, err)
	}
	c := conns[0]
	if c["ssl"] != true || c["ssl_protocol"] != "tlsv1.3" || c["ssl_key_exchange"] != "any" || c["ssl_hash"] != "aead" ||
		!strings.Contains(c["ssl_cipher"].(string), "_gcm") && c["ssl_cipher"] != "chacha20_poly1305" || c["peer_cert_subject"] != nil {
		t.Fatalf("AMQPS connection TLS fields: ssl=%v protocol=%v kx=%v cipher=%v hash=%v subject=%v",
			c["ssl"], c["ssl_protocol"], c["ssl_key_exchange"], c["ssl_cipher"], c["ssl_hash"], c["peer_cert_subject"])
	}

	// Plain HTTP to the HTTPS port gets no API answer.
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	defer plain.CloseIdleConnections()
	req, err = http.NewRequest(http.MethodGet, "http://"+api.Addr().String()+"/api/overview", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	if res, err := plain.Do(req); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP answered 200 on the HTTPS listener")
		}
	}
}

func TestConfigRejectsTLSWithoutCertificate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Server = &server.Server{}
	cfg.TLS = &tls.Config{}
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate accepted a TLS config without a certificate")
	}
}
