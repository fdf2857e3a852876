package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// The broker's own connections (shovels to amqp:// with no host, as
// RabbitMQ's direct connections) log in over the loopback interface as
// InternalUser with a password made at start and never stored or shown.
// Like RabbitMQ's "none" user of direct connections it may use every vhost
// fully; the component that runs on its behalf checked when its parameter
// was set that the user setting it may use the vhost (checkDirectVhost).
// The name is reserved: no user of that name can be created, so nothing
// else is ever granted its access.
const InternalUser = "warren-internal"

// newInternalAccount makes the internal account and its password.
func newInternalAccount() (*account, string) {
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(fmt.Sprintf("server: crypto/rand failed: %v", err)) // the OS source never fails on Linux
	}
	password := hex.EncodeToString(raw[:])
	// impersonator: a federation link with trust-user-id republishes the
	// user-id the upstream validated, which RabbitMQ's direct connection
	// accepts as it is.
	return &account{name: InternalUser, passwordHash: HashPassword(password), loopbackOnly: true,
		tags: []string{"impersonator"}, perms: make(map[string]*compiledPermission)}, password
}

// fullAccess is the internal user's permission on every vhost.
var fullAccess = func() *compiledPermission {
	cp, err := compilePermission(Permission{Configure: ".*", Write: ".*", Read: ".*"})
	if err != nil {
		panic(err)
	}
	return cp
}()

// InternalCredential returns the user name and password of the broker's
// own loopback connections (see InternalUser).
func (s *Server) InternalCredential() (user, password string) {
	return InternalUser, s.users.internalPassword
}

// errReservedUser refuses to create or import the internal user.
func errReservedUser() error {
	return fmt.Errorf("%w: user name %q is reserved for the broker's own connections", ErrInvalid, InternalUser)
}
