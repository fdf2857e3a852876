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
)
