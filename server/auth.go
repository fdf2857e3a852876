package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// ErrBadPasswordHash means a configured password hash is not RabbitMQ's base64
// salt-and-SHA-256 format.
var ErrBadPasswordHash = errors.New("server: password hash is not base64 of 4-byte salt + SHA-256")

// HashPassword returns RabbitMQ's rabbit_password_hashing_sha256 format: base64
// of a random 4-byte salt followed by SHA-256(salt ‖ password). Hashes exported
// from RabbitMQ verify here and the other way round.
func HashPassword(password string) string {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		panic(fmt.Sprintf("server: crypto/rand failed: %v", err)) // the OS source never fails on Linux
	}
	return hashWithSalt(salt[:], password)
}

func hashWithSalt(salt []byte, password string) string {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(h.Sum(append([]byte(nil), salt...)))
}

// checkPassword verifies password against a hash made by HashPassword.
func checkPassword(hash, password string) bool {
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil || len(raw) != 4+sha256.Size {
		return checkOtherHash(raw, password)
	}
	want := hashWithSalt(raw[:4], password)
	return subtle.ConstantTimeCompare([]byte(want), []byte(hash)) == 1
}

// compiledPermission is a Permission with its expressions compiled.
type compiledPermission struct {
	Permission
	configure, write, read *regexp.Regexp
}

func compilePermission(p Permission) (*compiledPermission, error) {
	cp := &compiledPermission{Permission: p}
	var err error
	// RabbitMQ matches unanchored; an empty expression matches nothing.
	if cp.configure, err = regexp.Compile(p.Configure); err != nil {
		return nil, fmt.Errorf("configure %q: %w", p.Configure, err)
	}
	if cp.write, err = regexp.Compile(p.Write); err != nil {
		return nil, fmt.Errorf("write %q: %w", p.Write, err)
	}
	if cp.read, err = regexp.Compile(p.Read); err != nil {
		return nil, fmt.Errorf("read %q: %w", p.Read, err)
	}
	return cp, nil
}

// Access kinds checked against a user's permissions.
type access int

const (
	accessConfigure access = iota
	accessWrite
	accessRead
)

func (a access) String() string {
	return [...]string{"configure", "write", "read"}[a]
}

// allows reports whether the permission grants kind on a resource name.
// Like RabbitMQ, an empty expression grants nothing.
func (cp *compiledPermission) allows(kind access, name string) bool {
	var re *regexp.Regexp
	var src string
	switch kind {
	case accessConfigure:
		re, src = cp.configure, cp.Configure
	case accessWrite:
		re, src = cp.write, cp.Write
	default:
		re, src = cp.read, cp.Read
	}
	if src == "" {
		return false
	}
	// The default exchange is named "amq.default" for permission checks, as in RabbitMQ.
	if name == "" {
		name = "amq.default"
	}
	return re.MatchString(name)
}

// account is a user as the server keeps it.
type account struct {
	name         string
	passwordHash string
	tags         []string
	loopbackOnly bool
	limits       map[string]int64               // max-connections, max-channels (user_limits.go)
	perms        map[string]*compiledPermission // by vhost
	topics       map[topicKey]*compiledTopic    // topic permissions (topic_auth.go)
}

// UserInfo describes a user for the management API. It never carries the password.
type UserInfo struct {
	Name         string
	PasswordHash string
	Tags         []string
	Limits       map[string]int64
}

// users is the user database. Its lock is a leaf: nothing else is locked under it.
type users struct {
	// apply is Server.apply: every change goes through it as a Command,
	// which stores it and then calls the install and drop methods below.
	apply    func(Command) error
	mu       sync.RWMutex
	accounts map[string]*account
	// generation changes whenever a user or permission changes, so channels
	// can cache permission checks.
	generation atomic.Uint64
	// internal is the broker's own account (internal_user.go), kept out of
	// accounts so it is never listed, exported or stored.
	internal         *account
	internalPassword string
}

func newUsers() *users {
	internal, password := newInternalAccount()
	return &users{accounts: make(map[string]*account), internal: internal, internalPassword: password}
}

func (u *users) put(name, hash string, tags []string, loopbackOnly bool) error {
	if name == InternalUser {
		return errReservedUser()
	}
	if !validPasswordHash(hash) {
		return fmt.Errorf("user %q: %w", name, ErrBadPasswordHash)
	}
	// A user's limits are kept when it is replaced, as RabbitMQ's put_user
	// keeps them; the caller holds adminState.mu, so they cannot change
	// meanwhile.
	return u.apply(PutUser{Name: name, PasswordHash: hash, Tags: slices.Clone(tags), LoopbackOnly: loopbackOnly,
		Limits: u.limitsOf(name)})
}

// installUser creates or updates a user in memory (Server.apply).
func (u *users) installUser(c PutUser) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.accounts[c.Name]
	if a == nil {
		a = &account{name: c.Name, perms: make(map[string]*compiledPermission)}
		u.accounts[c.Name] = a
	}
	a.passwordHash = c.PasswordHash
	a.tags = slices.Clone(c.Tags)
	a.loopbackOnly = c.LoopbackOnly
	a.limits = maps.Clone(c.Limits)
	u.generation.Add(1)
}

func (u *users) setPermission(user, vhost string, p Permission) error {
	if _, err := compilePermission(p); err != nil {
		return fmt.Errorf("permission of %q on vhost %q: %w", user, vhost, err)
	}
	if u.get(user) == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchUser, user)
	}
	return u.apply(SetPermission{User: user, Vhost: vhost, Permission: p})
}

// installPermission sets a permission in memory (Server.apply); the caller
// validated it.
func (u *users) installPermission(c SetPermission) error {
	cp, err := compilePermission(c.Permission)
	if err != nil {
		return fmt.Errorf("permission of %q on vhost %q: %w", c.User, c.Vhost, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.accounts[c.User]
	if a == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchUser, c.User)
	}
	a.perms[c.Vhost] = cp
	u.generation.Add(1)
	return nil
}

func (u *users) clearPermission(user, vhost string) error {
	return u.apply(ClearPermission{User: user, Vhost: vhost})
}

// dropPermission removes a permission from memory (Server.apply).
func (u *users) dropPermission(c ClearPermission) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if a := u.accounts[c.User]; a != nil {
		delete(a.perms, c.Vhost)
	}
	u.generation.Add(1)
}

// authenticate returns the account for name if password matches.
func (u *users) authenticate(name, password string) (*account, bool) {
	a := u.get(name)
	if a == nil || !checkPassword(a.passwordHash, password) {
		return nil, false
	}
	return a, true
}

// permission returns the user's compiled permission on vhost, or nil.
func (u *users) permission(user, vhost string) *compiledPermission {
	if user == InternalUser {
		return fullAccess
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	if a := u.accounts[user]; a != nil {
		return a.perms[vhost]
	}
	return nil
}

func (u *users) list() []UserInfo {
	u.mu.RLock()
	defer u.mu.RUnlock()
	out := make([]UserInfo, 0, len(u.accounts))
	for _, a := range u.accounts {
		out = append(out, UserInfo{Name: a.name, PasswordHash: a.passwordHash, Tags: slices.Clone(a.tags), Limits: maps.Clone(a.limits)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (u *users) remove(name string) (bool, error) {
	found := u.get(name) != nil
	if err := u.apply(DeleteUser{Name: name}); err != nil {
		return false, fmt.Errorf("removing user %q with its permissions: %w", name, err)
	}
	return found, nil
}

// dropUser removes a user with its permissions from memory (Server.apply).
func (u *users) dropUser(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.accounts, name)
	u.generation.Add(1)
}

// dropVhost forgets every permission and topic permission on a deleted
// vhost; meta.db no longer has them (DeleteVhost.writes).
func (u *users) dropVhost(vhost string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, a := range u.accounts {
		delete(a.perms, vhost)
		for k := range a.topics {
			if k.vhost == vhost {
				delete(a.topics, k)
			}
		}
	}
	u.generation.Add(1)
}

// load installs a user read from meta.db.
func (u *users) load(m metaUser) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.accounts[m.Name] = &account{name: m.Name, passwordHash: m.PasswordHash, tags: m.Tags,
		loopbackOnly: m.LoopbackOnly, limits: m.Limits, perms: make(map[string]*compiledPermission)}
}

// loadPermission installs a permission read from meta.db.
func (u *users) loadPermission(m metaPermission) error {
	cp, err := compilePermission(m.Permission)
	if err != nil {
		return fmt.Errorf("permission of %q on %q: %w", m.User, m.Vhost, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if a := u.accounts[m.User]; a != nil {
		a.perms[m.Vhost] = cp
	}
	return nil
}
