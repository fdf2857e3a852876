package metrics

import "errors"

// Sentinel errors of the exporter.
var (
	// ErrStarted means Start was called on an exporter that is already
	// listening.
	ErrStarted = errors.New("metrics: exporter already started")
	// ErrClosed means the exporter has been closed and cannot start again.
	ErrClosed = errors.New("metrics: exporter closed")
	// errUnsupported means a node statistic cannot be read on this operating
	// system; the family is left out of the scrape rather than reported as an
	// error.
	errUnsupported = errors.New("metrics: not supported on this platform")
)
