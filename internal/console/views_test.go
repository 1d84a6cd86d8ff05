package console

import (
	"bytes"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sendtwice/sendtwice/send"
)

// TestContrast holds the stylesheet's colour pairs to WCAG 2.2: 4.5:1 for
// text (1.4.3), 3:1 for the focus ring and borders of controls (1.4.11).
func TestContrast(t *testing.T) {
	css, err := os.ReadFile("static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{6});`).FindAllStringSubmatch(string(css), -1) {
		vars[m[1]] = m[2]
	}
	for _, p := range []struct {
		fg, bg string
		min    float64
	}{
		{"fg", "bg", 4.5}, {"fg", "panel", 4.5}, {"muted", "bg", 4.5}, {"muted", "panel", 4.5},
		{"link", "bg", 4.5}, {"link", "panel", 4.5}, {"button-fg", "button-bg", 4.5}, {"secondary-fg", "bg", 4.5},
		{"ok-fg", "ok-bg", 4.5}, {"bad-fg", "bad-bg", 4.5}, {"warn-fg", "warn-bg", 4.5},
		{"pending-fg", "pending-bg", 4.5}, {"unknown-fg", "unknown-bg", 4.5},
		{"ok-fg", "bg", 4.5}, {"bad-fg", "bg", 4.5}, {"warn-fg", "bg", 4.5},
		{"focus", "bg", 3}, {"focus", "panel", 3}, {"line", "bg", 3},
	} {
		fg, bg := vars[p.fg], vars[p.bg]
		if fg == "" || bg == "" {
			t.Errorf("--%s or --%s is not defined as #rrggbb", p.fg, p.bg)
			continue
		}
		if r := contrast(fg, bg); r < p.min {
			t.Errorf("--%s %s on --%s %s: contrast %.2f:1, want at least %.1f:1", p.fg, fg, p.bg, bg, r, p.min)
		}
	}
}

// contrast is the WCAG contrast ratio of two sRGB colours.
func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

func luminance(hex string) float64 {
	ch := func(i int) float64 {
		v, _ := strconv.ParseUint(hex[i:i+2], 16, 8)
		c := float64(v) / 255
		if c <= 0.04045 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*ch(1) + 0.7152*ch(3) + 0.0722*ch(5)
}

func TestTextLang(t *testing.T) {
	for in, want := range map[string]string{
		"補上通知設定的檢查項目":    "zh",
		"通知設定のチェック項目":    "ja",
		"알림 설정":          "ko",
		"add the checks": "",
		"":               "",
	} {
		if got := textLang(in); got != want {
			t.Errorf("textLang(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSpan(t *testing.T) {
	if got := span(812000, 816500); got != "13:32.0–13:36.5" {
		t.Errorf("span = %q", got)
	}
	if got := span(0, 59999); got != "0:00.0–1:00.0" {
		t.Errorf("span = %q", got)
	}
}

func TestHostAllowed(t *testing.T) {
	hosts, err := DefaultHosts("10.1.2.3:8080")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseHostRules(append(hosts, "console.example", "[fd00::1]:9000"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Console{hosts: rules}
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "LOCALHOST:8080": true, "[::1]:8080": true, "10.1.2.3:8080": true,
		"console.example": true, "console.example:443": true, "[fd00::1]:9000": true,
		"127.0.0.1:8081": false, "localhost": false, "127.1.2.3:8080": false, "[fd00::1]:9001": false,
		"evil.example:8080": false, "10.0.0.1:8080": false, "": false, "localhost.evil.example:8080": false,
		"console.example.evil:80": false, "user@console.example": false,
	} {
		if got := c.hostAllowed(host); got != want {
			t.Errorf("hostAllowed(%q) = %v", host, got)
		}
	}
	if _, err := parseHostRules(nil); err == nil {
		t.Error("an empty allowlist was accepted")
	}
	if _, err := parseHostRules([]string{"http://x/"}); err == nil {
		t.Error("a URL was accepted as a host")
	}
}

func TestDefaultHosts(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "localhost:8080 127.0.0.1:8080 [::1]:8080 127.0.0.1:8080",
		"0.0.0.0:80":     "localhost:80 127.0.0.1:80 [::1]:80",
		":80":            "localhost:80 127.0.0.1:80 [::1]:80",
		"host.lan:9":     "localhost:9 127.0.0.1:9 [::1]:9 host.lan:9",
	} {
		got, err := DefaultHosts(addr)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("DefaultHosts(%q) = %q, %v; want %s", addr, got, err, want)
		}
	}
}

func TestAReceiptShowsItsScopeAndADeletedTask(t *testing.T) {
	pages, err := parseTemplates()
	if err != nil {
		t.Fatal(err)
	}
	render := func(t *testing.T, name string, v resultView) string {
		t.Helper()
		var b bytes.Buffer
		if err := pages["review"].ExecuteTemplate(&b, name, v); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		receipt   send.Receipt
		want, not []string
	}{
		{"a replay of a deleted task says the task was deleted and nothing was created again",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "team-a", TaskDeleted: true},
			[]string{`data-task-deleted="true"`, "(the task was deleted since)", "it was not created again", `Scope <code class="scope">team-a</code>`, "replayed (task deleted)"}, nil},
		{"a replay of a task that exists says nothing of a deletion",
			send.Receipt{Outcome: send.Replayed, TaskID: "fake-task-0001", IntentID: "intent-0001", Scope: "default"},
			[]string{`Scope <code class="scope">default</code>`}, []string{"deleted"}},
		{"a receipt without a scope names none",
			send.Receipt{Outcome: send.Created, TaskID: "fake-task-0001", IntentID: "intent-0001"},
			[]string{"Stream message"}, []string{`class="scope"`, `class="note"`}},
		{"a conflict shows what the task service said about it",
			send.Receipt{Outcome: send.Conflict, TaskID: "fake-task-0001", IntentID: "intent-0001", Note: "the intent ledger holds this key for another request digest"},
			[]string{`<p class="note">The task service says: the intent ledger holds this key for another request digest</p>`}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := c.receipt
			v := resultView{N: 1, At: at, Receipt: &rc}
			out := render(t, "result", v) + render(t, "sendrow", v)
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the result lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("the result holds %q:\n%s", w, out)
				}
			}
		})
	}
}
