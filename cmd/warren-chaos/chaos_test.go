package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestMain lets the test binary be the harness re-executed inside its
// namespaces (os.Executable is the test binary then).
func TestMain(m *testing.M) {
	if path := os.Getenv(innerEnv); path != "" {
		os.Exit(runInner(path, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestChaosShort is the CI run: one node, the crash family, 60 s with 3-6 s
// faults, then the checker. It needs namespaces (CI runs as root), so it
// runs only with WARREN_CHAOS=1 (.ci/run sets it); there, namespaces that
// cannot be made fail it. WARREN_CHAOS_SEED, _FAMILY, _DURATION, _NODES
// and _DIR (kept after the test) vary it.
func TestChaosShort(t *testing.T) {
	cfg := config{Nodes: 1, Seed: 1, Duration: 60 * time.Second, Family: "crash",
		FaultMin: 3 * time.Second, FaultMax: 6 * time.Second, DiskMB: 64, QueueType: "classic",
		MaxOps: 2_000_000, Publishers: 3, PubRate: 500, Consumers: 2, DefClients: 2, Scope: "node"}
	runChaosTest(t, cfg)
}

// TestChaosClusterShort is the cluster's CI run next to TestChaosShort:
// three nodes forming one Warren cluster (-scope cluster), the crash
// family for 75 s with 5-10 s faults (a killed node must be declared dead
// by gossip, about 7 s, for its remote consumers to be dropped), then the
// checker. The same guard and variables as TestChaosShort.
func TestChaosClusterShort(t *testing.T) {
	cfg := config{Nodes: 3, Seed: 1, Duration: 75 * time.Second, Family: "crash",
		FaultMin: 5 * time.Second, FaultMax: 10 * time.Second, DiskMB: 64, QueueType: "classic",
		MaxOps: 2_000_000, Publishers: 3, PubRate: 500, Consumers: 2, DefClients: 2, Scope: "cluster"}
	runChaosTest(t, cfg)
}

// TestChaosClusterQuorumShort is TestChaosClusterShort with quorum work
// queues (-queue-type quorum): each led first by its declaring node with a
// replica on every node, so each kill fails a queue over to a mirror while
// the other nodes forward to it. The same guard and variables.
func TestChaosClusterQuorumShort(t *testing.T) {
	cfg := config{Nodes: 3, Seed: 1, Duration: 75 * time.Second, Family: "crash",
		FaultMin: 5 * time.Second, FaultMax: 10 * time.Second, DiskMB: 64, QueueType: "quorum",
		MaxOps: 2_000_000, Publishers: 3, PubRate: 500, Consumers: 2, DefClients: 2, Scope: "cluster"}
	runChaosTest(t, cfg)
}

func runChaosTest(t *testing.T, cfg config) {
	if os.Getenv("WARREN_CHAOS") != "1" {
		t.Skip("set WARREN_CHAOS=1 to run the fault harness (needs unshare and iproute2)")
	}
	cfg.RunDir = t.TempDir()
	if v := os.Getenv("WARREN_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		must(t, err)
		cfg.Seed = seed
	}
	if v := os.Getenv("WARREN_CHAOS_FAMILY"); v != "" {
		cfg.Family = v
	}
	if v := os.Getenv("WARREN_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		must(t, err)
		cfg.Duration = d
	}
	if v := os.Getenv("WARREN_CHAOS_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		must(t, err)
		cfg.Nodes = n
	}
	if v := os.Getenv("WARREN_CHAOS_DIR"); v != "" {
		cfg.RunDir = filepath.Join(v, time.Now().UTC().Format("20060102T150405")+"-"+cfg.Scope)
	}
	must(t, cfg.validate())
	var out bytes.Buffer
	code := runOuter(cfg, &out, &out)
	t.Logf("seed %d, run dir %s:\n%s", cfg.Seed, cfg.RunDir, out.String())
	if code != exitOK {
		t.Fatalf("warren-chaos exited %d", code)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
