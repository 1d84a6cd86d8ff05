package redminetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sendtwice/sendtwice/internal/proctest"
)

// recipe names the way a template is made; change it whenever prepare or
// the seed changes, so that templates cached by an older recipe are not
// used.
const recipe = "redminetest-4"

// projectIdentifier is the seeded project's identifier (and name).
const projectIdentifier = "redminetest"

// template is a prepared Redmine: an application tree with its gems
// resolved (app/) and a migrated, seeded database (db/redmine.sqlite3),
// never changed once made. Every Start copies it.
type template struct {
	dir       string
	ProjectID int    `json:"project_id"`
	FieldID   int    `json:"field_id"`
	APIKey    string `json:"api_key"`
	Took      string `json:"took"`
	// fresh is set when this test binary prepared the template.
	fresh bool
}

var (
	templatesMu sync.Mutex
	templates   = map[string]*templateOnce{}
)

type templateOnce struct {
	once sync.Once
	tpl  *template
	err  error
}

// getTemplate returns the template for a field name, preparing it at most
// once per test binary (and, through the cache, once per set of installed
// packages).
func getTemplate(fieldName string) (*template, error) {
	templatesMu.Lock()
	o := templates[fieldName]
	if o == nil {
		o = &templateOnce{}
		templates[fieldName] = o
	}
	templatesMu.Unlock()
	o.once.Do(func() { o.tpl, o.err = loadOrPrepare(fieldName) })
	return o.tpl, o.err
}

// cacheKey names a template by everything it is made from: the recipe,
// the field name and the versions of the installed packages.
func cacheKey(fieldName string) (string, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package} ${Version}\n",
		"redmine", "redmine-sqlite", "puma", "ruby", "ruby-rails", "ruby-sqlite3").Output()
	if err != nil {
		return "", fmt.Errorf("redminetest: reading the installed packages' versions with dpkg-query: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", recipe, fieldName, out)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// cacheRoot is the folder holding the cached templates.
func cacheRoot() (string, error) {
	if d := os.Getenv("REDMINETEST_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("redminetest: finding the user's cache folder (set REDMINETEST_CACHE): %w", err)
	}
	return filepath.Join(d, "sendtwice-redminetest"), nil
}

// loadOrPrepare returns the cached template for fieldName, preparing and
// publishing it first when there is none. An exclusive lock on a file in
// the cache folder makes test binaries running at once wait for the one
// preparing, rather than all preparing; the template is published by
// renaming its finished folder, so a folder under its final name is always
// complete.
func loadOrPrepare(fieldName string) (*template, error) {
	key, err := cacheKey(fieldName)
	if err != nil {
		return nil, err
	}
	root, err := cacheRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("redminetest: making the cache folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(root, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redminetest: opening the cache's lock file: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("redminetest: locking the cache: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()

	final := filepath.Join(root, key)
	if tpl, err := readTemplate(final); err == nil {
		now := time.Now()
		_ = os.Chtimes(final, now, now) // used: removeStale keeps it
		return tpl, nil
	}
	os.RemoveAll(final) // an unreadable leftover
	removeStale(root, key)
	work, err := os.MkdirTemp(root, "prepare-")
	if err != nil {
		return nil, fmt.Errorf("redminetest: making a folder to prepare in: %w", err)
	}
	if err := prepare(work, fieldName); err != nil {
		os.RemoveAll(work)
		return nil, err
	}
	if err := os.Rename(work, final); err != nil {
		os.RemoveAll(work)
		return nil, fmt.Errorf("redminetest: publishing the prepared template: %w", err)
	}
	tpl, err := readTemplate(final)
	if tpl != nil {
		tpl.fresh = true
	}
	return tpl, err
}

// removeStale removes unfinished preparations (the caller holds the lock,
// so nobody is preparing) and templates no test binary has used for a week
// (those of packages since upgraded, of field names no longer used).
func removeStale(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == keep {
			continue
		}
		if strings.HasPrefix(name, "prepare-") {
			os.RemoveAll(filepath.Join(root, name))
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 7*24*time.Hour {
			os.RemoveAll(filepath.Join(root, name))
		}
	}
}

func readTemplate(dir string) (*template, error) {
	b, err := os.ReadFile(filepath.Join(dir, "template.json"))
	if err != nil {
		return nil, err
	}
	tpl := &template{dir: dir}
	if err := json.Unmarshal(b, tpl); err != nil {
		return nil, fmt.Errorf("redminetest: reading %s: %w", filepath.Join(dir, "template.json"), err)
	}
	if tpl.ProjectID == 0 || tpl.FieldID == 0 || tpl.APIKey == "" {
		return nil, fmt.Errorf("redminetest: %s is incomplete", filepath.Join(dir, "template.json"))
	}
	for _, p := range []string{"app/Gemfile.lock", "app/bin/rails", "db/redmine.sqlite3"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return nil, fmt.Errorf("redminetest: the template in %s is incomplete: %w", dir, err)
		}
	}
	return tpl, nil
}

// The seed, run by bin/rails runner after the migration and the default
// data: the REST API on, start dates not defaulted to today (else a past
// due date is refused), no notification mails (each create would render
// them, slowing a loaded Redmine), one project with issue tracking and
// every tracker, and the mark's custom field. It writes what the harness needs as JSON.
const seedRuby = `require 'json'
field_name = ENV.fetch('REDMINETEST_FIELD')
ident = ENV.fetch('REDMINETEST_PROJECT')
Setting.rest_api_enabled = '1'
Setting.default_issue_start_date_to_creation_date = '0'
Setting.notified_events = []
trackers = Tracker.all.to_a
raise 'redminetest: no tracker after redmine:load_default_data' if trackers.empty?
raise 'redminetest: no issue status after redmine:load_default_data' if IssueStatus.count == 0
project = Project.new(name: ident, identifier: ident, is_public: false)
project.enabled_module_names = ['issue_tracking']
project.trackers = trackers
project.save!
field = IssueCustomField.new(name: field_name, field_format: 'string', is_for_all: true,
  is_filter: true, searchable: true, visible: true, is_required: false)
field.trackers = trackers
field.save!
admin = User.find_by!(login: 'admin')
File.write(ENV.fetch('REDMINETEST_OUT'), JSON.generate(
  project_id: project.id, field_id: field.id, api_key: admin.api_key))
`

// prepare makes a template in dir: a copy of Debian's Redmine with its own
// instance folder, gems resolved, the database migrated, loaded with the
// default data and seeded.
func prepare(dir, fieldName string) error {
	began := time.Now()
	app := filepath.Join(dir, "app")
	if err := copyTree(debianRedmine, app, func(rel string) bool {
		// Replaced below: links to the system instance and its files.
		return rel == "instances" || rel == "Gemfile.lock" || rel == "config/database.yml"
	}); err != nil {
		return fmt.Errorf("redminetest: copying %s: %w", debianRedmine, err)
	}
	if err := os.WriteFile(filepath.Join(app, "Gemfile.local"), []byte("gem 'puma'\n"), 0o644); err != nil {
		return fmt.Errorf("redminetest: writing Gemfile.local: %w", err)
	}
	if err := layInstance(dir); err != nil {
		return err
	}
	env := railsEnv(dir)
	steps := [][]string{
		{"bundle", "install", "--local"},
		// Two processes: in one, the default data fails on a stale schema
		// cache, still exits 0 and leaves no trackers.
		{"bin/rake", "db:migrate"},
		{"bin/rake", "redmine:load_default_data"},
	}
	for _, argv := range steps {
		if err := run(app, env, filepath.Join(dir, "prepare.log"), argv...); err != nil {
			return err
		}
	}
	seed := filepath.Join(dir, "seed.rb")
	out := filepath.Join(dir, "seed.json")
	if err := os.WriteFile(seed, []byte(seedRuby), 0o644); err != nil {
		return fmt.Errorf("redminetest: writing the seed: %w", err)
	}
	env = append(env, "REDMINETEST_FIELD="+fieldName, "REDMINETEST_PROJECT="+projectIdentifier, "REDMINETEST_OUT="+out)
	if err := run(app, env, filepath.Join(dir, "prepare.log"), "bin/rails", "runner", seed); err != nil {
		return err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return fmt.Errorf("redminetest: the seed wrote no result: %w", err)
	}
	tpl := &template{}
	if err := json.Unmarshal(b, tpl); err != nil {
		return fmt.Errorf("redminetest: reading the seed's result: %w", err)
	}
	os.Remove(out)
	tpl.Took = time.Since(began).Round(time.Millisecond).String()
	b, _ = json.Marshal(tpl)
	if err := os.WriteFile(filepath.Join(dir, "template.json"), b, 0o600); err != nil {
		return fmt.Errorf("redminetest: writing template.json: %w", err)
	}
	return nil
}

// layInstance writes what ties the application tree in dir/app to its own
// place: the Gemfile's look-up of database configurations (which names
// Debian's folder), the instance folder with its database configuration
// for dir/db/redmine.sqlite3 and a new secret, and empty log and tmp
// folders.
func layInstance(dir string) error {
	app := filepath.Join(dir, "app")
	gemfile := filepath.Join(app, "Gemfile")
	b, err := os.ReadFile(gemfile)
	if err != nil {
		return fmt.Errorf("redminetest: reading the Gemfile: %w", err)
	}
	// The Gemfile loads the gems of the adapters named by the database
	// configurations it finds with Dir['<root>/{config,instances/*/config}/database.yml'].
	text := string(b)
	if i := strings.Index(text, "/{config,instances/*/config}/database.yml"); i >= 0 {
		start := strings.LastIndex(text[:i], "Dir['")
		if start < 0 {
			return fmt.Errorf("redminetest: the Gemfile's database.yml look-up is not as expected")
		}
		text = text[:start] + "Dir['" + app + text[i:]
	} else {
		return fmt.Errorf("redminetest: the Gemfile has no database.yml look-up")
	}
	if err := os.WriteFile(gemfile, []byte(text), 0o644); err != nil {
		return fmt.Errorf("redminetest: writing the Gemfile: %w", err)
	}
	inst := filepath.Join(app, "instances", "default")
	for _, d := range []string{"config", "log", "tmp", "files", "public/plugin_assets"} {
		if err := os.MkdirAll(filepath.Join(inst, d), 0o755); err != nil {
			return fmt.Errorf("redminetest: making the instance folder: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
		return fmt.Errorf("redminetest: making the database folder: %w", err)
	}
	yml := fmt.Sprintf("production:\n  adapter: sqlite3\n  database: %q\n  pool: 10\n  timeout: 10000\n",
		filepath.Join(dir, "db", "redmine.sqlite3"))
	for _, p := range []string{filepath.Join(inst, "config", "database.yml"), filepath.Join(app, "config", "database.yml")} {
		os.Remove(p)
		if err := os.WriteFile(p, []byte(yml), 0o644); err != nil {
			return fmt.Errorf("redminetest: writing %s: %w", p, err)
		}
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	if err := os.WriteFile(filepath.Join(inst, "config", "secret_key.txt"), []byte(hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
		return fmt.Errorf("redminetest: writing the secret: %w", err)
	}
	return nil
}

// railsEnv is the environment of Redmine's commands for the tree in dir:
// the parent's, without what would point Rails, Rack or Bundler elsewhere.
func railsEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "DATABASE_URL", name == "RACK_ENV", name == "RAILS_ENV", name == "HOME",
			name == "RAILS_LOG_TO_STDOUT", name == "REDMINE_INSTANCE", name == "X_DEBIAN_SITEID",
			name == "REDMINE_LANG", name == "RUBYOPT", name == "GEM_HOME", name == "GEM_PATH",
			name == "RAILS_RELATIVE_URL_ROOT", name == "LC_ALL",
			strings.HasPrefix(name, "BUNDLE_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"RAILS_ENV=production",
		"REDMINE_INSTANCE=default",
		"BUNDLE_GEMFILE="+filepath.Join(dir, "app", "Gemfile"),
		"HOME="+dir,
		"REDMINE_LANG=en",
		"LC_ALL=C.UTF-8",
	)
}

// prepareStepTimeout bounds each command of a preparation.
const prepareStepTimeout = 5 * time.Minute

// run runs one of Redmine's commands in app, appending its output to
// logFile; a failure's error holds the end of that output.
func run(app string, env []string, logFile string, argv ...string) error {
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("redminetest: opening %s: %w", logFile, err)
	}
	defer log.Close()
	fmt.Fprintf(log, "$ %s\n", strings.Join(argv, " "))
	// A step takes seconds; the bound keeps a hung one from holding the
	// cache's lock, and every test binary waiting on it, for ever.
	ctx, cancel := context.WithTimeout(context.Background(), prepareStepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if !strings.Contains(argv[0], "/") {
		if _, err := exec.LookPath(argv[0]); err != nil {
			return fmt.Errorf("redminetest: %s is not installed (Debian's ruby-bundler, a dependency of redmine): %w", argv[0], err)
		}
	}
	cmd.Dir = app
	cmd.Env = env
	cmd.Stdout = log
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("redminetest: preparing Redmine: %s: %w; the end of its output:\n%s", strings.Join(argv, " "), err, proctest.TailOf(logFile, 3000))
	}
	return nil
}

// copyTree copies the folder src to dst: folders, regular files (with
// their modes) and symbolic links (a relative link is made absolute, so it
// still names its target from the new place). skip, given a path relative
// to src with slashes, leaves that path out.
func copyTree(src, dst string, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel != "." && skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(path), link)
			}
			return os.Symlink(link, target)
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(path, target, info.Mode().Perm()|0o200)
		default:
			return nil
		}
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
