package main

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig is returned by Config.Validate, and by flag parsing, when
// a setting is out of range or contradicts another one. Nothing has been sent
// to the broker when it is returned.
var ErrInvalidConfig = errors.New("invalid configuration")

// ErrConnect is returned when a connection to the broker cannot be opened:
// the TCP dial fails, the broker refuses the AMQP handshake or the login, or
// a channel cannot be opened on a fresh connection.
var ErrConnect = errors.New("cannot connect to broker")

// ErrDeclare is returned when the broker refuses to declare (or, with
// --predeclared, cannot find) an exchange or a queue, or refuses a binding,
// a purge or a consume.
var ErrDeclare = errors.New("broker refused a declaration")

// ErrWorker is returned when a publisher or consumer fails after the run has
// started, for example because the broker closed its connection.
var ErrWorker = errors.New("worker failed")

// ErrConfirmTimeout is returned when a publisher still has unconfirmed
// messages once the drain timeout after the end of the run has passed.
var ErrConfirmTimeout = errors.New("publisher confirms still outstanding")

// ErrUnknownScenario is returned by the scenario subcommand for a name that
// is not in the preset list.
var ErrUnknownScenario = errors.New("unknown scenario")

// errMalformed is wrapped by every parse error of the fast client: the
// broker sent bytes that are not the AMQP the client expects, or a method
// the client does not expect where it arrived.
var errMalformed = errors.New("malformed AMQP frame")

// errCloseOK is returned by fastConn.control when the broker confirms the
// connection.close the client sent: the connection ended as asked.
var errCloseOK = errors.New("connection closed")

// ServerCloseError is a channel.close or connection.close the broker sent:
// it ended the channel or the connection, giving a reply code (404 for a
// missing exchange, 406 for a precondition, 320 for a broker shutdown, ...).
type ServerCloseError struct {
	// Code is the AMQP reply code.
	Code uint16
	// Text is the broker's reply text.
	Text string
	// ClassID and MethodID name the method that caused the close, or 0.
	ClassID, MethodID uint16
	// Connection is true for connection.close, false for channel.close.
	Connection bool
}

// Error formats the close as amqp091-go formats its *amqp.Error, so that
// both clients report a refusal the same way.
func (e *ServerCloseError) Error() string {
	return fmt.Sprintf("Exception (%d) Reason: %q", e.Code, e.Text)
}
