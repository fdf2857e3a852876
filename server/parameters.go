package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
)

// Runtime and global parameters. Warren keeps them so definitions
// round-trip and a restart finds them again. Each change is a Command
// (Server.apply); the components that run them (the shovel package) learn
// of changes through OnParameterChange.

// ClusterName returns the cluster name set with SetClusterName or, while
// none is, the default set with SetDefaultClusterName.
func (s *Server) ClusterName() string {
	s.admin.pmu.RLock()
	defer s.admin.pmu.RUnlock()
	return cmp.Or(s.admin.clusterName, s.admin.defaultClusterName)
}

// SetClusterName sets the cluster name reported by the management API and
// announced in connection.start; it survives a restart.
func (s *Server) SetClusterName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: cluster name is empty", ErrInvalid)
	}
	return s.putGlobal("cluster_name", name)
}

// SetDefaultClusterName sets the name ClusterName reports while no cluster
// name is set (the management API sets the node's name); it is not stored,
// so a node renamed before a name is set reports its new name.
func (s *Server) SetDefaultClusterName(name string) {
	s.admin.pmu.Lock()
	s.admin.defaultClusterName = name
	s.admin.pmu.Unlock()
}

// Parameter is a runtime parameter of a component (federation-upstream,
// shovel, ...).
type Parameter struct {
	Component, Vhost, Name string
	Value                  any
}

type paramKey struct{ component, vhost, name string }

func (k paramKey) metaKey() []byte { return metaKey(k.vhost, k.component, k.name) }

// Parameters returns the stored runtime parameters sorted by component,
// vhost and name.
func (s *Server) Parameters() []Parameter {
	s.admin.pmu.RLock()
	out := make([]Parameter, 0, len(s.admin.params))
	for k, v := range s.admin.params {
		out = append(out, Parameter{Component: k.component, Vhost: k.vhost, Name: k.name, Value: v})
	}
	s.admin.pmu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Component+"\x00"+a.Vhost+"\x00"+a.Name < b.Component+"\x00"+b.Vhost+"\x00"+b.Name
	})
	return out
}

// putParameter sets a runtime parameter.
func (s *Server) putParameter(p Parameter) error { return s.apply(SetParameter{Parameter: p}) }

// clearParameter removes a runtime parameter.
func (s *Server) clearParameter(k paramKey) error {
	return s.apply(ClearParameter{Component: k.component, Vhost: k.vhost, Name: k.name})
}

func (s *Server) installParameter(p Parameter) {
	s.admin.pmu.Lock()
	if s.admin.params == nil {
		s.admin.params = make(map[paramKey]any)
	}
	s.admin.params[paramKey{p.Component, p.Vhost, p.Name}] = p.Value
	s.admin.pmu.Unlock()
	if p.Component == vhostLimitsComponent && p.Name == vhostLimitsName {
		s.enforceVhostLimits(p.Vhost, p.Value)
	}
	s.notifyParameter(p.Component)
}

func (s *Server) dropParameter(k paramKey) {
	s.admin.pmu.Lock()
	delete(s.admin.params, k)
	s.admin.pmu.Unlock()
	if k.component == vhostLimitsComponent && k.name == vhostLimitsName {
		s.enforceVhostLimits(k.vhost, nil)
	}
	s.notifyParameter(k.component)
}

// OnParameterChange registers f to be called with a component's name
// whenever one of its runtime parameters is set or cleared (after the
// change is stored and visible in Parameters), also when a parameter is
// loaded at start. f is called with admin locks held: it must return at
// once without calling into the server (the shovel runner only wakes its
// own goroutine, which then reads Parameters).
func (s *Server) OnParameterChange(f func(component string)) {
	s.admin.pmu.Lock()
	s.admin.paramObservers = append(s.admin.paramObservers, f)
	s.admin.pmu.Unlock()
}

func (s *Server) notifyParameter(component string) {
	s.admin.pmu.RLock()
	observers := s.admin.paramObservers
	s.admin.pmu.RUnlock()
	for _, f := range observers {
		f(component)
	}
}

// GlobalParameters returns the stored global parameters sorted by name,
// including cluster_name (the set or the default cluster name) when there
// is one.
func (s *Server) GlobalParameters() []Parameter {
	s.admin.pmu.RLock()
	out := make([]Parameter, 0, len(s.admin.globals)+1)
	for k, v := range s.admin.globals {
		out = append(out, Parameter{Name: k, Value: v})
	}
	if name := cmp.Or(s.admin.clusterName, s.admin.defaultClusterName); name != "" {
		out = append(out, Parameter{Name: "cluster_name", Value: name})
	}
	s.admin.pmu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// putGlobal sets a global parameter; cluster_name, when a non-empty string,
// sets the cluster name and is otherwise ignored, as before.
func (s *Server) putGlobal(name string, v any) error {
	if cluster, ok := v.(string); name == "cluster_name" && (!ok || cluster == "") {
		return nil
	}
	return s.apply(SetGlobalParameter{Name: name, Value: v})
}

func (s *Server) installGlobal(name string, v any) {
	s.admin.pmu.Lock()
	defer s.admin.pmu.Unlock()
	if name == "cluster_name" {
		s.admin.clusterName, _ = v.(string)
		return
	}
	if s.admin.globals == nil {
		s.admin.globals = make(map[string]any)
	}
	s.admin.globals[name] = v
}

// clearGlobal removes a global parameter (cluster_name: the set cluster name).
func (s *Server) clearGlobal(name string) error { return s.apply(ClearGlobalParameter{Name: name}) }

func (s *Server) dropGlobal(name string) {
	s.admin.pmu.Lock()
	defer s.admin.pmu.Unlock()
	if name == "cluster_name" {
		s.admin.clusterName = ""
	}
	delete(s.admin.globals, name)
}

// loadParameters restores the runtime and global parameters of meta.db.
func (s *Server) loadParameters() error {
	err := metaEach(s.meta, bucketParameters, func(p metaParameter) error {
		v, err := decodeParamValue(p.Value)
		if err != nil {
			return fmt.Errorf("parameter %q of %q: %w", p.Name, p.Component, err)
		}
		s.installParameter(Parameter{Component: p.Component, Vhost: p.Vhost, Name: p.Name, Value: v})
		return nil
	})
	if err != nil {
		return err
	}
	return metaEach(s.meta, bucketGlobals, func(p metaParameter) error {
		v, err := decodeParamValue(p.Value)
		if err != nil {
			return fmt.Errorf("global parameter %q: %w", p.Name, err)
		}
		s.installGlobal(p.Name, v)
		return nil
	})
}

// decodeParamValue decodes a stored value as the management API decodes a
// request body: numbers stay json.Number.
func decodeParamValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// GetParameter returns one runtime parameter, or ErrNotFound.
func (s *Server) GetParameter(component, vhost, name string) (Parameter, error) {
	s.admin.pmu.RLock()
	v, ok := s.admin.params[paramKey{component, vhost, name}]
	s.admin.pmu.RUnlock()
	if !ok {
		return Parameter{}, fmt.Errorf("%w: parameter %q of %q in vhost %q", ErrNotFound, name, component, vhost)
	}
	return Parameter{Component: component, Vhost: vhost, Name: name, Value: v}, nil
}

// PutParameter validates a runtime parameter as its component does (a
// *ParameterError with RabbitMQ's text when it is refused) and sets it.
// user is the user making the change; the shovel checks that it may use
// the vhosts of its direct URIs. It reports whether the parameter is new.
func (s *Server) PutParameter(p Parameter, user string) (created bool, err error) {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	if s.Vhost(p.Vhost) == nil {
		return false, fmt.Errorf("%w: %q", ErrNoSuchVhost, p.Vhost)
	}
	if err := s.validateParameter(p, user); err != nil {
		return false, err
	}
	_, err = s.GetParameter(p.Component, p.Vhost, p.Name)
	return err != nil, s.putParameter(p)
}

// DeleteParameter removes a runtime parameter, or answers ErrNotFound.
func (s *Server) DeleteParameter(component, vhost, name string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	if _, err := s.GetParameter(component, vhost, name); err != nil {
		return err
	}
	return s.clearParameter(paramKey{component, vhost, name})
}

// GetGlobalParameter returns one global parameter, or ErrNotFound.
func (s *Server) GetGlobalParameter(name string) (Parameter, error) {
	for _, p := range s.GlobalParameters() {
		if p.Name == name {
			return p, nil
		}
	}
	return Parameter{}, fmt.Errorf("%w: global parameter %q", ErrNotFound, name)
}

// PutGlobalParameter sets a global parameter (RabbitMQ validates none) and
// reports whether it is new. cluster_name must be a non-empty string.
func (s *Server) PutGlobalParameter(name string, v any) (created bool, err error) {
	if name == "" {
		return false, fmt.Errorf("%w: global parameter name is empty", ErrInvalid)
	}
	if cluster, ok := v.(string); name == "cluster_name" && (!ok || cluster == "") {
		return false, fmt.Errorf("%w: cluster_name must be a non-empty string", ErrInvalid)
	}
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	s.admin.pmu.RLock()
	_, existed := s.admin.globals[name]
	if name == "cluster_name" {
		existed = s.admin.clusterName != ""
	}
	s.admin.pmu.RUnlock()
	return !existed, s.putGlobal(name, v)
}

// DeleteGlobalParameter removes a global parameter, or answers ErrNotFound.
// Deleting cluster_name brings back the default cluster name.
func (s *Server) DeleteGlobalParameter(name string) error {
	s.admin.mu.Lock()
	defer s.admin.mu.Unlock()
	s.admin.pmu.RLock()
	_, ok := s.admin.globals[name]
	if name == "cluster_name" {
		ok = s.admin.clusterName != ""
	}
	s.admin.pmu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: global parameter %q", ErrNotFound, name)
	}
	return s.clearGlobal(name)
}
