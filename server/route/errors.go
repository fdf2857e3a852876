package route

import "errors"

// Errors returned by this package. Test with errors.Is.
var (
	// ErrUnknownKind means New was asked for an exchange type that has no matcher.
	ErrUnknownKind = errors.New("route: unknown exchange type")
	// ErrInvalidXMatch means a headers binding's x-match argument is not one of
	// the strings all, any, all-with-x or any-with-x. The error returned by
	// ValidateHeadersArgs wraps it in an *ArgsError carrying RabbitMQ's reply text.
	ErrInvalidXMatch = errors.New("route: invalid x-match argument")
)

// ArgsError reports binding arguments an exchange type rejects. Text is the
// reply text RabbitMQ sends with 406 PRECONDITION_FAILED, without the
// "PRECONDITION_FAILED - " prefix that the connection adds.
type ArgsError struct {
	// Text is the human-readable reason, worded as RabbitMQ words it.
	Text string
	// Err is the sentinel the failure belongs to, e.g. ErrInvalidXMatch.
	Err error
}

// Error returns Text, so the error can be sent to the client unchanged.
func (e *ArgsError) Error() string { return e.Text }

// Unwrap returns the sentinel, for errors.Is.
func (e *ArgsError) Unwrap() error { return e.Err }
