package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"log/slog"
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
// listeners, so clients never see the broker without them (a cluster
// member starts its cluster node first: its changes go through Raft). Each
// file goes through the management API's import (server.ImportDefinitions):
// objects that exist are kept or overwritten with the same values, so a
// restart with the same file changes nothing it defines. The first file
// that does not read or import stops start-up, and the error names it and
// the entry.
//
// RabbitMQ imports at every boot, which puts back what the file defines
// even if it was changed or deleted since; with definitions.skip_if_unchanged
// it hashes the content and imports only when the hash differs from the
// one it recorded (the global parameter imported_definition_hash_value).
// skip is that setting: "true", "false", or "auto", which is true on a
// cluster node, where a restart of one node must not undo what the
// cluster changed since the files were first imported, and false
// standalone (RabbitMQ's default).
func loadDefinitions(srv *server.Server, path, skip string, log *slog.Logger) error {
	files, err := definitionFiles(path)
	if err != nil {
		return fmt.Errorf("load-definitions: %w", err)
	}
	skipUnchanged, err := skipIfUnchanged(skip, srv.IsCluster())
	if err != nil {
		return err
	}
	if err := srv.StartCluster(); err != nil {
		return err
	}
	imp := func() error {
		for _, f := range files {
			if err := importDefinitionsFile(srv, f); err != nil {
				return fmt.Errorf("load-definitions: %s: %w", f, err)
			}
		}
		return nil
	}
	if !skipUnchanged {
		return imp()
	}
	hash, err := definitionsHash(files)
	if err != nil {
		return fmt.Errorf("load-definitions: %w", err)
	}
	skipped, err := srv.ImportUnlessUnchanged(hash, imp)
	if err != nil {
		return fmt.Errorf("load-definitions: %w", err)
	}
	if skipped {
		log.Info("load-definitions: the files are unchanged since they were imported; not importing them again", "path", path, "hash", hash)
	}
	return nil
}

func skipIfUnchanged(v string, cluster bool) (bool, error) {
	switch v {
	case "auto", "":
		return cluster, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("load-definitions-skip-if-unchanged: %q is not true, false or auto", v)
}

// definitionsHash is the SHA-256 of the files' contents in import order,
// in hex (RabbitMQ's default definitions.hashing.algorithm is sha256).
func definitionsHash(files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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
