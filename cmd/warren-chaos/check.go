package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"
)

// violation is one broken guarantee with the operations that show it.
type violation struct {
	Kind   string  `json:"kind"`
	ID     string  `json:"id,omitempty"`
	Detail string  `json:"detail"`
	Events []Event `json:"events,omitempty"`
}

// unavailability is the time from one fault or heal to the next confirm.
type unavailability struct {
	Event         string   `json:"event"`
	Family        string   `json:"family"`
	Kind          string   `json:"kind"`
	Nodes         []string `json:"nodes"`
	T             int64    `json:"t"` // Unix nanoseconds
	At            string   `json:"at"`
	NextConfirmMs int64    `json:"next_confirm_ms"` // -1: none followed
	// Faults only (-1 otherwise or when none followed before the next
	// fault): the next confirm through a node the fault left alone, and
	// the longest time over the work queues to such a confirm of each.
	MajorityNextConfirmMs int64 `json:"majority_next_confirm_ms"`
	FailoverMs            int64 `json:"failover_ms"`
}

// summary is <run>/summary.json.
type summary struct {
	Operations        int              `json:"operations"`
	Published         int              `json:"published"`
	Confirmed         int              `json:"confirmed"`
	PublishFailed     int              `json:"publish_failed"`
	PublishUnknown    int              `json:"publish_unknown"`
	Delivered         int              `json:"delivered_messages"`
	Deliveries        int              `json:"deliveries"`
	Redeliveries      int              `json:"redeliveries"`
	Recovered         int              `json:"recovered_unconfirmed_delivered"`
	CommitsOK         int              `json:"tx_commits_ok"`
	DefinitionOps     int              `json:"definition_ops"`
	MinorityRefusals  int              `json:"minority_refusals_541"` // cluster: changes refused on cut-off nodes
	MinorityAnswers   int              `json:"minority_answers"`      // cluster: ok or 404 answers there (no-ops)
	Faults            int              `json:"faults"`
	Lost              int              `json:"lost"`
	Unexpected        int              `json:"unexpected"`
	BadDuplicates     int              `json:"bad_duplicates"`
	CommittedReturned int              `json:"committed_acks_returned"`
	Unavailability    []unavailability `json:"unavailability"`
	MaxUnavailableMs  int64            `json:"max_unavailable_ms"`
	MaxFailoverMs     int64            `json:"max_failover_ms"`
	ViolationCount    int              `json:"violation_count"` // all found; Violations keeps maxReported of each kind
	Violations        []violation      `json:"violations"`
}

// maxReported bounds the violations of one kind kept in full.
const maxReported = 50

// runCheck checks a run directory, writes summary.json and prints the
// violations; it exits non-zero on any.
func runCheck(dir string, stdout, stderr io.Writer) int {
	cfg, err := readConfig(dir)
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos check:", err)
		return exitSetup
	}
	hist, err := readJSONLines[Event](filepath.Join(dir, "history.jsonl"))
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos check:", err)
		return exitSetup
	}
	nem, err := readJSONLines[nemesisEvent](filepath.Join(dir, "nemesis.log"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(stderr, "warren-chaos check:", err)
		return exitSetup
	}
	s := check(hist, nem, cfg.Scope, cfg.QueueType, filepath.Join(dir, "definitions-%s.html"))
	b, err := json.MarshalIndent(s, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "warren-chaos check:", err)
		return exitSetup
	}
	printSummary(stdout, dir, s)
	if s.ViolationCount > 0 {
		return exitViolation
	}
	return exitOK
}

func printSummary(w io.Writer, dir string, s summary) {
	fmt.Fprintf(w, "warren-chaos check %s: %d ops, %d faults, %d published, %d confirmed, %d unknown, %d delivered (%d redeliveries), %d recovered, %d tx commits, %d definition ops, max unavailability %d ms\n",
		dir, s.Operations, s.Faults, s.Published, s.Confirmed, s.PublishUnknown, s.Delivered, s.Redeliveries, s.Recovered, s.CommitsOK, s.DefinitionOps, s.MaxUnavailableMs)
	if s.MinorityRefusals+s.MinorityAnswers > 0 {
		fmt.Fprintf(w, "cut-off nodes: %d definition changes refused with 541, %d answered from their frozen state\n", s.MinorityRefusals, s.MinorityAnswers)
	}
	for _, u := range s.Unavailability {
		if u.Event == "fault" {
			fmt.Fprintf(w, "fault %s %v at %s: next confirm %d ms, on the other nodes %d ms, every queue confirming there again %d ms\n",
				u.Kind, u.Nodes, u.At, u.NextConfirmMs, u.MajorityNextConfirmMs, u.FailoverMs)
		}
	}
	fmt.Fprintf(w, "lost %d, unexpected %d, bad duplicates %d, committed acks returned %d, violations %d (%d shown)\n",
		s.Lost, s.Unexpected, s.BadDuplicates, s.CommittedReturned, s.ViolationCount, len(s.Violations))
	for _, v := range s.Violations {
		fmt.Fprintf(w, "VIOLATION %s %s: %s\n", v.Kind, v.ID, v.Detail)
		for _, e := range v.Events {
			b, _ := json.Marshal(e)
			fmt.Fprintf(w, "    %s %s\n", time.Unix(0, e.T).UTC().Format("15:04:05.000000"), b)
		}
	}
}

// check runs every check over one history and its nemesis log. htmlPattern
// (with %s for the partition) is where a non-linearizable definitions
// partition is drawn; "" draws none.
func check(hist []Event, nem []nemesisEvent, scope, queueType, htmlPattern string) summary {
	sort.SliceStable(hist, func(i, j int) bool { return hist[i].T < hist[j].T })
	var s summary
	var v []violation
	add := func(kind string, more ...violation) {
		n := 0
		for _, x := range v {
			if x.Kind == kind {
				n++
			}
		}
		s.ViolationCount += len(more)
		for _, x := range more {
			if n < maxReported {
				x.Kind = kind
				v = append(v, x)
				n++
			}
		}
	}
	q := checkQueue(hist, &s)
	add("lost", q.lost...)
	add("unexpected", q.unexpected...)
	add("duplicate-not-redelivered", q.badDup...)
	add("committed-ack-returned", q.committed...)
	add("drain-incomplete", q.drain...)
	s.Lost, s.Unexpected, s.BadDuplicates, s.CommittedReturned = len(q.lost), len(q.unexpected), len(q.badDup), len(q.committed)
	add("definitions-not-linearizable", checkDefinitions(hist, scope, htmlPattern, &s)...)
	if scope == "cluster" {
		add("minority-accepted-change", checkMinority(hist, nem, &s)...)
		if queueType == "quorum" {
			add("minority-confirm", checkMinorityConfirms(hist, nem)...)
		}
	}
	for _, e := range nem {
		switch e.Event {
		case "fault":
			s.Faults++
		case "node-exit":
			add("node-exit", violation{ID: fmt.Sprint(e.Nodes), Detail: "a node exited without the nemesis killing it: " + e.Err})
		}
		if e.Err != "" && (e.Event == "fault" || e.Event == "heal") {
			add("nemesis-error", violation{ID: e.Kind, Detail: fmt.Sprintf("%s %s on %v: %s", e.Event, e.Kind, e.Nodes, e.Err)})
		}
	}
	s.Unavailability, s.MaxUnavailableMs = unavailable(hist, nem)
	failover(hist, nem, s.Unavailability)
	for _, u := range s.Unavailability {
		s.MaxFailoverMs = max(s.MaxFailoverMs, u.FailoverMs)
	}
	add("no-confirm-after-heal", neverAvailable(hist, s.Unavailability)...)
	s.Violations = v
	if s.Violations == nil {
		s.Violations = []violation{}
	}
	return s
}

// unavailable measures, for each fault and heal, the time to the next
// publish confirm after it.
func unavailable(hist []Event, nem []nemesisEvent) ([]unavailability, int64) {
	var confirms []int64
	for _, e := range hist {
		if e.F == "publish" && e.Type == evOK {
			confirms = append(confirms, e.T)
		}
	}
	out := []unavailability{}
	var max int64
	for _, e := range nem {
		if e.Event != "fault" && e.Event != "heal" {
			continue
		}
		u := unavailability{Event: e.Event, Family: e.Family, Kind: e.Kind, Nodes: e.Nodes, T: e.T,
			At: time.Unix(0, e.T).UTC().Format(time.RFC3339Nano), NextConfirmMs: -1}
		if i := sort.Search(len(confirms), func(i int) bool { return confirms[i] > e.T }); i < len(confirms) {
			u.NextConfirmMs = (confirms[i] - e.T) / int64(time.Millisecond)
			if u.NextConfirmMs > max {
				max = u.NextConfirmMs
			}
		}
		out = append(out, u)
	}
	return out, max
}

// healGrace is how long publishers must have kept publishing to a healed
// node, with no confirm from it since, for the heal to count as not having
// restored it.
const healGrace = 10 * time.Second

// neverAvailable reports each heal after which no publish to the healed
// nodes was confirmed again although publishes to them were still invoked
// healGrace later, before the next fault: a node that did not recover
// from the fault. (The run's last heal, after the workload stopped, is not
// judged.)
func neverAvailable(hist []Event, us []unavailability) []violation {
	var out []violation
	for i, u := range us {
		if u.Event != "heal" {
			continue
		}
		// The span judged ends at the next fault: a publish to a node cut
		// off again says nothing about the heal before.
		end := int64(math.MaxInt64)
		for _, next := range us[i+1:] {
			if next.Event == "fault" {
				end = next.T
				break
			}
		}
		var lastInvoke int64
		confirmed := false
		for _, e := range hist {
			if e.T <= u.T || e.T >= end || e.F != "publish" || !slices.Contains(u.Nodes, e.Node) {
				continue
			}
			if e.Type == evOK {
				confirmed = true
				break
			}
			if e.Type == evInvoke {
				lastInvoke = e.T
			}
		}
		if confirmed || lastInvoke < u.T+int64(healGrace) {
			continue
		}
		out = append(out, violation{ID: fmt.Sprint(u.Nodes), Detail: fmt.Sprintf(
			"heal of %s %s at %s: no publish to %v confirmed again in the %v publishes went on",
			u.Family, u.Kind, u.At, u.Nodes, time.Duration(lastInvoke-u.T).Round(time.Millisecond))})
	}
	return out
}
