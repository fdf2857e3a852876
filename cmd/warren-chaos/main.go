// Command warren-chaos is Warren's fault harness: it runs real warren
// processes, each in its own network namespace inside a fresh namespace of
// its own, drives a confirmed-publish / manual-ack / tx / definitions
// workload against them while a seeded nemesis kills, pauses, partitions,
// delays and fills the disks of nodes, then heals, drains every queue and
// checks the history (lost, unexpected and bad duplicate messages, acks
// committed with tx.commit coming back, linearizable definitions,
// unavailability per fault).
//
//	warren-chaos [flags]          run, keep everything in -run-dir, check
//	warren-chaos check RUN-DIR    check a kept run again
//
// It drives the broker as a black box through its binary and AMQP, so the
// cluster flags of later issues plug in through -node-arg and -scope.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Exit codes.
const (
	exitOK        = 0
	exitViolation = 1 // the checker found violations
	exitSetup     = 2 // bad flags, no namespaces, a node never answered
	exitSkipped   = 3 // the fault family cannot run here (no netem)
)

// innerEnv, when set, names the run.json of a run whose namespaces this
// process is already inside: the re-executed harness.
const innerEnv = "WARREN_CHAOS_INNER"

// config is a run's settings; it is written to <run>/run.json so the inner
// process and a later `check` read the same ones.
type config struct {
	Warren     string        `json:"warren"`
	RunDir     string        `json:"run_dir"`
	Nodes      int           `json:"nodes"`
	Seed       uint64        `json:"seed"`
	Duration   time.Duration `json:"duration"`
	Family     string        `json:"family"`
	FaultMin   time.Duration `json:"fault_min"`
	FaultMax   time.Duration `json:"fault_max"`
	DiskMB     int           `json:"disk_mb"`
	QueueType  string        `json:"queue_type"`
	MaxOps     int64         `json:"max_ops"`
	Publishers int           `json:"publishers"`
	PubRate    int           `json:"publish_rate"` // per publisher, messages/s; 0 = unpaced
	Consumers  int           `json:"consumers"`
	DefClients int           `json:"definition_clients"`
	NodeArgs   []string      `json:"node_args"`
	Scope      string        `json:"scope"` // node: independent nodes; cluster: one shared state
	// ClusterSecret is the run's cluster-secret with -scope cluster.
	ClusterSecret string `json:"cluster_secret,omitempty"`
}

var families = []string{"crash", "pause", "partition", "netem", "disk", "mixed"}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if path := os.Getenv(innerEnv); path != "" {
		return runInner(path, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "check" {
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: warren-chaos check RUN-DIR")
			return exitSetup
		}
		return runCheck(args[1], stdout, stderr)
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	return runOuter(cfg, stdout, stderr)
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("warren-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var nodeArgs stringList
	fs.StringVar(&cfg.Warren, "warren", "", "warren binary (default: go build ./cmd/warren into a temp dir)")
	fs.StringVar(&cfg.RunDir, "run-dir", "", "directory for histories, logs and data (default chaos-runs/<time>-<family>-<seed>)")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "warren processes, 1 to 9")
	fs.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault schedule and workload choices")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Minute, "how long the workload and nemesis run")
	fs.StringVar(&cfg.Family, "family", "crash", "fault family: "+strings.Join(families, "|"))
	fs.DurationVar(&cfg.FaultMin, "fault-min", 10*time.Second, "shortest fault before its heal")
	fs.DurationVar(&cfg.FaultMax, "fault-max", 30*time.Second, "longest fault before its heal")
	fs.IntVar(&cfg.DiskMB, "disk-mb", 256, "size of each node's tmpfs data dir in the disk and mixed families")
	fs.StringVar(&cfg.QueueType, "queue-type", "classic", "x-queue-type of the work queues: classic or quorum")
	fs.Int64Var(&cfg.MaxOps, "max-ops", 2_000_000, "most operations the workload invokes")
	fs.IntVar(&cfg.Publishers, "publishers", 3, "confirming publishers")
	fs.IntVar(&cfg.PubRate, "publish-rate", 500, "messages per second of each publisher (0: as fast as confirms come); bounds the history")
	fs.IntVar(&cfg.Consumers, "consumers", 2, "manual-ack consumers (besides the basic.get and tx clients)")
	fs.IntVar(&cfg.DefClients, "definition-clients", 2, "clients declaring, binding and deleting queues")
	fs.Var(&nodeArgs, "node-arg", "extra warren argument for every node, repeatable; {node}, {ip} and {peers} are replaced")
	fs.StringVar(&cfg.Scope, "scope", "node", "what shares definitions: node (independent nodes) or cluster")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.NodeArgs = nodeArgs
	return cfg, cfg.validate()
}

func (c *config) validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 9:
		return fmt.Errorf("-nodes %d: want 1 to 9 (addresses 10.99.0.11-19)", c.Nodes)
	case !contains(families, c.Family):
		return fmt.Errorf("-family %q: want one of %s", c.Family, strings.Join(families, ", "))
	case c.FaultMin <= 0 || c.FaultMax < c.FaultMin:
		return fmt.Errorf("-fault-min %v -fault-max %v: want 0 < min <= max", c.FaultMin, c.FaultMax)
	case c.Duration <= 0 || c.MaxOps <= 0:
		return errors.New("-duration and -max-ops must be positive")
	case c.QueueType != "classic" && c.QueueType != "quorum":
		// A stream needs consumers with offsets the workload does not have.
		return fmt.Errorf("-queue-type %q: want classic or quorum", c.QueueType)
	case c.Scope != "node" && c.Scope != "cluster":
		return fmt.Errorf("-scope %q: want node or cluster", c.Scope)
	case c.Publishers < 1 || c.Consumers < 1 || c.DefClients < 0 || c.PubRate < 0:
		return errors.New("-publishers and -consumers must be at least 1, -definition-clients and -publish-rate at least 0")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// runOuter builds warren if needed, writes run.json and re-executes the
// harness inside fresh user (unless already root), network and mount
// namespaces, then checks the run's history.
func runOuter(cfg config, stdout, stderr io.Writer) int {
	if cfg.RunDir == "" {
		cfg.RunDir = filepath.Join("chaos-runs", fmt.Sprintf("%s-%s-%d", time.Now().UTC().Format("20060102T150405"), cfg.Family, cfg.Seed))
	}
	dir, err := filepath.Abs(cfg.RunDir)
	if err == nil {
		cfg.RunDir = dir
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos: run dir:", err)
		return exitSetup
	}
	if cfg.Warren == "" {
		bin, err := buildWarren(cfg.RunDir)
		if err != nil {
			fmt.Fprintln(stderr, "warren-chaos:", err)
			return exitSetup
		}
		cfg.Warren = bin
	} else if cfg.Warren, err = filepath.Abs(cfg.Warren); err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	if cfg.Scope == "cluster" && cfg.ClusterSecret == "" {
		if cfg.ClusterSecret, err = newClusterSecret(); err != nil {
			fmt.Fprintln(stderr, "warren-chaos:", err)
			return exitSetup
		}
	}
	if err := writeConfig(cfg); err != nil {
		fmt.Fprintln(stderr, "warren-chaos:", err)
		return exitSetup
	}
	fmt.Fprintf(stdout, "warren-chaos: run %s (family %s, seed %d, %d node(s), scope %s, %v)\n", cfg.RunDir, cfg.Family, cfg.Seed, cfg.Nodes, cfg.Scope, cfg.Duration)
	code := reexecInNamespaces(cfg, stdout, stderr)
	if code != exitOK {
		return code
	}
	return runCheck(cfg.RunDir, stdout, stderr)
}

// buildWarren compiles the module's cmd/warren into the run dir, so the run
// keeps the binary it tested.
func buildWarren(runDir string) (string, error) {
	bin := filepath.Join(runDir, "warren")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/warrenmq/warren/cmd/warren")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build warren: %v\n%s", err, out)
	}
	return bin, nil
}

func writeConfig(cfg config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.RunDir, "run.json"), append(b, '\n'), 0o644)
}

func readConfig(runDir string) (config, error) {
	var cfg config
	b, err := os.ReadFile(filepath.Join(runDir, "run.json"))
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	return cfg, err
}

// reexecInNamespaces runs this executable again under unshare. As root the
// network and mount namespaces suffice; otherwise a user namespace mapping
// the caller to root grants the capabilities to set them up. The harness is
// pid 1 of its own pid namespace, so however it ends no node outlives it.
func reexecInNamespaces(cfg config, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos: own executable:", err)
		return exitSetup
	}
	args := []string{"--net", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--mount-proc"}
	if os.Geteuid() != 0 {
		args = append([]string{"--user", "--map-root-user"}, args...)
	}
	cmd := exec.Command("unshare", append(args, self)...)
	cmd.Env = append(os.Environ(), innerEnv+"="+filepath.Join(cfg.RunDir, "run.json"))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		// The inner harness exits 2 or 3 itself and never 1, unshare's
		// own failure code.
		var exit *exec.ExitError
		if errors.As(err, &exit) && (exit.ExitCode() == exitSetup || exit.ExitCode() == exitSkipped) {
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "warren-chaos: unshare %s failed (no namespaces here, or the harness inside was killed): %v\n", strings.Join(args, " "), err)
		return exitSetup
	}
	return exitOK
}
