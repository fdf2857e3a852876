package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"sync"

	"github.com/warrenmq/warren/amqp"
)

// Policies, as RabbitMQ has them: a vhost's policies each match queue and/or
// exchange names with a regular expression, and the matching policy with the
// highest priority supplies arguments the objects were not declared with.
// Operator policies are a second set, matched the same way, whose numeric
// limits cap what the user policy and the declared arguments allow.
//
// The effective arguments of a queue are computed from its declared
// x-arguments and the two matching policies whenever a policy changes and
// when the queue is declared (Vhost.policyQueueArgs, called from
// declareQueue), and applied to the running queue with Queue.reconfigure.
// For exchanges only alternate-exchange applies (Exchange.policyAlternate).
// Stream queues take only max-length-bytes, max-age and
// stream-max-segment-size-bytes, where the policy wins over the argument as
// in RabbitMQ's stream queue type (effectiveStreamArgs); they are applied to
// the running stream (applyStreamPolicy), never through Queue.reconfigure.

// Policy apply-to values; the queue-type ones are RabbitMQ 4.x's.
const (
	ApplyToQueues        = "queues"
	ApplyToExchanges     = "exchanges"
	ApplyToAll           = "all"
	ApplyToClassicQueues = "classic_queues"
	ApplyToQuorumQueues  = "quorum_queues"
	ApplyToStreams       = "streams"
)

// Policy targets: what apply-to is matched against, an exchange or a queue
// of one type.
const (
	targetExchange = "exchange"
	targetClassic  = "classic"
	targetQuorum   = "quorum"
	targetStream   = "stream"
)

// queueTarget is the policy target of a queue declared with args.
func queueTarget(args amqp.Table) string {
	switch args["x-queue-type"] {
	case "quorum":
		return targetQuorum
	case "stream":
		return targetStream
	}
	return targetClassic
}

// Policy is a policy or operator policy of a vhost. Definition values are
// JSON-like: int64 for integers, float64, string, bool, []any or map[string]any.
type Policy struct {
	Vhost      string
	Name       string
	Pattern    string
	ApplyTo    string
	Priority   int64
	Definition map[string]any
}

// compiledPolicy is a stored policy with its pattern compiled.
type compiledPolicy struct {
	Policy
	re *regexp.Regexp
}

// appliesTo reports whether the policy applies to the object name of
// target (an exchange, or a queue of one type), as RabbitMQ 4.x matches
// apply-to: "queues" and "all" take queues of every type.
func (p *compiledPolicy) appliesTo(target, name string) bool {
	var ok bool
	switch p.ApplyTo {
	case ApplyToAll:
		ok = true
	case ApplyToExchanges:
		ok = target == targetExchange
	case ApplyToQueues:
		ok = target != targetExchange
	case ApplyToClassicQueues:
		ok = target == targetClassic
	case ApplyToQuorumQueues:
		ok = target == targetQuorum
	case ApplyToStreams:
		ok = target == targetStream
	}
	return ok && p.re.MatchString(name)
}

// policySet is an immutable snapshot of a vhost's policies, sorted so the
// first match wins: highest priority first, then by name.
type policySet struct {
	user, operator []*compiledPolicy
}

func sortPolicies(ps []*compiledPolicy) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Priority != ps[j].Priority {
			return ps[i].Priority > ps[j].Priority
		}
		return ps[i].Name < ps[j].Name
	})
}

func firstMatch(ps []*compiledPolicy, target, name string) *compiledPolicy {
	for _, p := range ps {
		if p.appliesTo(target, name) {
			return p
		}
	}
	return nil
}

// match returns the policy and operator policy applying to an object and
// their merged definition: where both set a numeric limit the smaller wins,
// where both set a boolean the operator's wins, as in RabbitMQ.
func (ps *policySet) match(target, name string) (user, op *compiledPolicy, def map[string]any) {
	if ps == nil {
		return nil, nil, nil
	}
	user = firstMatch(ps.user, target, name)
	op = firstMatch(ps.operator, target, name)
	if user == nil && op == nil {
		return nil, nil, nil
	}
	def = make(map[string]any)
	if user != nil {
		maps.Copy(def, user.Definition)
	}
	if op != nil {
		for k, ov := range op.Definition {
			uv, both := def[k]
			if !both {
				def[k] = ov
				continue
			}
			un, uok := uv.(int64)
			on, ook := ov.(int64)
			_, ubool := uv.(bool)
			_, obool := ov.(bool)
			switch {
			case uok && ook:
				def[k] = min(un, on)
			case ubool && obool:
				def[k] = ov
			}
		}
	}
	return user, op, def
}

// vhostAdmin is the administrative state kept on a vhost: its metadata and
// its policies.
//
// Lock order: Vhost.mu → vhostAdmin.mu (the declare hooks read the policy set
// while declareQueue and declareExchange hold Vhost.mu). applyMu is taken
// before everything else and serialises policy changes with their
// application to running queues.
type vhostAdmin struct {
	applyMu sync.Mutex

	mu       sync.RWMutex
	meta     VhostMeta
	policies map[string]*compiledPolicy // by name
	operator map[string]*compiledPolicy // by name
	set      *policySet                 // rebuilt on every change; nil when there are none
}

// policySet returns the current policy snapshot (nil when there are none).
func (a *vhostAdmin) policySet() *policySet {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.set
}

// rebuildLocked recomputes the sorted snapshot after a change.
func (a *vhostAdmin) rebuildLocked() {
	if len(a.policies) == 0 && len(a.operator) == 0 {
		a.set = nil
		return
	}
	ps := &policySet{}
	for _, p := range a.policies {
		ps.user = append(ps.user, p)
	}
	for _, p := range a.operator {
		ps.operator = append(ps.operator, p)
	}
	sortPolicies(ps.user)
	sortPolicies(ps.operator)
	a.set = ps
}

func (a *vhostAdmin) table(operator bool) map[string]*compiledPolicy {
	if operator {
		if a.operator == nil {
			a.operator = make(map[string]*compiledPolicy)
		}
		return a.operator
	}
	if a.policies == nil {
		a.policies = make(map[string]*compiledPolicy)
	}
	return a.policies
}

// policyQueueArgs returns a new queue's effective arguments: qa (parsed from
// the declared arguments) adjusted by the matching policies. It is the hook
// declareQueue calls with Vhost.mu held.
func (vh *Vhost) policyQueueArgs(name string, declared amqp.Table, qa queueArgs) queueArgs {
	_, _, def := vh.adm.policySet().match(queueTarget(declared), name)
	if def == nil {
		return qa
	}
	return kindOf(&qa).policyArgs(vh, name, declared, qa, def)
}

// effectiveQueueArgs merges a policy definition into declared arguments the
// way RabbitMQ resolves them, and parses the result. fallback is returned
// if the merge does not parse (policies are validated, so it should).
func effectiveQueueArgs(name, vhost string, declared amqp.Table, def map[string]any, fallback queueArgs) queueArgs {
	if len(def) == 0 {
		qa, err := parseQueueArgs(name, vhost, declared)
		if err != nil {
			return fallback
		}
		return qa
	}
	merged := maps.Clone(declared)
	if merged == nil {
		merged = make(amqp.Table)
	}
	for k, v := range def {
		spec, ok := policyKeys[k]
		if !ok || spec.arg == "" {
			continue
		}
		have, declaredToo := merged[spec.arg]
		if !declaredToo {
			merged[spec.arg] = v
			continue
		}
		if spec.argWins {
			continue
		}
		hn, hok := intArg(have)
		pn, pok := v.(int64)
		if hok && pok && pn < hn {
			merged[spec.arg] = pn
		}
	}
	if _, dlx := merged["x-dead-letter-exchange"]; !dlx {
		// A routing key from a policy without any dead-letter exchange has
		// nothing to apply to (RabbitMQ validates the keys independently).
		delete(merged, "x-dead-letter-routing-key")
	}
	qa, err := parseQueueArgs(name, vhost, merged)
	if err != nil {
		return fallback
	}
	return qa
}

// applyExchangePolicyLocked sets a new exchange's policy alternate-exchange.
// It is the hook declareExchange calls with Vhost.mu held.
func (vh *Vhost) applyExchangePolicyLocked(ex *Exchange) {
	setPolicyAlternate(ex, vh.adm.policySet())
}

func setPolicyAlternate(ex *Exchange, ps *policySet) {
	_, _, def := ps.match(targetExchange, ex.name)
	if alt, ok := def["alternate-exchange"].(string); ok {
		ex.policyAlternate.Store(&alt)
		return
	}
	ex.policyAlternate.Store(nil)
}

// policyNames returns the names of the policy and operator policy applying
// to an object of target (targetExchange or queueTarget's), and their merged
// definition. Names are "" and the definition nil when none applies.
func (vh *Vhost) policyNames(target, name string) (policy, operator string, def map[string]any) {
	u, o, def := vh.adm.policySet().match(target, name)
	if u != nil {
		policy = u.Name
	}
	if o != nil {
		operator = o.Name
	}
	return policy, operator, def
}

// Policies returns the policies (or operator policies) of a vhost, or of
// every vhost when vhost is "", sorted by vhost and name.
func (s *Server) Policies(vhost string, operator bool) []Policy {
	var out []Policy
	for _, vh := range s.Vhosts() {
		if vhost != "" && vh.name != vhost {
			continue
		}
		vh.adm.mu.RLock()
		for _, p := range vh.adm.table(operator) {
			out = append(out, clonePolicy(p.Policy))
		}
		vh.adm.mu.RUnlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Vhost != out[j].Vhost {
			return out[i].Vhost < out[j].Vhost
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func clonePolicy(p Policy) Policy {
	p.Definition = maps.Clone(p.Definition)
	return p
}

// GetPolicy returns one policy or operator policy.
func (s *Server) GetPolicy(vhost, name string, operator bool) (Policy, error) {
	vh := s.Vhost(vhost)
	if vh == nil {
		return Policy{}, fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
	}
	vh.adm.mu.RLock()
	defer vh.adm.mu.RUnlock()
	p := vh.adm.table(operator)[name]
	if p == nil {
		return Policy{}, fmt.Errorf("%w: policy %q in vhost %q", ErrNotFound, name, vhost)
	}
	return clonePolicy(p.Policy), nil
}

// PutPolicy validates and stores a policy (or operator policy) and applies
// the vhost's new policy set to its running queues and exchanges. It reports
// whether the policy is new.
func (s *Server) PutPolicy(p Policy, operator bool) (created bool, err error) {
	if err := ValidatePolicy(p, operator); err != nil {
		return false, err
	}
	vh := s.Vhost(p.Vhost)
	if vh == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchVhost, p.Vhost)
	}
	vh.adm.mu.RLock()
	created = vh.adm.table(operator)[p.Name] == nil
	vh.adm.mu.RUnlock()
	return created, s.apply(SetPolicy{Policy: clonePolicy(p), Operator: operator})
}

// installPolicy sets a policy in memory and applies the vhost's new policy
// set (Server.apply).
func (s *Server) installPolicy(c SetPolicy) error {
	vh := s.Vhost(c.Policy.Vhost)
	if vh == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchVhost, c.Policy.Vhost)
	}
	re, err := regexp.Compile(c.Policy.Pattern)
	if err != nil {
		return fmt.Errorf("%w: policy %q pattern: %v", ErrInvalid, c.Policy.Name, err)
	}
	cp := &compiledPolicy{Policy: clonePolicy(c.Policy), re: re}
	vh.changePolicies(func(a *vhostAdmin) { a.table(c.Operator)[c.Policy.Name] = cp })
	return nil
}

// DeletePolicy removes a policy (or operator policy) and re-applies the
// vhost's remaining policies.
func (s *Server) DeletePolicy(vhost, name string, operator bool) error {
	vh := s.Vhost(vhost)
	if vh == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchVhost, vhost)
	}
	vh.adm.mu.RLock()
	_, found := vh.adm.table(operator)[name]
	vh.adm.mu.RUnlock()
	if !found {
		return fmt.Errorf("%w: policy %q in vhost %q", ErrNotFound, name, vhost)
	}
	return s.apply(ClearPolicy{Vhost: vhost, Name: name, Operator: operator})
}

// dropPolicy removes a policy from memory and re-applies the vhost's
// remaining policies (Server.apply).
func (s *Server) dropPolicy(c ClearPolicy) error {
	vh := s.Vhost(c.Vhost)
	if vh == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchVhost, c.Vhost)
	}
	vh.changePolicies(func(a *vhostAdmin) { delete(a.table(c.Operator), c.Name) })
	return nil
}

// changePolicies makes a policy change meta.db already records
// (Server.apply): change updates the tables under vhostAdmin.mu, and the new
// set is applied to every queue and exchange whose effective definition
// changed. applyMu is held throughout, so changes apply in order; the disk
// write happened outside vhostAdmin.mu, which declares wait on.
func (vh *Vhost) changePolicies(change func(*vhostAdmin)) {
	a := &vh.adm
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	before := a.set
	change(a)
	a.rebuildLocked()
	after := a.set
	a.mu.Unlock()
	vh.reapplyPolicies(before, after)
}

// reapplyPolicies reconfigures queues whose merged policy definition differs
// between two policy sets, and resets every exchange's policy
// alternate-exchange. It holds no lock while a queue reconfigures.
func (vh *Vhost) reapplyPolicies(before, after *policySet) {
	for _, q := range vh.Queues() {
		vh.reapplyQueuePolicy(q, before, after)
	}
	for _, ex := range vh.Exchanges() {
		setPolicyAlternate(ex, after)
	}
}

// reapplyQueuePolicy reconfigures q if its merged policy definition differs
// between two policy sets.
func (vh *Vhost) reapplyQueuePolicy(q *Queue, before, after *policySet) {
	target := queueTarget(q.declaredArgs())
	_, _, old := before.match(target, q.name)
	_, _, now := after.match(target, q.name)
	if equalDefinitions(old, now) {
		return
	}
	q.h.applyPolicy(now)
}

// catchUpQueuePolicy applies to a just-installed queue a policy change that
// landed while its declare did its disk work outside Vhost.mu: that change's
// reapplyPolicies did not see the queue, which was not installed yet. seen
// is the policy set read before the declare resolved the queue's arguments.
// applyMu orders this with later changes, so an older set never wins.
func (vh *Vhost) catchUpQueuePolicy(q *Queue, seen *policySet) {
	a := &vh.adm
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	if now := a.policySet(); now != seen {
		vh.reapplyQueuePolicy(q, seen, now)
	}
}

// applyStreamPolicy gives stream queue q the retention its declared
// arguments and policy definition def make. The queue's own queueArgs are
// left alone: a stream's queueArgs are never replaced.
func (vh *Vhost) applyStreamPolicy(q *Queue, def map[string]any) {
	s := vh.streams.get(q)
	if s == nil {
		return // deleted meanwhile
	}
	declared, aerr := parseStreamArgs(q.name, vh.name, storedQueueArgs(q.declaredArgs()))
	if aerr != nil {
		vh.log.Error("stream arguments no longer parse; policy not applied", "queue", q.name, "err", aerr)
		return
	}
	sa, err := effectiveStreamArgs(q.name, vh.name, declared, def)
	if err != nil {
		vh.log.Error("stream policy value not applied", "queue", q.name, "err", err)
	}
	s.setRetention(streamRetention{maxBytes: sa.maxBytes, maxAge: sa.maxAge, segmentSize: sa.segmentSize})
}

func equalDefinitions(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || fmt.Sprintf("%T:%v", v, v) != fmt.Sprintf("%T:%v", w, w) {
			return false
		}
	}
	return true
}

// metaPolicy is a policy as meta.db stores it. The definition is kept as
// JSON text and decoded with numbers preserved, so integers stay int64.
type metaPolicy struct {
	Vhost      string          `json:"vhost"`
	Name       string          `json:"name"`
	Operator   bool            `json:"operator"`
	Pattern    string          `json:"pattern"`
	ApplyTo    string          `json:"apply_to"`
	Priority   int64           `json:"priority"`
	Definition json.RawMessage `json:"definition"`
}

func policyMetaKey(vhost, name string, operator bool) []byte {
	kind := "policy"
	if operator {
		kind = "operator_policy"
	}
	return metaKey(vhost, kind, name)
}

// loadPolicies restores the policies in meta.db and applies them to the
// queues and exchanges loaded before them. loadDefinitions calls it last.
func (s *Server) loadPolicies() error {
	err := loadEach(s, bucketPolicies, func(mp metaPolicy) error {
		vh := s.vhosts[mp.Vhost]
		if vh == nil {
			return fmt.Errorf("policy %q in unknown vhost %q", mp.Name, mp.Vhost)
		}
		def, err := decodeDefinition(mp.Definition)
		if err != nil {
			return fmt.Errorf("policy %q: %w", mp.Name, err)
		}
		p := Policy{Vhost: mp.Vhost, Name: mp.Name, Pattern: mp.Pattern, ApplyTo: mp.ApplyTo, Priority: mp.Priority, Definition: def}
		re, err := regexp.Compile(p.Pattern)
		if err != nil {
			return fmt.Errorf("policy %q: %w", mp.Name, err)
		}
		vh.adm.mu.Lock()
		vh.adm.table(mp.Operator)[p.Name] = &compiledPolicy{Policy: p, re: re}
		vh.adm.rebuildLocked()
		vh.adm.mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	for _, vh := range s.vhosts {
		if set := vh.adm.policySet(); set != nil {
			vh.reapplyPolicies(nil, set)
		}
	}
	return nil
}

// decodeDefinition decodes stored definition JSON, integers as int64.
func decodeDefinition(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var raw map[string]any
	if err := d.Decode(&raw); err != nil {
		return nil, err
	}
	for k, v := range raw {
		raw[k] = fromJSONNumber(v)
	}
	return raw, nil
}

// fromJSONNumber turns json.Number values (recursively) into int64 when
// integral and float64 otherwise.
func fromJSONNumber(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = fromJSONNumber(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = fromJSONNumber(v[k])
		}
	}
	return v
}
