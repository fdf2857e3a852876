// Package soakflag defines the -soak test flag for every test binary of the
// module.
//
// The soak test (server.TestSoak) runs only when given a duration:
//
//	go test ./... -run Soak -soak 10m -timeout 30m
//
// go test hands flags it does not know to every package's test binary, and a
// binary that does not define one fails with "flag provided but not
// defined". So the flag lives here, in a package with no other content, and
// one test file of every package with tests imports it for its side effect:
//
//	import _ "github.com/warrenmq/warren/internal/soakflag"
//
// Caveats: go test takes the package list only before the first flag it does
// not know, so ./... must come before -soak; and its default -timeout of
// 10 minutes panics a longer soak, so pass a larger -timeout. Only test
// files may import this package (it registers a flag on the global
// flag.CommandLine).
package soakflag

import "flag"

// Duration is how long the soak test runs; 0, the default, skips it.
var Duration = flag.Duration("soak", 0, "run the soak test (TestSoak) for this long; 0 skips it")
