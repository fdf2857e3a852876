//go:build !unix

package queueindex

import "os"

// lockFile is a no-op where flock is not available; the owner must then make
// sure only one Index opens a directory.
func lockFile(*os.File) error { return nil }
