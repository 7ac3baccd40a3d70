package impl

import (
	"fmt"
	"testing"
)

// TestSelectSetReset registers a test package's three tiers (the middle
// one not available) and checks what each call switches.
func TestSelectSetReset(t *testing.T) {
	state := map[string]bool{}
	for _, im := range []struct {
		name      string
		available bool
	}{{"a", true}, {"b", false}, {"c", true}} {
		Register("impltest", im.name, im.available, func(on bool) { state[im.name] = on })
	}
	show := func() string { return fmt.Sprint(state["a"], state["b"], state["c"]) }
	if got := show(); got != "true false true" {
		t.Fatalf("after Register: %s", got)
	}
	cases := []struct {
		call string
		do   func() bool
		ok   bool
		want string
	}{
		{"Select a", func() bool { return Select("impltest", "a") }, true, "true false false"},
		{"Select c (b unavailable)", func() bool { return Select("impltest", "c") }, false, "true false false"},
		{"Select none", func() bool { return Select("impltest", "") }, true, "false false false"},
		{"Select unknown", func() bool { return Select("impltest", "z") }, false, "false false false"},
		{"Set c on", func() bool { return Set("impltest", "c", true) }, true, "false false true"},
		{"Set b on", func() bool { return Set("impltest", "b", true) }, false, "false false true"},
		{"Set unknown off", func() bool { return Set("impltest", "z", false) }, true, "false false true"},
		{"Set unknown on", func() bool { return Set("impltest", "z", true) }, false, "false false true"},
		{"Reset", func() bool { Reset("impltest"); return true }, true, "true false true"},
	}
	for _, tc := range cases {
		if ok := tc.do(); ok != tc.ok || show() != tc.want {
			t.Errorf("%s: %v, state %s; want %v, %s", tc.call, ok, show(), tc.ok, tc.want)
		}
	}
	want := []Impl{{"impltest", "a", true, true}, {"impltest", "b", false, false}, {"impltest", "c", true, true}}
	if got := List("impltest"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List: %v, want %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Register of a name did not panic")
		}
	}()
	Register("impltest", "a", true, func(bool) {})
}
