// Package redminetest runs a private, real Redmine for tests: Debian's
// Redmine 5.0 (packages redmine, redmine-sqlite and puma) served by Puma
// on 127.0.0.1, with a SQLite database of its own, a project with issue
// tracking, the mark's issue custom field, the REST API on and the
// administrator's API key. What a test asserts about the server is read
// from the server itself: issues from its REST API, requests and answers
// from its own request log.
//
// Nothing is written under /usr, /etc or /var: each server runs a copy of
// /usr/share/redmine, whose instance folder (instances/default: config,
// log, tmp, files), database configuration and Gemfile's look-up of
// database configurations are replaced by its own.
//
// # Preparing once, copying per server
//
// Resolving the gems, migrating a database, loading Redmine's default data
// and seeding it takes four processes and 15 to 50 s on two cores
// (depending on what else runs); booting Puma on a prepared database 3 to
// 8 s. So the application tree with its gems resolved (bundle install
// --local, with a Gemfile.local naming puma) and a migrated, seeded
// database are prepared once, as a template, and every Start copies the
// template (16 MB, 1,700 files, under a second) into the test's temporary
// directory, points the copy's configuration at the copy's database, gives
// it a new secret and empty log and tmp folders, and boots it. Servers
// therefore never share a database, and Starts in parallel tests are
// independent. The migration and the default data run as two processes: in
// one, the default data fails on a stale schema cache, still exits 0 and
// leaves no trackers. The seed (bin/rails runner) raises when there is no
// tracker.
//
// The template is kept in the user's cache folder
// (os.UserCacheDir()/sendtwice-redminetest, or $REDMINETEST_CACHE), under a
// key made of the installed versions of the packages (dpkg-query), the
// field name and the recipe's version, rather than in a temporary folder
// of the test binary: a test binary cannot remove a folder when it exits
// without a TestMain in every package that uses the harness, and a
// template per binary would cost every binary (this package's, the
// adapter's, the executor's) its 15 s in every run. Test binaries running
// at once take an exclusive lock on a file in the cache folder while they
// look for or prepare the template, so one prepares and the others wait;
// a template is prepared in a folder of its own and published by renaming
// it, so a template under its key is always complete, and it is never
// changed once published. Unfinished preparations and templates unused
// for a week are removed by the next preparation. Within one binary, each
// field name's template is looked up once (sync.Once).
//
// # The request log
//
// Redmine (Rails, production) writes its log to
// instances/default/log/production.log, appended across restarts, every
// line tagged with the request's id:
//
//	I, [2026-12-01T21:18:44.650940 #29214]  INFO -- : [dd971d71-...] Started POST "/issues.json" for 127.0.0.1 at ...
//	I, [2026-12-01T21:18:44.844013 #29214]  INFO -- : [dd971d71-...] Completed 201 Created in 192ms (...)
//
// The "Started" line is written when the request is received, the
// "Completed" line before the answer is sent, so by the time a client has
// its answer both are in the log; ParseLog matches them by the request's
// id, however concurrent requests interleave. Posts counts the POSTs to
// /issues.json received and those answered 201: the creates attempted and
// the issues made. A request whose Ruby process is killed before it is
// answered shows as received with no answer.
//
// # What the issue filters find (checked by TestFilters)
//
// The adapter looks keys up with GET /issues.json filters on the mark's
// custom field (cf_<id>). On Redmine 5.0 with SQLite:
//
//   - The short form cf_<id>=VALUE is an exact, case-sensitive match that
//     keeps leading and trailing spaces and finds values with spaces, +, &,
//     % and non-ASCII letters (sent URL-encoded), but: without status_id=*
//     it leaves closed issues out; it splits VALUE at "|" into
//     alternatives (a value holding "|" is never found); and a VALUE that
//     begins with an operator ("^", "~", "!", "*", "$", ...) is read as
//     that operator.
//   - The long form f[]=cf_<id>&op[cf_<id>]=OP&v[cf_<id>][]=VALUE takes
//     VALUE as it is ("|" included). With f[] present Redmine ignores the
//     short parameters (status_id=* among them) and drops its default
//     "open issues only" filter, so closed issues are found; adding
//     f[]=status_id&op[status_id]=* says so explicitly.
//   - OP "=" is the exact match; OP "^" (starts with) is SQL LIKE with %
//     and _ escaped (taken literally), which on SQLite ignores the case of
//     ASCII letters (and not of others): a prefix look-up can find marks
//     that differ in case, so the adapter compares what it finds exactly.
//   - A filter on a custom field id that does not exist, or on a field
//     that is not a filter (is_filter false), is dropped without an error:
//     the answer lists the whole project. An empty VALUE for "^" is
//     refused with 422.
//
// # What keys and permissions get (checked by TestServer)
//
// Redmine takes a request with a wrong API key as anonymous, not as an
// error: a request anonymous users may make is answered (GET
// /issues.json with no project_id: 200 and an empty list); one that
// needs a user is refused with 401 (the private project's listing,
// GET /users/current.json, which therefore tells a wrong key from a good
// one). A user who is not a member of the private project gets 403 on its
// listing and 422 "Project cannot be blank" on a create in it; a Reporter
// may create issues but gets 403 on a delete. AddUser makes such users.
//
// It is a test rig, as internal/boundary checks: like internal/testenv it
// must never be imported by a production package. It never stands in for
// Redmine: every figure a test reads from it comes from the real
// server's REST API or log.
package redminetest
