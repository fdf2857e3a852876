package mgmt

import "errors"

// Sentinel errors of the management API.
var (
	// ErrInvalidConfig means a Config failed Validate.
	ErrInvalidConfig = errors.New("mgmt: invalid config")
	// ErrClosed means the API has been closed.
	ErrClosed = errors.New("mgmt: closed")
	// ErrStarted means Start was called twice.
	ErrStarted = errors.New("mgmt: already started")
)
