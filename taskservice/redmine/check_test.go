package redmine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/internal/redminetest"
	"github.com/sendtwice/sendtwice/taskservice"
	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// Check against a real Redmine: what it accepts and what it refuses, and
// how a key that is not an administrator's finds the mark's field.
func TestCheckOnRedmine(t *testing.T) {
	s := redminetest.Start(t, redminetest.Options{})
	l := startLedger(t)
	ctx := context.Background()
	check := func(mod func(*redmine.Config)) error {
		cfg := redmine.Config{URL: s.URL, APIKey: s.APIKey, Project: s.Project, Field: s.FieldName, Locks: l}
		if mod != nil {
			mod(&cfg)
		}
		a, err := redmine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return a.Check(ctx)
	}
	developer := s.AddUser(t, "dev", "Developer")
	outsider := s.AddUser(t, "outsider", "")

	refusals := []struct {
		name string
		mod  func(*redmine.Config)
		says []string
	}{
		{"a wrong API key", func(c *redmine.Config) { c.APIKey = "0123456789abcdef0123456789abcdef01234567" }, []string{"401", "API key was refused"}},
		{"a project that does not exist", func(c *redmine.Config) { c.Project = "nowhere" }, []string{"404", `project "nowhere"`}},
		{"a project the key's user is not a member of", func(c *redmine.Config) { c.APIKey = outsider }, []string{"403"}},
		{"a field that does not exist (administrator's key)", func(c *redmine.Config) { c.Field = "no such field" }, []string{`no issue custom field named "no such field"`, "Administration » Custom fields"}},
		{"a field that does not exist (a member's key)", func(c *redmine.Config) { c.APIKey = developer; c.Field = "no such field" }, []string{`no issue custom field named "no such field" is visible`, "Administration » Custom fields"}},
	}
	for _, tc := range refusals {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			err := check(tc.mod)
			if !taskservice.IsPermanent(err) {
				t.Fatalf("Check: %v, want a permanent error", err)
			}
			for _, w := range tc.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), s.APIKey) || strings.Contains(err.Error(), developer) || strings.Contains(err.Error(), outsider) {
				t.Errorf("the error shows an API key: %v", err)
			}
		})
	}

	t.Run("accepts the administrator's key", func(t *testing.T) {
		if err := check(nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a member's key finds the field once the project has an issue", func(t *testing.T) {
		err := check(func(c *redmine.Config) { c.APIKey = developer })
		t.Logf("a Developer's key, no issue in the project: %v", err)
		if !errors.Is(err, redmine.ErrNoField) {
			t.Errorf("Check with an empty project: %v, want ErrNoField", err)
		}
		s.CreateIssue(t, "the first issue", "")
		if err := check(func(c *redmine.Config) { c.APIKey = developer }); err != nil {
			t.Fatalf("Check with an issue in the project: %v", err)
		}
	})
	t.Run("refuses a field that is not used as a filter", func(t *testing.T) {
		s.Rails(t, "CustomField.find("+strconv.Itoa(s.FieldID)+").update!(is_filter: false)")
		for _, key := range []struct{ who, key string }{{"an administrator's key", s.APIKey}, {"a member's key", developer}} {
			err := check(func(c *redmine.Config) { c.APIKey = key.key })
			if !taskservice.IsPermanent(err) || !errors.Is(err, redmine.ErrNoField) || !strings.Contains(err.Error(), "filter") {
				t.Errorf("Check with %s: %v, want a permanent ErrNoField about the filter", key.who, err)
			}
		}
	})
}
