package route

import "github.com/warrenmq/warren/amqp"

// Exchange types that route each message to at most one destination, chosen
// by hashing or at random, rather than to every matching binding.
const (
	KindConsistentHash = "x-consistent-hash"
	KindModulusHash    = "x-modulus-hash"
	KindRandom         = "x-random"
	KindLocalRandom    = "x-local-random"
)

// Delivery is what a Picker looks at: the whole message at once, where the
// other matchers are asked once per routing key.
type Delivery struct {
	// RoutingKey is the key the message was published with.
	RoutingKey string
	// CC are the CC then the BCC header routing keys, in header order.
	CC []string
	// Headers are the message headers; read only if Reads says so.
	Headers amqp.Table
	// Properties are the decoded basic properties; read only if Reads says
	// so. Nil means none were sent.
	Properties *amqp.Properties
}

// Reads says which parts of a Delivery beyond its routing keys a Picker needs,
// so that the caller decodes message properties only when they are used.
type Reads uint8

// Parts of a Delivery.
const (
	ReadsHeaders Reads = 1 << iota
	ReadsProperties
)

// Picker is a Matcher that routes a message to at most one destination. Its
// Match(key, headers, visit) picks for a Delivery with just that routing key
// and those headers.
type Picker[D comparable] interface {
	Matcher[D]
	// Pick calls visit at most once, with the destination chosen for d.
	Pick(d *Delivery, visit func(D))
	// Reads reports which optional parts of a Delivery Pick uses.
	Reads() Reads
}

// IsPickerKind reports whether New returns a Picker for kind.
func IsPickerKind(kind string) bool {
	switch kind {
	case KindConsistentHash, KindModulusHash, KindRandom, KindLocalRandom:
		return true
	}
	return false
}
