package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/warrenmq/warren"

// allowed lists, for each package of the module, the module packages it may
// import. Packages not listed may import nothing of the module; a package
// missing here fails the test so every new package gets a rule.
var allowed = map[string][]string{
	"":                  {}, // the module root: documentation and the soak entry point
	"amqp":              {},
	"msgstore":          {},
	"queueindex":        {"msgstore"},
	"server/route":      {"amqp"},
	"server":            {"amqp", "server/route", "queueindex", "msgstore"},
	"cluster":           {"amqp"},
	"mgmt":              {"server", "amqp", "msgstore", "queueindex", "mgmt/ui", "mgmt/metrics"},
	"mgmt/ui":           {},
	"mgmt/metrics":      {"server", "amqp"},
	"cmd/warren":        {"server", "mgmt", "mgmt/ui", "mgmt/metrics", "cluster", "amqp", "msgstore"},
	"cmd/warrenctl":     {},
	"cmd/warren-perf":   {},
	"cmd/amqpgen":       {},
	"internal/archtest": {},
	"internal/testcert": {},
	// internal/soakflag only defines the -soak test flag; every package with
	// tests imports it from a test file, which go list's .Imports (checked
	// here) leaves out, so no rule above needs it.
	"internal/soakflag": {},
}

// stdOnly are leaf packages that may import only the standard library.
var stdOnly = map[string]bool{"amqp": true, "msgstore": true, "queueindex": true, "internal/testcert": true, "internal/soakflag": true}

func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkgPath, imports, _ := strings.Cut(line, "|")
		pkg := strings.TrimPrefix(strings.TrimPrefix(pkgPath, module), "/")
		rules, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %q has no dependency rule in archtest", pkg)
			continue
		}
		seen++
		for _, imp := range strings.Split(imports, ",") {
			if imp == "" {
				continue
			}
			if strings.HasPrefix(imp, module+"/") {
				dep := strings.TrimPrefix(imp, module+"/")
				if !contains(rules, dep) {
					t.Errorf("%s imports %s, which the dependency direction forbids", pkg, dep)
				}
				continue
			}
			if stdOnly[pkg] && strings.Contains(strings.Split(imp, "/")[0], ".") {
				t.Errorf("%s must import only the standard library, but imports %s", pkg, imp)
			}
		}
	}
	if seen < 4 {
		t.Fatalf("only %d packages checked; go list output:\n%s", seen, out)
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
