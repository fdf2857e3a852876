package warren

import (
	"flag"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/internal/soakflag"
)

// TestSoak runs the server's soak test for the command as the issue writes
// it, go test -run Soak -soak 10m ./... . go test reads packages only before
// the first flag it does not know, so that command builds this root package
// alone and hands "./..." to its test binary as an argument. Seeing that
// argument, this test runs server's TestSoak in a child go test with the
// same duration, shortened to fit this binary's own -timeout (10 minutes by
// default: pass -timeout 30m for the whole soak). Run the usual way,
// go test ./... -run Soak -soak 10m -timeout 30m, the server package runs
// its TestSoak itself and this one skips.
func TestSoak(t *testing.T) {
	d := *soakflag.Duration
	if d <= 0 {
		t.Skip("no -soak duration")
	}
	if !slices.Contains(flag.Args(), "./...") {
		t.Skip("the server package runs its soak test itself")
	}
	if deadline, ok := t.Deadline(); ok {
		// Leave time to build the server tests and to stop the last broker.
		if room := time.Until(deadline) - 3*time.Minute; room < d {
			t.Logf("soak shortened from %s to %s to fit -timeout; pass -timeout 30m to run it all", d, room.Round(time.Second))
			d = max(room, time.Minute)
		}
	}
	cmd := exec.Command("go", "test", "./server", "-run", "^TestSoak$", "-count=1", "-v",
		"-soak", d.String(), "-timeout", (d + 10*time.Minute).String())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("server soak test: %v", err)
	}
}
