package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/sendtwice/sendtwice/internal/document"
	"github.com/sendtwice/sendtwice/internal/sign"
)

const keygenHelp = `keygen --name NAME [--dir DIR]

Makes a reviewer's Ed25519 key pair: DIR/NAME.key (the private key, file mode 0600; never
share it) and DIR/NAME.pub. Prints the entry to add to the executors' trusted-approvers
file ({"approvers": [ ... ]}); with --trusted FILE, also writes a trusted-approvers file
naming only this key. Refuses to overwrite an existing key.`

func runKeygen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", keygenHelp, stderr)
	name := fs.String("name", "", "the reviewer's `NAME`, used for the file names and in the trusted-approvers entry")
	dir := fs.String("dir", ".", "`DIR` to write the key files in")
	trusted := fs.String("trusted", "", "also write a trusted-approvers `FILE` naming this key")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	if !document.ValidID(*name) {
		return usageErr(fs, "--name must be a name without spaces or control characters")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("making %s: %w", *dir, err)
	}
	k, err := sign.Generate()
	if err != nil {
		return err
	}
	entry, err := sign.WriteKeyPair(*dir, *name, k)
	if err != nil {
		return err
	}
	if *trusted != "" {
		if err := sign.WriteTrusted(*trusted, entry); err != nil {
			return fmt.Errorf("writing the trusted approvers: %w", err)
		}
	}
	b, _ := json.MarshalIndent(entry, "", "  ")
	fmt.Fprintf(stdout, "wrote %s/%s.key (private, mode 0600) and %s/%s.pub\nkey id %s\ntrusted-approvers entry:\n%s\n", *dir, *name, *dir, *name, entry.KeyID, b)
	return nil
}
