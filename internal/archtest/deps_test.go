package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/warrenmq/warren"

// rule is what one package of the module may import besides the standard
// library: packages of the module, and third-party modules by import path
// prefix (a prefix also allows the packages below it).
type rule struct {
	module     []string
	thirdParty []string
}

// Third-party modules, named once so a rule says which it allows.
const (
	amqp091    = "github.com/rabbitmq/amqp091-go"
	bbolt      = "go.etcd.io/bbolt"
	netutil    = "golang.org/x/net/netutil"
	prometheus = "github.com/prometheus/client_golang"
	pflag      = "github.com/spf13/pflag"
	viper      = "github.com/spf13/viper"
	raft       = "github.com/hashicorp/raft"
	raftBolt   = "github.com/hashicorp/raft-boltdb/v2"
	memberlist = "github.com/hashicorp/memberlist"
	porcupine  = "github.com/anishathalye/porcupine"
)

// allowed is the dependency direction, for each package of the module:
//
//	cmd → mgmt → server → cluster, queueindex → msgstore
//	cmd → shovel → amqp091-go
//	cmd → federation → amqp091-go
//
// with amqp importable by all and importing only the standard library.
// cluster (Raft, membership) sits below server and imports no broker
// package, only its libraries and msgstore for the replicated log, so it
// can be tested without a broker, as RabbitMQ's broker is built on ra,
// osiris and aten. A package missing here fails the test, so every new
// package, and every new third-party dependency, needs a rule.
var allowed = map[string]rule{
	"":           {}, // the module root: documentation and the soak entry point
	"amqp":       {},
	"msgstore":   {},
	"queueindex": {module: []string{"msgstore"}},
	"cluster":    {module: []string{"msgstore"}, thirdParty: []string{raft, raftBolt, memberlist}},
	// The per-queue replication protocol knows records and offsets, not
	// AMQP; its file log sits on msgstore's segment log.
	"cluster/replica": {module: []string{"msgstore"}},
	"server/route":    {module: []string{"amqp"}},
	"server":          {module: []string{"amqp", "server/route", "cluster", "cluster/replica", "queueindex", "msgstore"}, thirdParty: []string{bbolt}},
	"mgmt":            {module: []string{"server", "amqp", "msgstore", "queueindex", "mgmt/ui", "mgmt/metrics"}, thirdParty: []string{netutil}},
	"mgmt/ui":         {},
	"mgmt/metrics":    {module: []string{"server", "amqp"}, thirdParty: []string{prometheus, netutil}},
	"cmd/warren":      {module: []string{"server", "mgmt", "mgmt/ui", "mgmt/metrics", "cluster", "amqp", "msgstore", "shovel", "federation"}, thirdParty: []string{pflag, viper}},
	// The shovel runner is a client of brokers, this one included, and
	// knows the broker only through what cmd/warren gives its Config; the
	// server must not import it.
	"shovel": {module: []string{"internal/paramvalue"}, thirdParty: []string{amqp091}},
	// The federation runner likewise: a client of its upstreams and of
	// this broker, wired by cmd/warren.
	"federation":      {module: []string{"internal/paramvalue"}, thirdParty: []string{amqp091}},
	"cmd/warrenctl":   {},
	"cmd/warren-perf": {thirdParty: []string{amqp091}},
	"cmd/amqpgen":     {},
	// The fault harness drives warren as a black box through its binary,
	// AMQP and HTTP; porcupine checks its definitions history.
	"cmd/warren-chaos":  {thirdParty: []string{amqp091, porcupine}},
	"internal/archtest": {},
	"internal/testcert": {},
	// What the shovel and federation runners both read of their
	// runtime parameters.
	"internal/paramvalue": {},
	// internal/soakflag only defines the -soak test flag; every package with
	// tests imports it from a test file, which go list's .Imports (checked
	// here) leaves out, so no rule above needs it.
	"internal/soakflag": {},
}

func TestDependencyDirection(t *testing.T) {
	// Output, not CombinedOutput: on a fresh machine go list reports the
	// modules it downloads on stderr, which are not packages.
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}", module+"/...")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkgPath, imports, _ := strings.Cut(line, "|")
		pkg := strings.TrimPrefix(strings.TrimPrefix(pkgPath, module), "/")
		r, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %q has no dependency rule in archtest", pkg)
			continue
		}
		seen++
		for _, imp := range strings.Split(imports, ",") {
			if why := r.forbids(imp); why != "" {
				t.Errorf("%s imports %s, %s", pkg, imp, why)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("only %d packages checked; go list output:\n%s", seen, out)
	}
}

// forbids returns why the rule forbids importing imp, or "" if it allows it.
func (r rule) forbids(imp string) string {
	switch {
	case imp == "":
		return ""
	case strings.HasPrefix(imp, module+"/"):
		if contains(r.module, strings.TrimPrefix(imp, module+"/")) {
			return ""
		}
		return "which the dependency direction forbids"
	case !strings.Contains(strings.Split(imp, "/")[0], "."):
		return "" // the standard library
	}
	for _, p := range r.thirdParty {
		if imp == p || strings.HasPrefix(imp, p+"/") {
			return ""
		}
	}
	return "a third-party package its rule does not allow"
}

// The rules themselves keep cluster below server and free of the broker.
func TestClusterStaysBelowServer(t *testing.T) {
	if !contains(allowed["server"].module, "cluster") {
		t.Error("server may not import cluster")
	}
	for _, broker := range []string{"server", "server/route", "mgmt", "mgmt/metrics", "queueindex", "amqp"} {
		if why := allowed["cluster"].forbids(module + "/" + broker); why == "" {
			t.Errorf("cluster may import %s", broker)
		}
	}
	if allowed["cluster"].forbids(module+"/msgstore") != "" || allowed["cluster"].forbids(raft) != "" {
		t.Error("cluster may not import msgstore or hashicorp/raft")
	}
	if allowed["cluster"].forbids(raft+"-other") == "" {
		t.Error("a prefix allows a different module")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
