// composecheck loads a compose file the way `docker compose config` does
// (compose-go: the Compose Specification's JSON schema, interpolation,
// merge keys, consistency of services, volumes and dependencies) and fails
// on any error; validate.sh runs it on docker-compose.yml with every
// profile, offline. Interpolation sees no environment and no .env file, so
// every variable falls back to its default.
//
//	composecheck docker-compose.yml [profile ...]
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: composecheck COMPOSE_FILE [PROFILE ...]")
		os.Exit(2)
	}
	file, err := filepath.Abs(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithProfiles(os.Args[2:]),
		cli.WithConsistency(true),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	fmt.Printf("composecheck: %s valid with profiles %v: %d services\n", file, os.Args[2:], len(project.Services))
}
