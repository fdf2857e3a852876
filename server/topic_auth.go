package server

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/warrenmq/warren/amqp"
)

// Topic permissions, as RabbitMQ's internal auth backend checks them: on a
// topic exchange a user with a topic permission for it may publish only with
// routing keys its write expression matches and bind (queue.bind/unbind,
// exchange.bind/unbind with it as source) only with keys its read expression
// matches. A user without a topic permission for the exchange is not
// restricted.

// TopicPermission restricts, for one topic exchange, the routing keys a user
// may publish with (Write) and bind with (Read).
type TopicPermission struct {
	User     string `json:"user"`
	Vhost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// compiledTopic is a TopicPermission with its expressions expanded and
// compiled. Expansion depends only on the user and vhost, which are part of
// the permission's key, so it is compiled once when the permission is set.
type compiledTopic struct {
	TopicPermission
	write, read *regexp.Regexp
}

type topicKey struct{ vhost, exchange string }

func compileTopic(tp TopicPermission) (*compiledTopic, error) {
	ct := &compiledTopic{TopicPermission: tp}
	var err error
	if ct.write, err = regexp.Compile(expandTopicPattern(tp.Write, tp.User, tp.Vhost)); err != nil {
		return nil, fmt.Errorf("write %q: %w", tp.Write, err)
	}
	if ct.read, err = regexp.Compile(expandTopicPattern(tp.Read, tp.User, tp.Vhost)); err != nil {
		return nil, fmt.Errorf("read %q: %w", tp.Read, err)
	}
	return ct, nil
}

// expandTopicPattern applies RabbitMQ's variable expansion: {username} and
// {vhost} become the user's and vhost's names. RabbitMQ substitutes them raw;
// Warren quotes them, so a name such as "a.b" or "x|.*" stands for itself and
// cannot widen the expression. AMQP 0-9-1 connections have no {client_id} in
// RabbitMQ 3.10 (only MQTT sets it): it stays literal text, as there. An
// empty expression matches only the empty routing key, as in RabbitMQ
// (unlike vhost permissions, where it matches nothing).
func expandTopicPattern(pattern, user, vhost string) string {
	if pattern == "" {
		return "^$"
	}
	return strings.NewReplacer("{username}", regexp.QuoteMeta(user), "{vhost}", regexp.QuoteMeta(vhost)).Replace(pattern)
}

// allows reports whether the permission lets kind (accessWrite or accessRead) use key.
func (ct *compiledTopic) allows(kind access, key string) bool {
	if kind == accessWrite {
		return ct.write.MatchString(key)
	}
	return ct.read.MatchString(key)
}

func topicRefused(key, exchange, vhost, user string, method uint32) *amqp.Error {
	return amqp.NewError(amqp.AccessRefused, method, "access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'",
		key, exchange, vhost, user)
}

// setTopicPermission stores and installs a topic permission and reports
// whether the user had none for that exchange before. Callers serialise
// administrative changes (adminState.mu), so the user cannot vanish between
// the check and the install.
func (u *users) setTopicPermission(tp TopicPermission) (bool, error) {
	if _, err := compileTopic(tp); err != nil {
		return false, fmt.Errorf("%w: topic permission of %q on vhost %q: %w", ErrInvalid, tp.User, tp.Vhost, err)
	}
	if u.get(tp.User) == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchUser, tp.User)
	}
	existed := u.topicPermission(tp.User, tp.Vhost, tp.Exchange) != nil
	if err := u.apply(SetTopicPermission{TopicPermission: tp}); err != nil {
		return false, err
	}
	return !existed, nil
}

// installTopic sets a topic permission in memory (Server.apply and the
// loader); a permission of a user that does not exist is ignored.
func (u *users) installTopic(tp TopicPermission) error {
	ct, err := compileTopic(tp)
	if err != nil {
		return fmt.Errorf("topic permission of %q on %q: %w", tp.User, tp.Vhost, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if a := u.accounts[tp.User]; a != nil {
		if a.topics == nil {
			a.topics = make(map[topicKey]*compiledTopic)
		}
		a.topics[topicKey{tp.Vhost, tp.Exchange}] = ct
	}
	u.generation.Add(1)
	return nil
}

// clearTopicPermissions removes a user's topic permissions on vhost: all of
// them, or only the one for exchange when it is not "". It returns how many
// it removed.
func (u *users) clearTopicPermissions(user, vhost, exchange string) (int, error) {
	n := 0
	u.mu.RLock()
	if a := u.accounts[user]; a != nil {
		for k := range a.topics {
			if k.vhost == vhost && (exchange == "" || k.exchange == exchange) {
				n++
			}
		}
	}
	u.mu.RUnlock()
	if n == 0 {
		return 0, nil
	}
	if err := u.apply(ClearTopicPermissions{User: user, Vhost: vhost, Exchange: exchange}); err != nil {
		return 0, fmt.Errorf("removing topic permissions of %q on %q: %w", user, vhost, err)
	}
	return n, nil
}

// dropTopics removes topic permissions from memory (Server.apply).
func (u *users) dropTopics(c ClearTopicPermissions) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if a := u.accounts[c.User]; a != nil {
		for k := range a.topics {
			if k.vhost == c.Vhost && (c.Exchange == "" || k.exchange == c.Exchange) {
				delete(a.topics, k)
			}
		}
	}
	u.generation.Add(1)
}

// topicPermission returns the user's compiled topic permission for an
// exchange of vhost, or nil when there is none (every key is allowed).
func (u *users) topicPermission(user, vhost, exchange string) *compiledTopic {
	u.mu.RLock()
	defer u.mu.RUnlock()
	if a := u.accounts[user]; a != nil {
		return a.topics[topicKey{vhost, exchange}]
	}
	return nil
}

// topicPermissions returns every topic permission, unsorted.
func (u *users) topicPermissions() []TopicPermission {
	u.mu.RLock()
	defer u.mu.RUnlock()
	var out []TopicPermission
	for _, a := range u.accounts {
		for _, ct := range a.topics {
			out = append(out, ct.TopicPermission)
		}
	}
	return out
}

// loadTopicPermission installs a topic permission read from meta.db.
func (u *users) loadTopicPermission(tp TopicPermission) error { return u.installTopic(tp) }

// authorizeTopic checks the user's topic permission for a binding key on a
// topic exchange (read) — queue.bind/unbind and exchange.bind/unbind with ex
// as source. ex may be nil (the exchange does not exist): the bind itself
// then fails with 404, as in RabbitMQ.
func (ch *channel) authorizeTopic(ex *Exchange, key string, kind access, method uint32) *amqp.Error {
	if ex == nil || ex.kind != kindTopic {
		return nil
	}
	c := ch.conn
	if tp := c.srv.users.topicPermission(c.user.name, c.vhost.name, ex.name); tp != nil && !tp.allows(kind, key) {
		return topicRefused(key, ex.name, c.vhost.name, c.user.name, method)
	}
	return nil
}

// authorizeTopicPublish checks write topic permission for a publish. It
// memoises the permission of the last topic exchange published to and the
// last key it allowed, so steady publishing runs neither a map lookup under
// users.mu nor a regexp per message; any permission change drops the memo.
// Publishes to other exchange types cost one comparison.
func (ch *channel) authorizeTopicPublish(ex *Exchange, key string) *amqp.Error {
	if ex.kind != kindTopic {
		return nil
	}
	c := ch.conn
	memo := &ch.pubTopic
	if gen := c.srv.users.generation.Load(); !memo.set || memo.gen != gen || memo.exchange != ex.name {
		*memo = pubTopicMemo{set: true, gen: gen, exchange: ex.name,
			perm: c.srv.users.topicPermission(c.user.name, c.vhost.name, ex.name)}
	}
	if memo.perm == nil || (memo.keyOK && memo.key == key) {
		return nil
	}
	if !memo.perm.allows(accessWrite, key) {
		return topicRefused(key, ex.name, c.vhost.name, c.user.name, methodBasicPublish)
	}
	memo.key, memo.keyOK = key, true
	return nil
}

// pubTopicMemo is a channel's memo of its last topic permission check on publish.
type pubTopicMemo struct {
	set      bool
	gen      uint64
	exchange string
	perm     *compiledTopic // nil: no topic permission, every key allowed
	key      string         // the last key perm allowed, when keyOK
	keyOK    bool
}

// AuthorizeTopic checks user's topic permission on an exchange of vhost for
// a routing key, for the management API's publish (AccessWrite) and binding
// (AccessRead) endpoints. It returns nil when allowed, when the exchange
// does not exist or is not a topic exchange, or when the user has no topic
// permission for it; else RabbitMQ's 403.
func (s *Server) AuthorizeTopic(user, vhost, exchange, routingKey string, a Access) *amqp.Error {
	vh := s.Vhost(vhost)
	if vh == nil {
		return nil
	}
	ex := vh.exchange(exchange)
	if ex == nil || ex.kind != kindTopic {
		return nil
	}
	if tp := s.users.topicPermission(user, vhost, exchange); tp != nil && !tp.allows(access(a), routingKey) {
		method := methodQueueBind
		if a == AccessWrite {
			method = methodBasicPublish
		}
		return topicRefused(routingKey, exchange, vhost, user, method)
	}
	return nil
}
