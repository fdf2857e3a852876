package server

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// Definitions are the contents of a RabbitMQ definitions file as Go values:
// what GET /api/definitions exports and POST imports. The mgmt package maps
// them to and from RabbitMQ's JSON.
type Definitions struct {
	Users            []UserDefinition
	Vhosts           []VhostDefinition
	Permissions      []PermissionInfo
	TopicPermissions []TopicPermission
	// Parameters are runtime parameters other than operator policies, kept
	// opaque (federation upstreams, shovels, vhost limits, ...).
	Parameters []Parameter
	// GlobalParameters include cluster_name, which sets the cluster name.
	GlobalParameters []Parameter
	Policies         []Policy
	OperatorPolicies []Policy
	Queues           []QueueDefinition
	Exchanges        []ExchangeDefinition
	Bindings         []BindingInfo
}

// UserDefinition is a user with its password hash, as definitions carry it.
type UserDefinition struct {
	Name             string
	PasswordHash     string // "" for a user without a password
	HashingAlgorithm string // "" means rabbit_password_hashing_sha256
	Tags             []string
	// Limits are the user's limits as the file has them (validated as
	// user limits); nil when it has none, which keeps a user's limits.
	Limits map[string]any
}

// VhostDefinition is a vhost with its metadata.
type VhostDefinition struct {
	Name string
	VhostMeta
}

// QueueDefinition is a queue of a vhost.
type QueueDefinition struct {
	Vhost string
	QueueSpec
}

// ExchangeDefinition is an exchange of a vhost.
type ExchangeDefinition struct {
	Vhost string
	ExchangeSpec
}

// ExportDefinitions returns the node's definitions, or those of one vhost
// when vhost is not "" (then without users, vhosts and global parameters, as
// RabbitMQ's per-vhost export). Exclusive queues and the built-in exchanges
// are left out; they cannot be re-created by an import.
func (s *Server) ExportDefinitions(vhost string) (Definitions, error) {
	var d Definitions
	if vhost != "" && s.Vhost(vhost) == nil {
		return d, fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
	}
	inScope := func(vh string) bool { return vhost == "" || vh == vhost }
	if vhost == "" {
		for _, u := range s.userHashes() {
			d.Users = append(d.Users, UserDefinition{
				Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: HashAlgorithm(u.PasswordHash), Tags: u.Tags,
				Limits: limitsJSON(u.Limits),
			})
		}
		for _, vh := range s.Vhosts() {
			d.Vhosts = append(d.Vhosts, VhostDefinition{Name: vh.name, VhostMeta: vh.Meta()})
		}
		for _, p := range s.Permissions() {
			d.Permissions = append(d.Permissions, p)
		}
		for _, tp := range s.TopicPermissions() {
			d.TopicPermissions = append(d.TopicPermissions, tp)
		}
		d.GlobalParameters = s.GlobalParameters()
	}
	for _, p := range s.Parameters() {
		if inScope(p.Vhost) {
			d.Parameters = append(d.Parameters, p)
		}
	}
	d.Policies = s.Policies(vhost, false)
	d.OperatorPolicies = s.Policies(vhost, true)
	for _, vh := range s.Vhosts() {
		if !inScope(vh.name) {
			continue
		}
		exclusive := make(map[string]bool)
		for _, q := range vh.Queues() {
			if q.exclusive {
				exclusive[q.name] = true
				continue
			}
			d.Queues = append(d.Queues, QueueDefinition{Vhost: vh.name, QueueSpec: QueueSpec{
				Name: q.name, Durable: q.durable, AutoDelete: q.autoDelete, Arguments: q.args,
			}})
		}
		for _, ex := range vh.Exchanges() {
			if ex.name == "" || strings.HasPrefix(ex.name, "amq.") {
				continue
			}
			d.Exchanges = append(d.Exchanges, ExchangeDefinition{Vhost: vh.name, ExchangeSpec: ExchangeSpec{
				Name: ex.name, Type: ex.kind, Durable: ex.durable, AutoDelete: ex.autoDelete,
				Internal: ex.internal, Arguments: ex.args,
			}})
		}
		for _, b := range vh.Bindings() {
			if b.Source == "" || (b.DestinationType == DestQueue && exclusive[b.Destination]) {
				continue
			}
			d.Bindings = append(d.Bindings, b)
		}
	}
	return d, nil
}

// ImportDefinitions validates a whole definitions file and then applies it:
// vhosts, users, permissions, parameters and policies are created or
// overwritten; queues, exchanges and bindings that already exist are kept as
// they are, as RabbitMQ does. With vhost not "" every object is imported
// into that vhost and users, vhosts and permissions are ignored. Nothing is
// applied when validation fails (an ErrInvalid naming the first problem), and
// nothing stays when applying fails part way (see definitions_apply.go).
func (s *Server) ImportDefinitions(d Definitions, vhost string) error {
	if vhost != "" {
		if s.Vhost(vhost) == nil {
			return fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
		}
		d = retarget(d, vhost)
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	if err := s.validateDefinitions(&d); err != nil {
		return err
	}
	return s.applyDefinitions(&d)
}

// retarget moves every object of a per-vhost import into vhost.
func retarget(d Definitions, vhost string) Definitions {
	out := Definitions{Parameters: slices.Clone(d.Parameters)}
	for i := range out.Parameters {
		out.Parameters[i].Vhost = vhost
	}
	for _, p := range d.Policies {
		p.Vhost = vhost
		out.Policies = append(out.Policies, p)
	}
	for _, p := range d.OperatorPolicies {
		p.Vhost = vhost
		out.OperatorPolicies = append(out.OperatorPolicies, p)
	}
	for _, q := range d.Queues {
		q.Vhost = vhost
		out.Queues = append(out.Queues, q)
	}
	for _, x := range d.Exchanges {
		x.Vhost = vhost
		out.Exchanges = append(out.Exchanges, x)
	}
	for _, b := range d.Bindings {
		b.Vhost = vhost
		out.Bindings = append(out.Bindings, b)
	}
	return out
}

// defIndex is what exists after an import: the server's objects plus the
// file's, for checking references between them.
type defIndex struct {
	vhosts    map[string]bool
	users     map[string]bool
	exchanges map[string]string // defKey → type
	queues    map[string]bool   // defKey
}

// defKey identifies an exchange or queue of a vhost; it is meta.db's key of
// the pair, which two pairs never share (a NUL may be in either name).
func defKey(vhost, name string) string { return string(metaKey(vhost, name)) }

func (s *Server) indexDefinitions(d *Definitions) defIndex {
	ix := defIndex{vhosts: map[string]bool{}, users: map[string]bool{}, exchanges: map[string]string{}, queues: map[string]bool{}}
	for _, vh := range s.Vhosts() {
		ix.vhosts[vh.name] = true
		for _, ex := range vh.Exchanges() {
			ix.exchanges[defKey(vh.name, ex.name)] = ex.kind
		}
		for _, q := range vh.Queues() {
			ix.queues[defKey(vh.name, q.name)] = true
		}
	}
	for _, u := range s.Users() {
		ix.users[u.Name] = true
	}
	for _, v := range d.Vhosts {
		ix.vhosts[v.Name] = true
		for _, name := range []string{"", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"} {
			if _, ok := ix.exchanges[defKey(v.Name, name)]; !ok {
				ix.exchanges[defKey(v.Name, name)] = builtinKind(name)
			}
		}
	}
	for _, u := range d.Users {
		ix.users[u.Name] = true
	}
	for _, x := range d.Exchanges {
		if _, ok := ix.exchanges[defKey(x.Vhost, x.Name)]; !ok {
			ix.exchanges[defKey(x.Vhost, x.Name)] = x.Type
		}
	}
	for _, q := range d.Queues {
		ix.queues[defKey(q.Vhost, q.Name)] = true
	}
	return ix
}

func builtinKind(name string) string {
	switch name {
	case "amq.fanout":
		return kindFanout
	case "amq.topic":
		return kindTopic
	case "amq.headers", "amq.match":
		return kindHeaders
	}
	return kindDirect
}

// invalidDef wraps a validation problem with the object it concerns.
func invalidDef(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
}

// validateDefinitions checks every object of d against the server and the
// rest of the file, before anything is applied.
func (s *Server) validateDefinitions(d *Definitions) error {
	ix := s.indexDefinitions(d)
	if err := validateAccounts(d, ix); err != nil {
		return err
	}
	for _, p := range d.Parameters {
		if p.Component == "" || p.Name == "" {
			return invalidDef("parameter", fmt.Errorf("component and name are required"))
		}
		if p.Vhost != "" && !ix.vhosts[p.Vhost] {
			return invalidDef(fmt.Sprintf("parameter %q", p.Name), fmt.Errorf("vhost %q does not exist", p.Vhost))
		}
		if err := s.validateParameter(p, ""); err != nil {
			// RabbitMQ's text, with the parameter named as it names it.
			return &ParameterError{Reason: fmt.Sprintf("%s (%s/%s/%s)", err.Error(), p.Vhost, p.Component, p.Name)}
		}
	}
	for i, ps := range [][]Policy{d.Policies, d.OperatorPolicies} {
		for _, p := range ps {
			what := fmt.Sprintf("policy %q in vhost %q", p.Name, p.Vhost)
			if !ix.vhosts[p.Vhost] {
				return invalidDef(what, fmt.Errorf("vhost does not exist"))
			}
			if err := ValidatePolicy(p, i == 1); err != nil {
				return invalidDef(what, err)
			}
		}
	}
	for _, x := range d.Exchanges {
		if err := validateExchangeDef(x, ix); err != nil {
			return err
		}
	}
	for _, q := range d.Queues {
		what := describeQueue(q.Name, q.Vhost)
		if !ix.vhosts[q.Vhost] {
			return invalidDef(what, fmt.Errorf("vhost does not exist"))
		}
		if q.Name == "" || strings.HasPrefix(q.Name, "amq.") {
			return invalidDef(what, fmt.Errorf("queue names must be non-empty and not start with amq."))
		}
		if _, aerr := parseQueueArgs(q.Name, q.Vhost, q.Arguments); aerr != nil {
			return invalidDef(what, fmt.Errorf("%s", aerr.Text))
		}
	}
	for _, b := range d.Bindings {
		if err := validateBindingDef(b, ix); err != nil {
			return err
		}
	}
	return s.validateQueueLimits(d)
}

func validateAccounts(d *Definitions, ix defIndex) error {
	for _, v := range d.Vhosts {
		if v.Name == "" {
			return invalidDef("vhost", fmt.Errorf("name is empty"))
		}
		if err := checkDefaultQueueType(v.DefaultQueueType); err != nil {
			return invalidDef(fmt.Sprintf("vhost '%s'", v.Name), err)
		}
	}
	for _, u := range d.Users {
		if u.Name == "" {
			return invalidDef("user", fmt.Errorf("name is empty"))
		}
		if err := CheckPasswordHash(u.PasswordHash, u.HashingAlgorithm); err != nil {
			return invalidDef(fmt.Sprintf("user %q", u.Name), err)
		}
		if u.Limits == nil {
			continue
		}
		if err := validateUserLimits(u.Limits); err != nil {
			return &ParameterError{Reason: fmt.Sprintf("%s (user '%s')", err.Error(), u.Name)}
		}
	}
	for _, p := range d.Permissions {
		what := fmt.Sprintf("permissions of %q on vhost %q", p.User, p.Vhost)
		if !ix.users[p.User] || !ix.vhosts[p.Vhost] {
			return invalidDef(what, fmt.Errorf("user or vhost does not exist"))
		}
		if _, err := compilePermission(p.Permission); err != nil {
			return invalidDef(what, err)
		}
	}
	for _, tp := range d.TopicPermissions {
		what := fmt.Sprintf("topic permissions of %q on vhost %q", tp.User, tp.Vhost)
		if !ix.users[tp.User] || !ix.vhosts[tp.Vhost] || tp.Exchange == "" {
			return invalidDef(what, fmt.Errorf("user, vhost or exchange missing"))
		}
		if _, err := compileTopic(tp); err != nil {
			return invalidDef(what, err)
		}
	}
	return nil
}

func validateExchangeDef(x ExchangeDefinition, ix defIndex) error {
	what := describeExchange(x.Name, x.Vhost)
	if !ix.vhosts[x.Vhost] {
		return invalidDef(what, fmt.Errorf("vhost does not exist"))
	}
	if x.Name == "" || strings.HasPrefix(x.Name, "amq.") {
		return invalidDef(what, fmt.Errorf("exchange names must be non-empty and not start with amq."))
	}
	ex, aerr := newExchange(nil, x.Name, x.Type, x.Durable, x.AutoDelete, x.Internal, x.Arguments)
	if aerr != nil {
		return invalidDef(what, fmt.Errorf("%s", aerr.Text))
	}
	if aerr := configureExchange(ex, x.Vhost); aerr != nil {
		return invalidDef(what, fmt.Errorf("%s", aerr.Text))
	}
	return nil
}

func validateBindingDef(b BindingInfo, ix defIndex) error {
	what := fmt.Sprintf("binding from %s to %s '%s'", describeExchange(b.Source, b.Vhost), b.DestinationType, b.Destination)
	if !ix.vhosts[b.Vhost] {
		return invalidDef(what, fmt.Errorf("vhost does not exist"))
	}
	kind, ok := ix.exchanges[defKey(b.Vhost, b.Source)]
	if !ok || b.Source == "" {
		return invalidDef(what, fmt.Errorf("source exchange does not exist or is the default exchange"))
	}
	switch b.DestinationType {
	case DestQueue:
		ok = ix.queues[defKey(b.Vhost, b.Destination)]
	case DestExchange:
		_, ok = ix.exchanges[defKey(b.Vhost, b.Destination)]
		ok = ok && b.Destination != ""
	default:
		return invalidDef(what, fmt.Errorf("destination_type must be queue or exchange"))
	}
	if !ok {
		return invalidDef(what, fmt.Errorf("destination does not exist"))
	}
	if err := validateBindingArgs(kind, b.RoutingKey, b.Arguments); err != nil {
		return invalidDef(what, err)
	}
	return nil
}

// Password hashing algorithms, as RabbitMQ names them in definitions.
const (
	HashSHA256 = "rabbit_password_hashing_sha256"
	HashSHA512 = "rabbit_password_hashing_sha512"
	HashMD5    = "rabbit_password_hashing_md5"
)

// hashAlgorithms maps the decoded length of a RabbitMQ hash (4-byte salt +
// digest) to its algorithm; the three lengths differ, so a hash names its
// algorithm.
var hashAlgorithms = map[int]struct {
	name string
	new  func() hash.Hash
}{
	4 + sha256.Size: {HashSHA256, sha256.New},
	4 + sha512.Size: {HashSHA512, sha512.New},
	4 + md5.Size:    {HashMD5, md5.New},
}

// validPasswordHash reports whether hash is empty (no password) or base64 of
// a 4-byte salt and a SHA-256, SHA-512 or MD5 digest.
func validPasswordHash(hash string) bool {
	if hash == "" {
		return true
	}
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil {
		return false
	}
	_, ok := hashAlgorithms[len(raw)]
	return ok
}

// checkOtherHash verifies a password against a decoded SHA-512 or MD5
// RabbitMQ hash (checkPassword handles SHA-256 itself).
func checkOtherHash(raw []byte, password string) bool {
	alg, ok := hashAlgorithms[len(raw)]
	if !ok {
		return false
	}
	h := alg.new()
	h.Write(raw[:4])
	h.Write([]byte(password))
	return subtle.ConstantTimeCompare(h.Sum(nil), raw[4:]) == 1
}

// HashAlgorithm returns the RabbitMQ name of a hash's algorithm
// (rabbit_password_hashing_sha256 for an empty hash, as RabbitMQ reports).
func HashAlgorithm(hash string) string {
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err == nil {
		if alg, ok := hashAlgorithms[len(raw)]; ok {
			return alg.name
		}
	}
	return HashSHA256
}

// CheckPasswordHash validates a hash given with its algorithm name (empty
// means SHA-256) and returns ErrInvalid with RabbitMQ's reason when the hash
// is not base64 or does not fit the algorithm.
func CheckPasswordHash(hash, algorithm string) error {
	if hash == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(hash)
	if err != nil {
		return fmt.Errorf("%w: not_base64", ErrInvalid)
	}
	alg, ok := hashAlgorithms[len(raw)]
	if !ok || (algorithm != "" && algorithm != alg.name) {
		return fmt.Errorf("%w: password hash of %d bytes does not fit %q", ErrInvalid, len(raw), orDefault(algorithm, HashSHA256))
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
