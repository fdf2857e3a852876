//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package msgstore

import "os"

// lockFile is a no-op where flock is not available; see the Caveats in doc.go.
func lockFile(f *os.File) error { return nil }
