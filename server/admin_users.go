package server

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"

	"github.com/warrenmq/warren/amqp"
)

// The administrative API (see admin.go): management logins, users, permissions
// and topic permissions.

// Login checks a user's password for the management API. loopback says
// whether the client connected from a loopback address; users restricted to
// loopback (LoopbackUsers) fail with ErrLoopbackOnly otherwise.
func (s *Server) Login(name, password string, loopback bool) (UserInfo, error) {
	a, ok := s.users.authenticate(name, password)
	if !ok {
		return UserInfo{}, ErrLoginFailed
	}
	s.users.mu.RLock()
	info := UserInfo{Name: a.name, Tags: slices.Clone(a.tags)}
	only := a.loopbackOnly
	s.users.mu.RUnlock()
	if only && !loopback {
		return UserInfo{}, ErrLoopbackOnly
	}
	return info, nil
}

// IsLoopback reports whether addr ("host:port" or a host) is a loopback address.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Access is one of the three permissions RabbitMQ checks on resource names.
type Access int

// The three permissions.
const (
	AccessConfigure Access = Access(accessConfigure)
	AccessWrite     Access = Access(accessWrite)
	AccessRead      Access = Access(accessRead)
)

// Permitted reports whether user's permissions on vhost grant a on the
// resource name (the default exchange "" is checked as amq.default).
func (s *Server) Permitted(user, vhost string, a Access, resource string) bool {
	p := s.users.permission(user, vhost)
	return p != nil && p.allows(access(a), resource)
}

// HasVhostAccess reports whether user has any permissions on vhost.
func (s *Server) HasVhostAccess(user, vhost string) bool {
	return s.users.permission(user, vhost) != nil
}

// UserSummary describes a user. PasswordHash is the stored hash in
// RabbitMQ's base64 format ("" without a password): RabbitMQ 3.10 shows it
// to administrators in /api/users, and tools (rabbit-hole, Terraform)
// read it back; it is no more than the definitions export already carries.
type UserSummary struct {
	Name             string
	Tags             []string
	HasPassword      bool
	PasswordHash     string
	HashingAlgorithm string
	Limits           map[string]int64 // user limits; nil when none
}

// Users returns every user sorted by name.
func (s *Server) Users() []UserSummary {
	s.users.mu.RLock()
	out := make([]UserSummary, 0, len(s.users.accounts))
	for _, a := range s.users.accounts {
		out = append(out, summarize(a))
	}
	s.users.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func summarize(a *account) UserSummary {
	return UserSummary{
		Name: a.name, Tags: slices.Clone(a.tags), HasPassword: a.passwordHash != "",
		PasswordHash:     a.passwordHash,
		HashingAlgorithm: HashAlgorithm(a.passwordHash), Limits: maps.Clone(a.limits),
	}
}

// User returns one user.
func (s *Server) User(name string) (UserSummary, error) {
	s.users.mu.RLock()
	defer s.users.mu.RUnlock()
	a := s.users.accounts[name]
	if a == nil {
		return UserSummary{}, fmt.Errorf("%w: %q", ErrNoSuchUser, name)
	}
	return summarize(a), nil
}

// userHashes returns every user with its hash; only definitions export uses it.
func (s *Server) userHashes() []UserInfo { return s.users.list() }

// UserSpec is a user to create or update. With neither Password nor
// PasswordHash set the user has no password (as RabbitMQ: it cannot log in
// with one).
type UserSpec struct {
	Name             string
	Password         *string
	PasswordHash     *string
	HashingAlgorithm string
	Tags             []string
	// Limits, when not nil, are user limits added to those the user has,
	// as RabbitMQ's PUT /api/users with "limits" adds them.
	Limits map[string]any
}

// PutUser creates or replaces a user and reports whether it was created.
func (s *Server) PutUser(u UserSpec) (created bool, err error) {
	if u.Name == "" {
		return false, fmt.Errorf("%w: user name is empty", ErrInvalid)
	}
	var hash string
	switch {
	case u.Password != nil && u.PasswordHash != nil:
		return false, fmt.Errorf("%w: both_password_and_password_hash_are_provided", ErrInvalid)
	case u.Password != nil:
		hash = HashPassword(*u.Password)
	case u.PasswordHash != nil:
		if err := CheckPasswordHash(*u.PasswordHash, u.HashingAlgorithm); err != nil {
			return false, err
		}
		hash = *u.PasswordHash
	}
	if u.Limits != nil {
		if err := validateUserLimits(u.Limits); err != nil {
			return false, err
		}
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	created, err = s.putUserLocked(u.Name, hash, u.Tags)
	if err != nil || len(u.Limits) == 0 {
		return created, err
	}
	return created, s.addUserLimits(u.Name, u.Limits)
}

func (s *Server) putUserLocked(name, hash string, tags []string) (bool, error) {
	s.users.mu.RLock()
	_, exists := s.users.accounts[name]
	s.users.mu.RUnlock()
	if tags == nil {
		tags = []string{}
	}
	if err := s.users.put(name, hash, tags, slices.Contains(s.cfg.LoopbackUsers, name)); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return !exists, nil
}

// DeleteUser removes a user with its permissions and topic permissions and,
// as RabbitMQ, closes its connections with 320 CONNECTION_FORCED.
func (s *Server) DeleteUser(name string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	found, err := s.users.remove(name)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrNoSuchUser, name)
	}
	s.closeUserConnections(name, fmt.Sprintf("user '%s' is deleted", name))
	return nil
}

// closeUserConnections force-closes every running connection of a user.
// A connection still in its handshake needs no closing: it finds the user
// gone when it opens its vhost.
func (s *Server) closeUserConnections(user, reason string) {
	s.mu.RLock()
	var conns []*conn
	for _, c := range s.conns {
		// isRunning orders the read of c.user after the handshake set it.
		if c.isRunning() && c.user.name == user {
			conns = append(conns, c)
		}
	}
	s.mu.RUnlock()
	for _, c := range conns {
		c.forceClose(amqp.ConnectionForced, reason)
	}
}

// PermissionInfo is a user's permission on a vhost.
type PermissionInfo struct {
	User, Vhost string
	Permission
}

// Permissions returns every permission, sorted by user then vhost.
func (s *Server) Permissions() []PermissionInfo {
	s.users.mu.RLock()
	var out []PermissionInfo
	for _, a := range s.users.accounts {
		for vh, p := range a.perms {
			out = append(out, PermissionInfo{User: a.name, Vhost: vh, Permission: p.Permission})
		}
	}
	s.users.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Vhost < out[j].Vhost
	})
	return out
}

// SetPermission grants a user permissions on a vhost and reports whether the
// user had none there before. Both must exist.
func (s *Server) SetPermission(user, vhost string, p Permission) (created bool, err error) {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.setPermissionLocked(user, vhost, p)
}

func (s *Server) setPermissionLocked(user, vhost string, p Permission) (bool, error) {
	if s.Vhost(vhost) == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
	}
	if _, err := s.User(user); err != nil {
		return false, err
	}
	created := s.users.permission(user, vhost) == nil
	if err := s.users.setPermission(user, vhost, p); err != nil {
		if _, bad := compilePermission(p); bad != nil {
			return false, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return false, err
	}
	return created, nil
}

// ClearPermission removes a user's permissions on a vhost.
func (s *Server) ClearPermission(user, vhost string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	if s.users.permission(user, vhost) == nil {
		return fmt.Errorf("%w: no permissions of %q on vhost %q", ErrNotFound, user, vhost)
	}
	if err := s.users.clearPermission(user, vhost); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// TopicPermissions returns every topic permission, sorted by user, vhost and exchange.
func (s *Server) TopicPermissions() []TopicPermission {
	out := s.users.topicPermissions()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.User != b.User {
			return a.User < b.User
		}
		if a.Vhost != b.Vhost {
			return a.Vhost < b.Vhost
		}
		return a.Exchange < b.Exchange
	})
	return out
}

// SetTopicPermission stores a topic permission and reports whether it is
// new. It applies to the user's next publish or bind on open channels too.
func (s *Server) SetTopicPermission(tp TopicPermission) (created bool, err error) {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.setTopicPermissionLocked(tp)
}

func (s *Server) setTopicPermissionLocked(tp TopicPermission) (bool, error) {
	if s.Vhost(tp.Vhost) == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchVhost, tp.Vhost)
	}
	if _, err := s.User(tp.User); err != nil {
		return false, err
	}
	if tp.Exchange == "" {
		return false, fmt.Errorf("%w: topic permission without an exchange", ErrInvalid)
	}
	return s.users.setTopicPermission(tp)
}

// ClearTopicPermissions removes a user's topic permissions on a vhost: all
// of them, or the one for exchange when it is not "".
func (s *Server) ClearTopicPermissions(user, vhost, exchange string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	n, err := s.users.clearTopicPermissions(user, vhost, exchange)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: no topic permissions of %q on vhost %q", ErrNotFound, user, vhost)
	}
	return nil
}
