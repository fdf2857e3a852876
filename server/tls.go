package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/warrenmq/warren/amqp"
)

// modernCipherSuites are the TLS 1.2 suites Warren accepts: forward-secret
// ECDHE key exchange with AEAD ciphers only. TLS 1.3 suites are not
// configurable in Go and are all AEAD.
var modernCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSFiles names the PEM files and client-certificate policy of a TLS
// listener. The AMQPS listener, the management API and the metrics endpoint
// share one.
type TLSFiles struct {
	// CertFile and KeyFile are the server certificate (chain) and key.
	CertFile, KeyFile string
	// CAFile holds the authorities trusted for client certificates.
	CAFile string
	// VerifyPeer requests and verifies client certificates.
	VerifyPeer bool
	// FailIfNoPeerCert refuses clients without a valid certificate.
	FailIfNoPeerCert bool
}

// NewTLSConfig loads the files and returns a server-side *tls.Config that
// allows TLS 1.2 with ECDHE AEAD suites and TLS 1.3 only.
func NewTLSConfig(f TLSFiles) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrInvalid)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("server: loading TLS key pair %s, %s: %w", f.CertFile, f.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: modernCipherSuites,
		ClientAuth:   tls.NoClientCert,
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("server: reading TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: TLS CA file %s holds no PEM certificate", ErrInvalid, f.CAFile)
		}
		cfg.ClientCAs = pool
	}
	switch {
	case f.FailIfNoPeerCert:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case f.VerifyPeer:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if cfg.ClientAuth != tls.NoClientCert && cfg.ClientCAs == nil {
		return nil, fmt.Errorf("%w: verifying client certificates needs a CA file", ErrInvalid)
	}
	return cfg, nil
}

// tlsFiles returns the configuration's TLS settings.
func (c *Config) tlsFiles() TLSFiles {
	return TLSFiles{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile,
		VerifyPeer: c.TLSVerifyPeer, FailIfNoPeerCert: c.TLSFailIfNoPeerCert}
}

// validateTLSAndLimits checks the TLS and limit settings without reading files.
func (c *Config) validateTLSAndLimits() []error {
	var errs []error
	if c.AMQPSListen != "" {
		if _, _, err := net.SplitHostPort(c.AMQPSListen); err != nil {
			errs = append(errs, fmt.Errorf("AMQPSListen %q: %w", c.AMQPSListen, err))
		}
		if c.TLSCertFile == "" || c.TLSKeyFile == "" {
			errs = append(errs, errors.New("AMQPSListen needs TLSCertFile and TLSKeyFile"))
		}
	}
	if c.TLSFailIfNoPeerCert && !c.TLSVerifyPeer {
		errs = append(errs, errors.New("TLSFailIfNoPeerCert needs TLSVerifyPeer"))
	}
	if c.TLSVerifyPeer && c.TLSCAFile == "" {
		errs = append(errs, errors.New("TLSVerifyPeer needs TLSCAFile"))
	}
	for _, l := range []struct {
		name string
		v    int
	}{
		{"MaxConnections", c.MaxConnections}, {"MaxConnectionsPerVhost", c.MaxConnectionsPerVhost},
		{"MaxQueuesPerVhost", c.MaxQueuesPerVhost}, {"MaxConsumersPerChannel", c.MaxConsumersPerChannel},
		{"MaxFieldTableSize", c.MaxFieldTableSize},
	} {
		if l.v < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative (0 means unlimited)", l.name, l.v))
		}
	}
	return errs
}

// TLSConfig returns the TLS configuration loaded from Config's TLS files, or
// nil when no certificate is configured. The management API and metrics
// endpoint may serve HTTPS with it.
func (s *Server) TLSConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Clone()
}

// loadTLS reads the configured certificate, if any, when the server is built.
func (s *Server) loadTLS() error {
	if s.cfg.TLSCertFile == "" && s.cfg.TLSKeyFile == "" {
		return nil
	}
	cfg, err := NewTLSConfig(s.cfg.tlsFiles())
	if err != nil {
		return err
	}
	s.tls = cfg
	return nil
}

// startTLSHandshake finishes the TLS handshake of an AMQPS connection within
// the AMQP handshake deadline and records whether the client presented a
// verified certificate, which enables EXTERNAL. Plain TCP connections pass.
func (c *conn) startTLSHandshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	st := tc.ConnectionState()
	c.tlsInfo = newTLSConnInfo(&st)
	if len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		c.peerCN = st.PeerCertificates[0].Subject.CommonName
		c.externalOK = c.peerCN != ""
	}
	return nil
}

// AuthMechanisms lists the SASL mechanisms the node offers some client:
// EXTERNAL only when an AMQPS listener verifies client certificates, since
// no other connection is ever offered it (conn.mechanisms).
func (s *Server) AuthMechanisms() []string {
	if s.cfg.AMQPSListen != "" && s.cfg.TLSVerifyPeer {
		return []string{"PLAIN", "AMQPLAIN", "EXTERNAL"}
	}
	return []string{"PLAIN", "AMQPLAIN"}
}

// mechanisms lists the SASL mechanisms offered in connection.start: EXTERNAL
// only to TLS clients with a verified certificate.
func (c *conn) mechanisms() []byte {
	if c.externalOK {
		return []byte("PLAIN AMQPLAIN EXTERNAL")
	}
	return []byte("PLAIN AMQPLAIN")
}

// authenticateExternal logs the client in as the subject CN of its verified
// certificate, as RabbitMQ's rabbitmq_auth_mechanism_ssl does by default. The
// user must exist; no password is checked.
func (c *conn) authenticateExternal(so *amqp.ConnectionStartOk) error {
	if !c.externalOK {
		return c.fail(amqp.NewError(amqp.CommandInvalid, so.ID(), "unknown authentication mechanism '%s'", so.Mechanism))
	}
	acct := c.srv.users.get(c.peerCN)
	if acct == nil {
		return c.loginRefused(so.Mechanism, c.peerCN, "no user for the certificate's subject CN")
	}
	if acct.loopbackOnly && !isLoopback(c.nc.RemoteAddr()) {
		return c.loginRefused(so.Mechanism, c.peerCN, "user can only connect via localhost")
	}
	c.user = acct
	return nil
}

// get returns the named account or nil.
func (u *users) get(name string) *account {
	if name == InternalUser {
		return u.internal
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.accounts[name]
}

// TLSConnInfo describes an AMQPS session in the terms of RabbitMQ's
// management API (ssl_protocol, ssl_key_exchange, ssl_cipher, ssl_hash and
// the peer certificate fields).
type TLSConnInfo struct {
	Protocol    string // "tlsv1.2", "tlsv1.3"
	KeyExchange string // "ecdhe_rsa", "ecdhe_ecdsa"; "any" under TLS 1.3, where the suite does not name it
	Cipher      string // "aes_128_gcm", "chacha20_poly1305", …
	Hash        string // "aead" for the AEAD suites Warren allows
	// PeerSubject, PeerIssuer and PeerValidity describe the client
	// certificate; empty when the client presented none.
	PeerSubject, PeerIssuer, PeerValidity string
}

// newTLSConnInfo names the negotiated version and cipher suite the way
// Erlang's ssl application does, which is what RabbitMQ reports.
func newTLSConnInfo(st *tls.ConnectionState) *TLSConnInfo {
	info := &TLSConnInfo{Protocol: "tlsv1.2", KeyExchange: "any", Hash: "aead"}
	if st.Version == tls.VersionTLS13 {
		info.Protocol = "tlsv1.3"
	}
	// Suite names look like TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (1.2) or
	// TLS_AES_128_GCM_SHA256 (1.3).
	name := strings.TrimPrefix(tls.CipherSuiteName(st.CipherSuite), "TLS_")
	if kx, rest, ok := strings.Cut(name, "_WITH_"); ok {
		info.KeyExchange, name = strings.ToLower(kx), rest
	}
	if i := strings.LastIndex(name, "_SHA"); i > 0 {
		name = name[:i]
	}
	info.Cipher = strings.ToLower(name)
	if len(st.PeerCertificates) > 0 {
		cert := st.PeerCertificates[0]
		info.PeerSubject = cert.Subject.String()
		info.PeerIssuer = cert.Issuer.String()
		info.PeerValidity = cert.NotBefore.UTC().Format(time.RFC3339) + " - " + cert.NotAfter.UTC().Format(time.RFC3339)
	}
	return info
}
