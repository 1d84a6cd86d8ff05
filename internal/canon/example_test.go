package canon_test

import (
	"errors"
	"fmt"

	"github.com/sendtwice/sendtwice/internal/canon"
)

func ExampleDigest() {
	a := []byte(`{"title": "Call the plumber", "due_at": null, "priority": 2.0}`)
	b := []byte(`{
		"priority": 2,
		"due_at": null,
		"title": "Call the plumber"
	}`)

	da, _ := canon.Digest(a)
	db, _ := canon.Digest(b)
	fmt.Println(da)
	fmt.Println(da == db)

	_, err := canon.Digest([]byte(`{"title": "a", "title": "b"}`))
	fmt.Println(errors.Is(err, canon.ErrDuplicateName))
	fmt.Println(err)
	// Output:
	// sha256:b5ebf22479fc063211ff9769bbc06097027c8a97d6887d5778b4f99299c52c97
	// true
	// true
	// canon: duplicate member name "title" at $ (offset 15)
}

func ExampleCanonicalize() {
	out, err := canon.Canonicalize([]byte(`{"b": [1E2, 0.50, "\u00e9"], "a": {"z": true, "y": null}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(out))
	// Output:
	// {"a":{"y":null,"z":true},"b":[100,0.5,"é"]}
}
