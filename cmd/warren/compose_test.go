package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml the test reads.
type composeFile struct {
	Services map[string]struct {
		Build       string            `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// TestDockerComposeClusterParses reads docker-compose.yml (this machine has
// no Docker engine to run it) and puts each node's command line, after the
// Dockerfile's entrypoint, and environment through the broker's own
// configuration loader: every key must exist and the three nodes must make
// one cluster that bootstraps with three voters.
func TestDockerComposeClusterParses(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(cf.Services) != 3 {
		t.Fatalf("%d services, want 3", len(cf.Services))
	}
	entry := dockerEntrypoint(t)
	names := map[string]bool{}
	for svc, s := range cf.Services {
		if s.Build != "." {
			t.Errorf("%s: build %q, want the repository's Dockerfile", svc, s.Build)
		}
		if len(s.Volumes) != 1 || !strings.HasSuffix(s.Volumes[0], ":/var/lib/warren") || cf.Volumes[strings.Split(s.Volumes[0], ":")[0]] == nil {
			t.Errorf("%s: volumes %v, want its own named volume on /var/lib/warren", svc, s.Volumes)
		}
		for k, v := range s.Environment {
			if strings.Contains(v, "${") { // compose substitutes it
				v = "a test secret of at least 16 characters"
			}
			t.Setenv(k, v)
		}
		cfg, _, _, err := loadConfig(append(slices.Clone(entry), s.Command...), io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		c := cfg.Cluster
		if c == nil {
			t.Fatalf("%s: not a cluster node", svc)
		}
		if c.BootstrapExpect != 3 || len(c.Seeds) != 3 || c.BindAddr != ":25672" || c.AdvertiseAddr != svc+":25672" {
			t.Errorf("%s: cluster %+v", svc, c)
		}
		for _, seed := range c.Seeds {
			if _, ok := cf.Services[strings.TrimSuffix(seed, ":25672")]; !ok {
				t.Errorf("%s: seed %s is not a service", svc, seed)
			}
		}
		if cfg.DataDir != "/var/lib/warren" {
			t.Errorf("%s: data dir %s", svc, cfg.DataDir)
		}
		names[cfg.NodeName] = true
	}
	if len(names) != 3 {
		t.Errorf("node names %v, want three different ones", names)
	}
}

// dockerEntrypoint is the Dockerfile's ENTRYPOINT arguments after the binary.
func dockerEntrypoint(t *testing.T) []string {
	t.Helper()
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT \[(.*)\]$`).FindSubmatch(df)
	if m == nil {
		t.Fatal("Dockerfile has no ENTRYPOINT [...]")
	}
	var args []string
	for _, a := range strings.Split(string(m[1]), ",") {
		args = append(args, strings.Trim(strings.TrimSpace(a), `"`))
	}
	return args[1:]
}
