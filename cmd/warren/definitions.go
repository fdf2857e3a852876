package main

import (
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/warrenmq/warren/mgmt"
	"github.com/warrenmq/warren/server"
)

// loadDefinitions imports the load-definitions file, or every .json file of
// the directory it names in name order, as RabbitMQ's load_definitions does.
// It runs after server.New has restored meta.db and before Start opens the
// listeners, so clients never see the broker without them. Each file goes
// through the management API's import (server.ImportDefinitions): objects
// that exist are kept or overwritten with the same values, so a restart with
// the same file changes nothing. The first file that does not read or import
// stops start-up, and the error names it and the entry.
func loadDefinitions(srv *server.Server, path string) error {
	files, err := definitionFiles(path)
	if err != nil {
		return fmt.Errorf("load-definitions: %w", err)
	}
	for _, f := range files {
		if err := importDefinitionsFile(srv, f); err != nil {
			return fmt.Errorf("load-definitions: %s: %w", f, err)
		}
	}
	return nil
}

// definitionFiles returns path itself when it is a file, or the .json files
// of the directory path names, sorted by name (subdirectories are not read).
func definitionFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .json files in the directory", path)
	}
	slices.Sort(files)
	return files, nil
}

func importDefinitionsFile(srv *server.Server, file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	d, err := mgmt.DecodeDefinitions(raw)
	if err != nil {
		return err
	}
	err = srv.ImportDefinitions(d, "")
	if errors.Is(err, server.ErrInvalid) {
		// The entry and RabbitMQ's reason say it; the sentinel's own text
		// adds nothing for an operator.
		// RabbitMQ's validation texts come HTML-escaped, as its HTTP API
		// sends them; a terminal wants them plain.
		return errors.New(html.UnescapeString(strings.ReplaceAll(err.Error(), server.ErrInvalid.Error()+": ", "")))
	}
	return err
}
