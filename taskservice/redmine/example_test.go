package redmine_test

import (
	"fmt"

	"github.com/sendtwice/sendtwice/taskservice/redmine"
)

// The mark an issue carries, and what a lookup asks Redmine for.
func ExampleMark() {
	digest := "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	mark := redmine.Mark("team-a", "minutes 12/1", digest)
	fmt.Println(mark)
	fmt.Printf("%q\n", redmine.MarkPrefix("team-a", "minutes 12/1"))
	scope, intent, _, ok := redmine.ParseMark(mark)
	fmt.Println(scope, intent, ok)
	fmt.Println(redmine.TaskID(42))
	// Output:
	// st1 team-a minutes+12%2F1 sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
	// "st1 team-a minutes+12%2F1 "
	// team-a minutes 12/1 true
	// 42
}
