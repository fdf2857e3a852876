package replica

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the package starts has an owner that stops and waits for
// it: after the tests none may be left.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
