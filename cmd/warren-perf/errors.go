package main

import "errors"

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
