package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/amqp"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and
// client certificates, written as PEM files under a test's TempDir.
type testPKI struct {
	dir      string
	ca       *x509.Certificate
	caKey    *ecdsa.PrivateKey
	pool     *x509.CertPool
	caFile   string
	certFile string // server certificate
	keyFile  string
	serial   int64
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warren test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	p.ca, err = x509.ParseCertificate(der)
	must(t, err)
	p.caKey = key
	p.pool.AddCert(p.ca)
	p.caFile = p.writePEM(t, "ca.pem", "CERTIFICATE", der)
	srv := p.issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	p.certFile = p.writePEM(t, "server.pem", "CERTIFICATE", srv.Certificate[0])
	kb, err := x509.MarshalPKCS8PrivateKey(srv.PrivateKey)
	must(t, err)
	p.keyFile = p.writePEM(t, "server.key", "PRIVATE KEY", kb)
	return p
}

// issue signs a leaf certificate with the CA for cn (also a DNS name) and
// 127.0.0.1.
func (p *testPKI) issue(t testing.TB, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial + 1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{cn}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	must(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *testPKI) writePEM(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// clientTLS is a client configuration trusting the test CA, with an optional
// client certificate.
func (p *testPKI) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: certs}
}

// startTLSServer starts a broker with AMQPS on a free port.
func startTLSServer(t testing.TB, p *testPKI, mutate ...func(*Config)) *testServer {
	t.Helper()
	return startServer(t, append([]func(*Config){func(c *Config) {
		c.AMQPSListen = "127.0.0.1:0"
		c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile = p.certFile, p.keyFile, p.caFile
	}}, mutate...)...)
}

func amqpsURL(ts *testServer, userinfo string) string {
	return "amqps://" + userinfo + ts.AMQPSAddr().String() + "/"
}

func TestAMQPSPublishAndGet(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p)
	conn, err := amqp091.DialTLS(amqpsURL(ts, "guest:guest@"), p.clientTLS())
	must(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	must(t, err)
	mustDeclare(t, ch, "tls-q", nil)
	publish(t, ch, "", "tls-q", "over tls")
	waitFor(t, 5*time.Second, "message on tls-q", func() bool {
		d, ok, err := ch.Get("tls-q", true)
		must(t, err)
		return ok && string(d.Body) == "over tls"
	})
	// The plain listener keeps working beside it.
	_, plain := ts.channel(t)
	mustDeclare(t, plain, "tls-q", nil)
}

func TestExternalLoginWithClientCert(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, func(c *Config) { c.TLSVerifyPeer = true })
	ts.addUser(t, "alice", "unused-password")
	ts.grant(t, "alice", "/", Permission{".*", ".*", ".*"})
	cfg := amqp091.Config{
		SASL:            []amqp091.Authentication{&amqp091.ExternalAuth{}},
		TLSClientConfig: p.clientTLS(p.issue(t, "alice", x509.ExtKeyUsageClientAuth)),
	}
	conn, err := amqp091.DialConfig(amqpsURL(ts, ""), cfg)
	must(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	must(t, err)
	mustDeclare(t, ch, "alice-q", nil)
	var users []string
	for _, c := range ts.Connections() {
		users = append(users, c.User)
	}
	if len(users) != 1 || users[0] != "alice" {
		t.Fatalf("connection users = %v, want [alice]", users)
	}
	// The management view of the connection names the client certificate.
	details := ts.ConnectionDetails()
	if len(details) != 1 || details[0].TLS == nil || !strings.Contains(details[0].TLS.PeerSubject, "CN=alice") ||
		details[0].TLS.PeerIssuer == "" || details[0].TLS.Protocol == "" {
		t.Fatalf("connection TLS details = %+v", details)
	}
}

func TestExternalRefused(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, func(c *Config) { c.TLSVerifyPeer = true })
	external := []amqp091.Authentication{&amqp091.ExternalAuth{}}

	// Without a client certificate EXTERNAL is not offered.
	_, err := amqp091.DialConfig(amqpsURL(ts, ""), amqp091.Config{SASL: external, TLSClientConfig: p.clientTLS()})
	if !errors.Is(err, amqp091.ErrSASL) {
		t.Fatalf("EXTERNAL without a certificate: err = %v, want ErrSASL", err)
	}
	// A verified certificate for a user that does not exist is refused.
	cfg := amqp091.Config{SASL: external, TLSClientConfig: p.clientTLS(p.issue(t, "mallory", x509.ExtKeyUsageClientAuth))}
	if _, err := amqp091.DialConfig(amqpsURL(ts, ""), cfg); err == nil {
		t.Fatal("EXTERNAL as an unknown user succeeded")
	}
	// The plain listener never offers EXTERNAL, and refuses a client that
	// insists on it.
	rc := dialRaw(t, ts.addr)
	rc.write(amqp.ProtocolHeader)
	start := &amqp.ConnectionStart{}
	rc.expectMethod(start)
	if strings.Contains(string(start.Mechanisms), "EXTERNAL") {
		t.Fatalf("plain listener offers %q", start.Mechanisms)
	}
	rc.send(0, &amqp.ConnectionStartOk{Mechanism: "EXTERNAL", Locale: "en_US"})
	rc.expectSilentClose() // as RabbitMQ answers a mechanism it does not offer
	if n := len(ts.Connections()); n != 0 {
		t.Fatalf("%d connections after refused logins", n)
	}
}

func TestTLSFailIfNoPeerCert(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p, func(c *Config) { c.TLSVerifyPeer, c.TLSFailIfNoPeerCert = true, true })
	if conn, err := amqp091.DialTLS(amqpsURL(ts, "guest:guest@"), p.clientTLS()); err == nil {
		conn.Close()
		t.Fatal("connected without a client certificate")
	}
	conn, err := amqp091.DialTLS(amqpsURL(ts, "guest:guest@"), p.clientTLS(p.issue(t, "guest", x509.ExtKeyUsageClientAuth)))
	must(t, err)
	conn.Close()
}

func TestTLSRefusesWeakProtocols(t *testing.T) {
	p := newTestPKI(t)
	ts := startTLSServer(t, p)
	addr := ts.AMQPSAddr().String()
	dial := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	old := p.clientTLS()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if err := dial(old); err == nil {
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	cbc := p.clientTLS()
	cbc.MaxVersion = tls.VersionTLS12
	cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}
	if err := dial(cbc); err == nil {
		t.Fatal("TLS 1.2 with CBC suites only succeeded")
	}
	gcm := p.clientTLS()
	gcm.MaxVersion = tls.VersionTLS12
	gcm.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	must(t, dial(gcm))
	must(t, dial(p.clientTLS())) // TLS 1.3
}

func TestTLSConfigValidation(t *testing.T) {
	p := newTestPKI(t)
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no cert", func(c *Config) { c.AMQPSListen = "127.0.0.1:0" }, "AMQPSListen needs TLSCertFile"},
		{"fail without verify", func(c *Config) { c.TLSFailIfNoPeerCert = true }, "TLSFailIfNoPeerCert needs TLSVerifyPeer"},
		{"verify without CA", func(c *Config) { c.TLSVerifyPeer = true }, "TLSVerifyPeer needs TLSCAFile"},
		{"negative limit", func(c *Config) { c.MaxQueuesPerVhost = -1 }, "MaxQueuesPerVhost -1 is negative"},
	} {
		cfg := DefaultConfig()
		tc.mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.DataDir = ""
	cfg.TLSCertFile, cfg.TLSKeyFile = p.certFile, filepath.Join(p.dir, "missing.key")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "missing.key") {
		t.Fatalf("New with a missing key file: %v", err)
	}
	if _, err := NewTLSConfig(TLSFiles{CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.certFile + ".nope"}); err == nil {
		t.Fatal("NewTLSConfig accepted a missing CA file")
	}
	tc, err := NewTLSConfig(TLSFiles{CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.caFile, VerifyPeer: true})
	must(t, err)
	if tc.MinVersion != tls.VersionTLS12 || tc.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Fatalf("NewTLSConfig: min version %x, client auth %v", tc.MinVersion, tc.ClientAuth)
	}
}
