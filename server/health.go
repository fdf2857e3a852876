package server

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Health is what the management API's health checks read: whether the node
// serves clients, its connection count against the node limit, and which
// vhosts cannot store messages.
type Health struct {
	// Serving is true between Start and Close: the AMQP listener accepts.
	Serving bool
	// Connections counts admitted AMQP sockets, handshaking ones included
	// (RabbitMQ counts ranch's active connections the same way).
	Connections int
	// ConnectionLimit is Config.MaxConnections; 0 is unlimited.
	ConnectionLimit int
	// VhostsDown names the vhosts whose message store refuses writes.
	VhostsDown []string
}

// Health reports the node's state for the health checks.
func (s *Server) Health() Health {
	h := Health{Serving: s.serving.Load(), Connections: int(s.sockets.Load()), ConnectionLimit: s.cfg.MaxConnections}
	for _, vh := range s.Vhosts() {
		if vh.storage != nil && vh.storage.failing.Load() {
			h.VhostsDown = append(h.VhostsDown, vh.name)
		}
	}
	slices.Sort(h.VhostsDown)
	return h
}

// CertificateFile is one certificate file a listener uses, with the expiry
// of every certificate in it.
type CertificateFile struct {
	Listener string // "amqp/ssl"
	Addr     string // the listener's address
	Role     string // "certfile" or "cacertfile"
	Path     string
	Expiry   []time.Time
	Err      error // the file could not be read or parsed
}

// ErrNoCertificate is returned for a PEM file holding no certificate.
var ErrNoCertificate = errors.New("server: no certificate in PEM file")

// CertificateFiles reads the certificate files of the node's TLS listener,
// for the certificate-expiration health check. Files are read at each call,
// as RabbitMQ does, so a replaced file is seen.
func (s *Server) CertificateFiles() []CertificateFile {
	addr := s.AMQPSAddr()
	if addr == nil {
		return nil
	}
	var out []CertificateFile
	for _, f := range []struct{ role, path string }{{"certfile", s.cfg.TLSCertFile}, {"cacertfile", s.cfg.TLSCAFile}} {
		if f.path == "" {
			continue
		}
		expiry, err := pemExpiries(f.path)
		out = append(out, CertificateFile{Listener: "amqp/ssl", Addr: addr.String(), Role: f.role, Path: f.path, Expiry: expiry, Err: err})
	}
	return out
}

// pemExpiries returns the NotAfter of every certificate in a PEM file.
func pemExpiries(path string) ([]time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("server: parsing %s: %w", path, err)
		}
		out = append(out, c.NotAfter)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoCertificate, path)
	}
	return out, nil
}
