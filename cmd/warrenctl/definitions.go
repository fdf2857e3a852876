package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// maxDefinitions bounds a definitions file read for import.
const maxDefinitions = 512 << 20

func definitionCommands() []*command { return []*command{exportDefinitions(), importDefinitions()} }

// definitionsPath is the whole broker's definitions, or one vhost's when
// --vhost was given.
func (e *env) definitionsPath() string {
	if e.g.vhostSet {
		return apiPath("definitions", e.g.vhost)
	}
	return apiPath("definitions")
}

func exportDefinitions() *command {
	return &command{
		name: "export", synopsis: "[FILE|-]",
		summary: "save definitions (users, vhosts, permissions, policies, queues, exchanges, bindings) as JSON; one vhost's with --vhost",
		maxArgs: 1,
		run: func(e *env, a []string) error {
			body, err := e.c.get(e.definitionsPath(), nil)
			if err != nil {
				return err
			}
			var out bytes.Buffer
			if err := json.Indent(&out, bytes.TrimSpace(body), "", "  "); err != nil {
				return fmt.Errorf("the exported definitions are not JSON: %w", err)
			}
			out.WriteByte('\n')
			if len(a) == 0 || a[0] == "-" {
				_, err := e.stdout.Write(out.Bytes())
				return err
			}
			if err := writeFileAtomic(a[0], out.Bytes()); err != nil {
				return err
			}
			if e.g.format == "json" {
				return nil
			}
			_, err = fmt.Fprintf(e.stdout, "Exported definitions to %s\n", a[0])
			return err
		},
	}
}

// writeFileAtomic writes data to a temporary file beside path and renames it
// into place, so an interrupted export never leaves half a file. Definitions
// carry password hashes: the file is private to its owner.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func importDefinitions() *command {
	return &command{
		name: "import", synopsis: "[FILE|-]",
		summary: "load definitions exported by warrenctl, rabbitmqadmin or RabbitMQ; into one vhost with --vhost",
		maxArgs: 1,
		run: func(e *env, a []string) error {
			src := "-"
			if len(a) == 1 {
				src = a[0]
			}
			data, err := readDefinitions(e.stdin, src)
			if err != nil {
				return err
			}
			if _, err := e.c.call(request{method: http.MethodPost, path: e.definitionsPath(), body: json.RawMessage(data)}); err != nil {
				return err
			}
			if src == "-" {
				src = "standard input"
			}
			return e.say("Imported definitions from %s", src)
		},
	}
}

// readDefinitions reads and checks a definitions document from a file or
// stdin ("-"), so a typo fails here with a clear message rather than as a
// 400 from the server.
func readDefinitions(stdin io.Reader, src string) ([]byte, error) {
	r := stdin
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("reading definitions: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxDefinitions+1))
	if err != nil {
		return nil, fmt.Errorf("reading definitions from %s: %w", src, err)
	}
	if len(data) > maxDefinitions {
		return nil, fmt.Errorf("definitions in %s are larger than %d bytes", src, maxDefinitions)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("definitions in %s are not a JSON object: %w", src, err)
	}
	return data, nil
}
