package server

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"sort"

	"github.com/warrenmq/warren/amqp"
)

// User limits are RabbitMQ's max-connections and max-channels of a user,
// kept on the user (PutUser.Limits) and counted over all its connections
// and channels on the node. A negative limit is none and 0 allows nothing.
// The counts are kept whether or not a limit is set, so a limit set later
// sees the connections and channels already open.

// intValue reads an integer from a decoded JSON value, clamped to int64.
func intValue(v any) (int64, bool) {
	n, ok := erlTermOf(v).(termInt)
	if !ok {
		return 0, false
	}
	i, ok := new(big.Int).SetString(string(n), 10)
	switch {
	case !ok:
		return 0, false
	case !i.IsInt64() && i.Sign() < 0:
		return math.MinInt64, true
	case !i.IsInt64():
		return math.MaxInt64, true
	}
	return i.Int64(), true
}

// limitsOf returns a copy of a user's limits (nil when none).
func (u *users) limitsOf(name string) map[string]int64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if a := u.accounts[name]; a != nil {
		return maps.Clone(a.limits)
	}
	return nil
}

// limit returns a user's effective limit: noLimit unless set to 0 or more.
func (u *users) limit(name, key string) int64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	a := u.accounts[name]
	if a == nil {
		return noLimit
	}
	if n, ok := a.limits[key]; ok && n >= 0 {
		return n
	}
	return noLimit
}

// setLimits replaces a user's limits, keeping the rest of the user.
func (u *users) setLimits(name string, limits map[string]int64) error {
	u.mu.RLock()
	a := u.accounts[name]
	var c PutUser
	if a != nil {
		c = PutUser{Name: a.name, PasswordHash: a.passwordHash, Tags: a.tags, LoopbackOnly: a.loopbackOnly}
	}
	u.mu.RUnlock()
	if a == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchUser, name)
	}
	if len(limits) > 0 {
		c.Limits = limits
	}
	return u.apply(c)
}

// UserLimits is a user with the limits set on it.
type UserLimits struct {
	User   string
	Limits map[string]int64
}

// AllUserLimits returns the users that have limits, by name.
func (s *Server) AllUserLimits() []UserLimits {
	s.users.mu.RLock()
	var out []UserLimits
	for _, a := range s.users.accounts {
		if len(a.limits) > 0 {
			out = append(out, UserLimits{User: a.name, Limits: maps.Clone(a.limits)})
		}
	}
	s.users.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out
}

// UserLimitsOf returns the limits of a user ({} when none).
func (s *Server) UserLimitsOf(user string) (map[string]int64, error) {
	if s.users.get(user) == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchUser, user)
	}
	if l := s.users.limitsOf(user); l != nil {
		return l, nil
	}
	return map[string]int64{}, nil
}

// validateUserLimits checks limits as rabbit_auth_backend_internal does;
// RabbitMQ reports the first error alone, without "Validation failed".
func validateUserLimits(limits map[string]any) error {
	if errs := proplist(paramCtx{}, "user-limits", limitConstraints(userLimitKeys), limits); len(errs) > 0 {
		return &ParameterError{Reason: errs[0]}
	}
	return nil
}

// SetUserLimit sets one limit of a user (max-connections, max-channels).
func (s *Server) SetUserLimit(user, name string, value any) error {
	add := map[string]any{name: value}
	if err := validateUserLimits(add); err != nil {
		return err
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	return s.addUserLimits(user, add)
}

// addUserLimits sets validated limits on a user, keeping its others. The
// caller holds adminState.mu.
func (s *Server) addUserLimits(user string, add map[string]any) error {
	limits := s.users.limitsOf(user)
	if limits == nil {
		limits = map[string]int64{}
	}
	for k, v := range add {
		limits[k], _ = intValue(v)
	}
	return s.users.setLimits(user, limits)
}

// ClearUserLimit removes one limit of a user, or with name "all" every one.
func (s *Server) ClearUserLimit(user, name string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	limits := s.users.limitsOf(user)
	if name == "all" {
		limits = nil
	}
	delete(limits, name)
	return s.users.setLimits(user, limits)
}

// reserveUserSlot counts the connection against its user's max-connections
// at connection.open, after the vhost's limit, as RabbitMQ checks them.
func (c *conn) reserveUserSlot() *amqp.Error {
	s, name := c.srv, c.user.name
	max := s.users.limit(name, "max-connections")
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	if max != noLimit && int64(s.userConns[name]) >= max {
		return amqp.NewError(amqp.NotAllowed, (&amqp.ConnectionOpen{}).ID(),
			"connection refused for user '%s': user connection limit (%d) is reached", name, max)
	}
	s.userConns[name]++
	c.userSlot = true
	return nil
}

// releaseUserSlot undoes reserveUserSlot when the connection ends.
func (c *conn) releaseUserSlot() {
	if !c.userSlot {
		return
	}
	c.userSlot = false
	decrementCount(c.srv, c.srv.userConns, c.user.name)
}

// decrementCount lowers a count under limitsMu, deleting it at zero so the
// map is bounded by the users in use.
func decrementCount(s *Server, counts map[string]int, key string) {
	s.limitsMu.Lock()
	if counts[key]--; counts[key] <= 0 {
		delete(counts, key)
	}
	s.limitsMu.Unlock()
}

// reserveChannelSlot counts a channel being opened against its user's
// max-channels; RabbitMQ refuses the channel.open with a connection error.
func (c *conn) reserveChannelSlot(ch *channel) *amqp.Error {
	s, name := c.srv, c.user.name
	max := s.users.limit(name, "max-channels")
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	if max != noLimit && int64(s.userChannels[name]) >= max {
		return amqp.NewError(amqp.NotAllowed, (&amqp.ChannelOpen{}).ID(),
			"number of channels opened for user '%s' has reached the maximum allowed user limit of (%d)", name, max)
	}
	s.userChannels[name]++
	ch.userSlot = true
	return nil
}

// forgetChannel removes a closed channel from its connection and from its
// user's channel count.
func (c *conn) forgetChannel(ch *channel) {
	delete(c.channels, ch.id)
	if ch.userSlot {
		ch.userSlot = false
		decrementCount(c.srv, c.srv.userChannels, c.user.name)
	}
}

// limitsJSON is a user's limits as a definitions file has them.
func limitsJSON(limits map[string]int64) map[string]any {
	out := make(map[string]any, len(limits))
	for k, v := range limits {
		out[k] = v
	}
	return out
}
