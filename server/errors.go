package server

import "errors"

// Sentinel errors of the server's administrative API.
var (
	// ErrNoSuchUser means a user name is not known.
	ErrNoSuchUser = errors.New("server: no such user")
	// ErrNoSuchVhost means a vhost name is not known.
	ErrNoSuchVhost = errors.New("server: no such vhost")
	// ErrClosed means the server has been closed.
	ErrClosed = errors.New("server: closed")
	// ErrNotFound means an object named in an administrative call (queue,
	// exchange, binding, policy, permission, connection) does not exist.
	ErrNotFound = errors.New("server: not found")
	// ErrInvalid means an administrative request is malformed: a bad policy,
	// password hash, definitions file or name.
	ErrInvalid = errors.New("server: invalid request")
	// ErrLoginFailed means a user name and password did not match.
	ErrLoginFailed = errors.New("server: login failed")
	// ErrLoopbackOnly means the user may only log in from a loopback address.
	ErrLoopbackOnly = errors.New("server: user can only log in via localhost")
)
