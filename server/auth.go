package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
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
	perms        map[string]*compiledPermission // by vhost
	topics       map[topicKey]*compiledTopic    // topic permissions (topic_auth.go)
}

// UserInfo describes a user for the management API. It never carries the password.
type UserInfo struct {
	Name         string
	PasswordHash string
	Tags         []string
}

// users is the user database. Its lock is a leaf: nothing else is locked under it.
type users struct {
	// meta persists users and permissions; nil without a data directory.
	meta     *metaStore
	mu       sync.RWMutex
	accounts map[string]*account
	// generation changes whenever a user or permission changes, so channels
	// can cache permission checks.
	generation atomic.Uint64
}

func newUsers() *users { return &users{accounts: make(map[string]*account)} }

func (u *users) put(name, hash string, tags []string, loopbackOnly bool) error {
	if !validPasswordHash(hash) {
		return fmt.Errorf("user %q: %w", name, ErrBadPasswordHash)
	}
	if u.meta != nil {
		if err := u.meta.put(bucketUsers, []byte(name), metaUser{Name: name, PasswordHash: hash, Tags: tags, LoopbackOnly: loopbackOnly}); err != nil {
			return fmt.Errorf("storing user %q: %w", name, err)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.accounts[name]
	if a == nil {
		a = &account{name: name, perms: make(map[string]*compiledPermission)}
		u.accounts[name] = a
	}
	a.passwordHash = hash
	a.tags = slices.Clone(tags)
	a.loopbackOnly = loopbackOnly
	u.generation.Add(1)
	return nil
}

func (u *users) setPermission(user, vhost string, p Permission) error {
	cp, err := compilePermission(p)
	if err != nil {
		return fmt.Errorf("permission of %q on vhost %q: %w", user, vhost, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.accounts[user]
	if a == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchUser, user)
	}
	if u.meta != nil {
		if err := u.meta.put(bucketPermissions, metaKey(user, vhost), metaPermission{User: user, Vhost: vhost, Permission: p}); err != nil {
			return fmt.Errorf("storing permission of %q on %q: %w", user, vhost, err)
		}
	}
	a.perms[vhost] = cp
	u.generation.Add(1)
	return nil
}

func (u *users) clearPermission(user, vhost string) error {
	if u.meta != nil {
		if err := u.meta.delete(bucketPermissions, metaKey(user, vhost)); err != nil {
			return fmt.Errorf("removing permission of %q on %q: %w", user, vhost, err)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if a := u.accounts[user]; a != nil {
		delete(a.perms, vhost)
	}
	u.generation.Add(1)
	return nil
}

// authenticate returns the account for name if password matches.
func (u *users) authenticate(name, password string) (*account, bool) {
	u.mu.RLock()
	a := u.accounts[name]
	u.mu.RUnlock()
	if a == nil || !checkPassword(a.passwordHash, password) {
		return nil, false
	}
	return a, true
}

// permission returns the user's compiled permission on vhost, or nil.
func (u *users) permission(user, vhost string) *compiledPermission {
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
		out = append(out, UserInfo{Name: a.name, PasswordHash: a.passwordHash, Tags: slices.Clone(a.tags)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (u *users) remove(name string) (bool, error) {
	if u.meta != nil {
		// One transaction: a crash must not leave permissions that a later
		// user of the same name would inherit.
		var b metaBatch
		b.delete(bucketUsers, []byte(name))
		b.deletePrefix(bucketPermissions, append([]byte(name), 0))
		b.deletePrefix(bucketTopicPermissions, append([]byte(name), 0))
		if err := u.meta.commit(&b); err != nil {
			return false, fmt.Errorf("removing user %q with its permissions: %w", name, err)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.accounts[name]
	delete(u.accounts, name)
	u.generation.Add(1)
	return ok, nil
}

// dropVhost forgets every permission and topic permission on a deleted
// vhost; meta.db no longer has them (vhostDeletes).
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
		loopbackOnly: m.LoopbackOnly, perms: make(map[string]*compiledPermission)}
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
