package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTLSAndLimitSettings(t *testing.T) {
	cfg, _, _, err := loadConfig([]string{
		"--amqps-listen", "127.0.0.1:5671", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem",
		"--tls-verify-peer", "--tls-fail-if-no-peer-cert",
		"--max-connections", "10", "--max-connections-per-vhost", "5", "--max-queues-per-vhost", "7",
		"--max-consumers-per-channel", "3", "--max-field-table-size", "4096",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AMQPSListen != "127.0.0.1:5671" || cfg.TLSCertFile != "c.pem" || cfg.TLSKeyFile != "k.pem" ||
		cfg.TLSCAFile != "ca.pem" || !cfg.TLSVerifyPeer || !cfg.TLSFailIfNoPeerCert {
		t.Errorf("TLS settings not applied: %+v", cfg)
	}
	if cfg.MaxConnections != 10 || cfg.MaxConnectionsPerVhost != 5 || cfg.MaxQueuesPerVhost != 7 ||
		cfg.MaxConsumersPerChannel != 3 || cfg.MaxFieldTableSize != 4096 {
		t.Errorf("limits not applied: %+v", cfg)
	}
}

func TestTLSSettingErrors(t *testing.T) {
	var errOut bytes.Buffer
	if code := run([]string{"--amqps-listen", "127.0.0.1:0"}, &bytes.Buffer{}, &errOut, nil); code != 2 {
		t.Errorf("amqps-listen without a certificate: exit %d (%s)", code, errOut.String())
	}
	errOut.Reset()
	args := []string{"--data-dir", t.TempDir(), "--amqp-listen", freePort(t), "--mgmt-listen", freePort(t),
		"--metrics-listen", "", "--mgmt-tls"}
	if code := run(args, &bytes.Buffer{}, &errOut, nil); code != 1 || !strings.Contains(errOut.String(), "mgmt-tls needs tls-cert") {
		t.Errorf("mgmt-tls without a certificate: exit %d (%s)", code, errOut.String())
	}
}
