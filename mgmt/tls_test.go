package mgmt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenmq/warren/server"
)

// selfSignedFiles writes a throwaway self-signed certificate for 127.0.0.1
// and its key under dir, and returns their paths and a pool trusting it.
func selfSignedFiles(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestHTTPSManagementAPI(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSignedFiles(t, dir)
	scfg := server.DefaultConfig()
	scfg.AMQPListen = "127.0.0.1:0"
	scfg.DataDir = filepath.Join(dir, "data")
	scfg.MemoryHighWatermark = 0
	scfg.Logger = testLogger()
	scfg.TLSCertFile, scfg.TLSKeyFile = certFile, keyFile
	srv, err := server.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listen, cfg.Server, cfg.Logger, cfg.NodeName = "127.0.0.1:0", srv, scfg.Logger, testNode
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
