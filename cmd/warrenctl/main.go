// Command warrenctl administers a Warren (or RabbitMQ) broker through its
// management HTTP API: RabbitMQ's /api paths with basic auth.
//
//	warrenctl list queues                         # every vhost; --vhost V for one
//	warrenctl --format json list connections
//	warrenctl declare queue orders --arg x-max-length=1000
//	warrenctl declare binding --source amq.topic --destination orders --routing-key 'order.*'
//	warrenctl publish --routing-key orders --payload '{"id":1}'
//	warrenctl get orders --count 5
//	warrenctl export defs.json && warrenctl import defs.json
//	warrenctl add user alice s3cret --tags management
//	warrenctl set permissions alice '.*' '.*' '.*' --vhost /
//	warrenctl status; warrenctl alarms
//
// Global flags (accepted before or after the command): --url (default
// http://localhost:15672), --user and --password (default guest), --vhost
// (default /), --format table|json, --timeout. Run "warrenctl help" for the
// commands.
//
// Exit status: 0 success, 1 the API refused the request, 2 bad command line,
// 3 a health check failed or alarms are in effect, 69 the API could not be
// reached.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// globals are the flags every command accepts.
type globals struct {
	url      string
	user     string
	password string
	vhost    string
	format   string
	timeout  time.Duration
	// vhostSet records an explicit --vhost: lists and definitions then cover
	// that vhost only instead of all.
	vhostSet bool
	// credsSet records an explicit --user or --password, which win over
	// credentials in --url.
	credsSet bool
}

// env is one invocation: its flags, streams and (once flags are parsed) its
// client.
type env struct {
	g      globals
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	c      *client
}

// command is one thing warrenctl does.
type command struct {
	name     string // "list queues", "publish"
	synopsis string // positional arguments, e.g. "NAME"
	summary  string
	// flags registers the command's own flags (global ones are added for it).
	flags func(fs *flag.FlagSet)
	// run executes the command with its positional arguments.
	run func(e *env, args []string) error
	// args is how many positionals run accepts: min and max (-1: any).
	minArgs, maxArgs int
}

// commands returns every command; each file registers its group's.
func commands() []*command {
	var all []*command
	for _, group := range [][]*command{listCommands(), declareCommands(), messageCommands(),
		connectionCommands(), definitionCommands(), userCommands(), statusCommands(), clusterCommands()} {
		all = append(all, group...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return all
}

// run executes warrenctl with args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := newEnv(stdin, stdout, stderr)
	root := flag.NewFlagSet("warrenctl", flag.ContinueOnError)
	root.SetOutput(io.Discard)
	e.addGlobalFlags(root)
	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "warrenctl: %v\n\n", err)
		printUsage(stderr)
		return exitUsage
	}
	rest := root.Args()
	if len(rest) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch rest[0] {
	case "help":
		return help(rest[1:], stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "warrenctl %s\n", version)
		return exitOK
	}
	cmd, cmdArgs := findCommand(rest)
	if cmd == nil {
		fmt.Fprintf(stderr, "warrenctl: unknown command %q\n\n", strings.Join(rest[:min(2, len(rest))], " "))
		printUsage(stderr)
		return exitUsage
	}
	err := e.runCommand(cmd, cmdArgs)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil && !errors.Is(err, errUnhealthy) {
		fmt.Fprintf(stderr, "warrenctl: %v\n", err)
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "usage: warrenctl %s\n", cmdLine(cmd))
		}
	}
	return exitCode(err)
}

// findCommand matches the longest command name at the start of words.
func findCommand(words []string) (*command, []string) {
	var best *command
	for _, c := range commands() {
		parts := strings.Fields(c.name)
		if len(parts) <= len(words) && strings.Join(words[:len(parts)], " ") == c.name {
			if best == nil || len(parts) > len(strings.Fields(best.name)) {
				best = c
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, words[len(strings.Fields(best.name)):]
}

// newEnv returns an invocation with the global flags' defaults.
func newEnv(stdin io.Reader, stdout, stderr io.Writer) *env {
	return &env{
		g:     globals{url: "http://localhost:15672", user: "guest", password: "guest", vhost: "/", format: "table", timeout: 60 * time.Second},
		stdin: stdin, stdout: stdout, stderr: stderr,
	}
}

// addGlobalFlags registers the global flags on fs, keeping the values
// already parsed (a command's flag set sees the root's values as defaults).
func (e *env) addGlobalFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.g.url, "url", e.g.url, "management API base URL")
	fs.Func("user", "user name for basic auth (default \"guest\")", func(s string) error {
		e.g.user, e.g.credsSet = s, true
		return nil
	})
	fs.Func("password", "password for basic auth (default \"guest\")", func(s string) error {
		e.g.password, e.g.credsSet = s, true
		return nil
	})
	fs.Func("vhost", "virtual host (default \"/\"; lists cover every vhost unless it is given)", func(s string) error {
		e.g.vhost, e.g.vhostSet = s, true
		return nil
	})
	fs.Func("format", "output: table or json (default \"table\")", func(s string) error {
		if s != "table" && s != "json" {
			return fmt.Errorf("must be table or json, not %q", s)
		}
		e.g.format = s
		return nil
	})
	fs.DurationVar(&e.g.timeout, "timeout", e.g.timeout, "how long one API call may take")
}

// runCommand parses cmd's flags and positionals, builds the client and runs it.
func (e *env) runCommand(cmd *command, args []string) error {
	fs := flag.NewFlagSet("warrenctl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: warrenctl %s\n\n%s\n\nflags:\n", cmdLine(cmd), cmd.summary)
		fs.PrintDefaults()
	}
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	e.addGlobalFlags(fs)
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{msg: err.Error()}
	}
	if len(positional) < cmd.minArgs || (cmd.maxArgs >= 0 && len(positional) > cmd.maxArgs) {
		return usagef("%s: wrong number of arguments (%d)", cmd.name, len(positional))
	}
	c, err := newClient(e.g.url, e.g.user, e.g.password, e.g.credsSet, e.g.timeout)
	if err != nil {
		return err
	}
	e.c = c
	return cmd.run(e, positional)
}

func cmdLine(c *command) string {
	line := c.name + " [flags]"
	if c.synopsis != "" {
		line += " " + c.synopsis
	}
	return line
}

// help prints the command list, or one command's usage and flags.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stdout)
		return exitOK
	}
	cmd, rest := findCommand(args)
	if cmd == nil || len(rest) > 0 {
		fmt.Fprintf(stderr, "warrenctl: no command %q\n", strings.Join(args, " "))
		return exitUsage
	}
	e := newEnv(nil, stdout, stdout)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	e.addGlobalFlags(fs)
	fmt.Fprintf(stdout, "usage: warrenctl %s\n\n%s\n\nflags:\n", cmdLine(cmd), cmd.summary)
	fs.PrintDefaults()
	return exitOK
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `warrenctl administers a Warren broker through its management HTTP API.

usage: warrenctl [global flags] COMMAND [flags] [arguments]

global flags:
  --url URL          management API (default http://localhost:15672)
  --user, --password basic auth credentials (default guest/guest)
  --vhost VHOST      virtual host (default /; lists cover all vhosts unless given)
  --format FORMAT    table or json (default table)
  --timeout DURATION how long one API call may take (default 1m0s)

commands:
`)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+c.synopsis), c.summary)
	}
	fmt.Fprintf(tw, "  help [COMMAND]\tshow a command's flags\n")
	fmt.Fprintf(tw, "  version\tprint warrenctl's version\n")
	tw.Flush()
	fmt.Fprint(w, `
exit status: 0 ok, 1 request refused, 2 usage, 3 unhealthy or alarms, 69 API unreachable
`)
}
