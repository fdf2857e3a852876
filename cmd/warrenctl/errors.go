package main

import (
	"errors"
	"fmt"
)

// Exit codes.
const (
	exitOK = 0
	// exitFailed: the API refused the request or answered something
	// unexpected.
	exitFailed = 1
	// exitUsage: the command line is wrong.
	exitUsage = 2
	// exitUnhealthy: a health check failed or alarms are in effect.
	exitUnhealthy = 3
	// exitUnavailable: the API could not be reached (rabbitmqctl uses 69,
	// EX_UNAVAILABLE, for the same).
	exitUnavailable = 69
)

// errUnhealthy reports a failed health check whose details were printed.
var errUnhealthy = errors.New("health check failed")

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// exitCode maps an error from a command to the process's exit status.
func exitCode(err error) int {
	var ue *usageError
	var unreachable *unreachableError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, errUnhealthy):
		return exitUnhealthy
	case errors.As(err, &unreachable):
		return exitUnavailable
	}
	return exitFailed
}
