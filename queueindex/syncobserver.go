package queueindex

import "sync/atomic"

// syncObserver, when set, is told the path of every file after each successful
// fdatasync. It exists for fault-injection tests (a simulated power cut keeps
// each file as it was at its last fdatasync) and costs one atomic load per sync.
var syncObserver atomic.Pointer[func(path string)]

// SetSyncObserver installs fn to be called with a file's path after each
// successful fdatasync of it, or removes the observer when fn is nil. It is
// for fault-injection tests; fn runs on the syncing goroutine and must be quick.
func SetSyncObserver(fn func(path string)) {
	if fn == nil {
		syncObserver.Store(nil)
		return
	}
	syncObserver.Store(&fn)
}
