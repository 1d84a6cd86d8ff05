package console

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sendtwice/sendtwice/internal/canon"
	"github.com/sendtwice/sendtwice/internal/document"
)

// File name suffixes of a review item's two documents.
const (
	CandidateSuffix = ".candidate.json"
	RequestSuffix   = ".request.json"
)

// maxFileBytes bounds what is read of one file: the documents' own limit.
var maxFileBytes = int64(document.Limits.MaxBytes)

// Item is one candidate and the request proposed from it, as the files are
// on disk now.
type Item struct {
	Name string

	CandidateRaw, RequestRaw []byte
	Candidate                *document.Candidate
	Request                  *document.Request
	CandidateDigest          string
	RequestDigest            string

	// Err says why the files cannot be read as a candidate and a request.
	Err string
	// Mismatch says why the request does not point at this candidate.
	Mismatch string
}

// Approvable reports whether a new approval may be made for the item.
func (it *Item) Approvable() bool { return it.Err == "" && it.Mismatch == "" }

// Sendable reports whether both files exist, so that a kept approval can be
// sent with them (the gate decides the rest).
func (it *Item) Sendable() bool { return it.CandidateRaw != nil && it.RequestRaw != nil }

// validName reports whether name can be a review item's name: not empty and
// without path separators, so that it always names files inside the folder.
func validName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/\\\x00")
}

// listItems reads the folder and returns its items, sorted by name.
func listItems(dir string) ([]*Item, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the candidates folder: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		n := e.Name()
		for _, suf := range []string{CandidateSuffix, RequestSuffix} {
			if name, ok := strings.CutSuffix(n, suf); ok && validName(name) {
				seen[name] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	items := make([]*Item, 0, len(names))
	for _, n := range names {
		items = append(items, loadItem(dir, n))
	}
	return items, nil
}

// errNoItem is returned by findItem when neither file exists.
var errNoItem = errors.New("console: no such candidate")

// findItem reads one item by name.
func findItem(dir, name string) (*Item, error) {
	if !validName(name) {
		return nil, errNoItem
	}
	_, cerr := os.Stat(filepath.Join(dir, name+CandidateSuffix))
	_, rerr := os.Stat(filepath.Join(dir, name+RequestSuffix))
	if errors.Is(cerr, fs.ErrNotExist) && errors.Is(rerr, fs.ErrNotExist) {
		return nil, errNoItem
	}
	return loadItem(dir, name), nil
}

// loadItem reads and checks one item's two files.
func loadItem(dir, name string) *Item {
	it := &Item{Name: name}
	var problems []string
	cpath, rpath := name+CandidateSuffix, name+RequestSuffix
	var err error
	if it.CandidateRaw, err = readFile(filepath.Join(dir, cpath)); err != nil {
		problems = append(problems, fileProblem(cpath, err))
	}
	if it.RequestRaw, err = readFile(filepath.Join(dir, rpath)); err != nil {
		problems = append(problems, fileProblem(rpath, err))
	}
	if it.CandidateRaw != nil {
		if it.Candidate, it.CandidateDigest, err = decodeDigested(it.CandidateRaw, document.DecodeCandidate); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not an %s: %v", cpath, document.CandidateVersion, err))
		}
	}
	if it.RequestRaw != nil {
		if it.Request, it.RequestDigest, err = decodeDigested(it.RequestRaw, document.DecodeRequest); err != nil {
			problems = append(problems, fmt.Sprintf("%s is not a %s: %v", rpath, document.RequestVersion, err))
		}
	}
	it.Err = strings.Join(problems, "; ")
	if it.Candidate != nil && it.Request != nil {
		it.Mismatch = mismatch(it)
	}
	return it
}

// decodeDigested parses raw, decodes the document with decode and digests
// it: the document and its digest, or nil, "" and the first error.
func decodeDigested[T any](raw []byte, decode func(path string, v any) (*T, error)) (*T, string, error) {
	v, err := document.Parse(raw)
	if err != nil {
		return nil, "", err
	}
	doc, err := decode("$", v)
	if err != nil {
		return nil, "", err
	}
	digest, err := canon.DigestTree(v)
	if err != nil {
		return nil, "", err
	}
	return doc, digest, nil
}

// mismatch says why the request does not point at the candidate, or "".
// These are the checks approve.Approve makes before it approves.
func mismatch(it *Item) string {
	ref, c := it.Request.CandidateRef, it.Candidate
	switch {
	case ref.CandidateID != c.CandidateID:
		return fmt.Sprintf("the request was proposed from candidate %q, not from this candidate %q", ref.CandidateID, c.CandidateID)
	case ref.SourceVersion != c.Source.Version:
		return fmt.Sprintf("the request was proposed from source version %q, but this candidate comes from version %q", ref.SourceVersion, c.Source.Version)
	case ref.CandidateDigest != it.CandidateDigest:
		return fmt.Sprintf("the request was proposed from the candidate with digest %s, but the candidate file now has digest %s: the candidate changed after the request was made", ref.CandidateDigest, it.CandidateDigest)
	}
	return ""
}

func fileProblem(name string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return name + " is missing"
	}
	return fmt.Sprintf("%s cannot be read: %v", name, err)
}

// readFile reads a file of at most maxFileBytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return b, nil
}
