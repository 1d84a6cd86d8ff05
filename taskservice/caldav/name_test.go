package caldav

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/sendtwice/sendtwice/taskservice/internal/proof"
)

func TestResourceName(t *testing.T) {
	for _, c := range []struct{ id, name string }{
		{"intent-0001", "intent-0001.ics"},
		{"team/a b?#%", "team~2Fa~20b~3F~23~25.ics"},
		{"a~b", "a~7Eb.ics"},
		{".hidden", "~2Ehidden.ics"},
		{"..", "~2E..ics"},
		{"a.b", "a.b.ics"},
		{"通知", "~E9~80~9A~E7~9F~A5.ics"},
	} {
		got, err := ResourceName(c.id)
		if err != nil || got != c.name {
			t.Errorf("ResourceName(%q) = %q, %v; want %q", c.id, got, err, c.name)
			continue
		}
		back, err := intentIDFromResourceName(got)
		if err != nil || back != c.id {
			t.Errorf("intentIDFromResourceName(%q) = %q, %v; want %q", got, back, err, c.id)
		}
	}
}

func TestResourceNameRefuses(t *testing.T) {
	if _, err := ResourceName(""); !errors.Is(err, ErrResourceName) {
		t.Errorf("empty intent id: %v", err)
	}
	long := strings.Repeat("x", MaxResourceNameBytes-len(ResourceSuffix))
	if _, err := ResourceName(long); err != nil {
		t.Errorf("an intent id of the longest length: %v", err)
	}
	if _, err := ResourceName(long + "x"); !errors.Is(err, ErrResourceName) {
		t.Errorf("an intent id one byte too long: %v", err)
	}
	for _, name := range []string{"", ".ics", "a", "a.ICS", "a~2f.ics", "a~41.ics", "a~4.ics", "a~.ics", "a b.ics", ".a.ics", "a/b.ics", "~2E~2E.ics"} {
		if id, err := intentIDFromResourceName(name); err == nil {
			if again, _ := ResourceName(id); again != name {
				t.Errorf("intentIDFromResourceName(%q) = %q, which encodes to %q", name, id, again)
			}
		}
	}
}

// FuzzResourceName checks that the encoding is reversible, one to one, and
// always a single path segment that every server stores as it is.
func FuzzResourceName(f *testing.F) {
	for _, s := range []string{"intent-0001", "team/a b?#%", "~", ".", "..", "a.ics", "通知設定", "%2F", "a\x00b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		name, err := ResourceName(id)
		if err != nil {
			if id != "" && len(id)*3+len(ResourceSuffix) <= MaxResourceNameBytes {
				t.Fatalf("ResourceName(%q) refused a short id: %v", id, err)
			}
		} else {
			back, err := intentIDFromResourceName(name)
			if err != nil || back != id {
				t.Fatalf("decode(encode(%q)) = %q, %v", id, back, err)
			}
			if name == "." || name == ".." || strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
				strings.ContainsAny(name, "/%") || url.PathEscape(name) != name || len(name) > MaxResourceNameBytes {
				t.Fatalf("ResourceName(%q) = %q is not a safe path segment", id, name)
			}
			if u, err := url.PathUnescape(name); err != nil || u != name {
				t.Fatalf("ResourceName(%q) = %q changes when percent-decoded", id, name)
			}
		}
		// Read as a name: whatever decodes encodes back to itself.
		if back, err := intentIDFromResourceName(id); err == nil {
			if again, err := ResourceName(back); err != nil || again != id {
				t.Fatalf("intentIDFromResourceName(%q) = %q, which encodes to %q, %v", id, back, again, err)
			}
		}
	})
}

func TestScopedResourceName(t *testing.T) {
	for _, c := range []struct {
		name, scope, id, want string
	}{
		{"the default scope keeps the name of before scopes", "default", "intent-0001", "intent-0001.ics"},
		{"an empty scope is the default scope", "", "intent-0001", "intent-0001.ics"},
		{"another scope prefixes its name and two tildes", "team-a", "intent-0001", "team-a~~intent-0001.ics"},
		{"an encoded intent id keeps its escapes after the prefix", "team-a", "a~b/c", "team-a~~a~7Eb~2Fc.ics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ScopedResourceName(c.scope, c.id)
			if err != nil || got != c.want {
				t.Fatalf("ScopedResourceName(%q, %q) = %q, %v; want %q", c.scope, c.id, got, err, c.want)
			}
			scope, id, tag, err := scopeAndIntentFromResourceName(got)
			wantScope := c.scope
			if wantScope == "" {
				wantScope = "default"
			}
			if err != nil || scope != wantScope || id != c.id || tag != "" {
				t.Errorf("scopeAndIntentFromResourceName(%q) = %q, %q, %q, %v; want %q, %q and no tag", got, scope, id, tag, err, wantScope, c.id)
			}
		})
	}
	for _, c := range []struct{ name, scope, id string }{
		{"a scope with a dot is refused", "team.a", "intent-1"},
		{"a scope with upper case is refused", "Team", "intent-1"},
		{"a name longer than the limit is refused", "team-a", strings.Repeat("x", MaxResourceNameBytes-len(ResourceSuffix))},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := ScopedResourceName(c.scope, c.id); !errors.Is(err, ErrResourceName) {
				t.Errorf("ScopedResourceName(%q, …) = %q, %v; want ErrResourceName", c.scope, got, err)
			}
		})
	}
	for _, name := range []string{"default~~intent-1.ics", "Team~~intent-1.ics", "team-a~~.ics"} {
		t.Run("the name "+name+" is not one ScopedResourceName makes", func(t *testing.T) {
			if _, _, _, err := scopeAndIntentFromResourceName(name); !errors.Is(err, ErrResourceName) {
				t.Errorf("%v; want ErrResourceName", err)
			}
		})
	}
}

func TestATaggedNameSaysItsScopeIntentAndTagAndNoUntaggedNameLooksTagged(t *testing.T) {
	tag := strings.Repeat("0f", proof.TagHexDigits/2)
	for _, c := range []struct{ scope, id, want string }{
		{"default", "intent-0001", "intent-0001~." + tag + ".ics"},
		{"team-a", "intent-0001", "team-a~~intent-0001~." + tag + ".ics"},
		{"team-a", ".a~b/c", "team-a~~~2Ea~7Eb~2Fc~." + tag + ".ics"},
		{"team-a", "x~." + tag, "team-a~~x~7E." + tag + "~." + tag + ".ics"},
	} {
		got, err := taggedResourceName(c.scope, c.id, tag)
		if err != nil || got != c.want {
			t.Errorf("taggedResourceName(%q, %q) = %q, %v; want %q", c.scope, c.id, got, err, c.want)
			continue
		}
		scope, id, back, err := scopeAndIntentFromResourceName(got)
		if err != nil || scope != c.scope || id != c.id || back != tag {
			t.Errorf("scopeAndIntentFromResourceName(%q) = %q, %q, %q, %v", got, scope, id, back, err)
		}
		untagged, _ := ScopedResourceName(c.scope, c.id)
		if strings.Contains(untagged, tagSeparator) {
			t.Errorf("the untagged name %q holds %q", untagged, tagSeparator)
		}
	}
	for _, name := range []string{
		"intent-1~." + strings.ToUpper(tag) + ".ics",
		"intent-1~." + tag[1:] + ".ics",
		"~." + tag + ".ics",
		"intent-1~.x.ics",
		strings.Repeat("i", MaxResourceNameBytes-len(ResourceSuffix)-len(tagSeparator)-len(tag)+1) + "~." + tag + ".ics",
	} {
		if scope, id, back, err := scopeAndIntentFromResourceName(name); !errors.Is(err, ErrResourceName) {
			t.Errorf("scopeAndIntentFromResourceName(%.40q…) = %q, %q, %q, %v; want ErrResourceName", name, scope, id, back, err)
		}
	}
	long := strings.Repeat("i", MaxResourceNameBytes-len(ResourceSuffix)-len(tagSeparator)-len(tag)+1)
	if _, err := taggedResourceName("default", long, tag); !errors.Is(err, ErrResourceName) {
		t.Errorf("a tagged name one byte too long: %v; want ErrResourceName", err)
	}
	if name, err := taggedResourceName("default", long[1:], tag); err != nil || len(name) != MaxResourceNameBytes {
		t.Errorf("the longest tagged name: %d bytes, %v; want %d", len(name), err, MaxResourceNameBytes)
	}
}
