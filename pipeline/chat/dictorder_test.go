package chat

import (
	"strings"
	"testing"
)

// TestOrderedDicts: dict calls of keyword arguments in tags become dict
// literals in order; text, comments, raw blocks, strings, methods and
// calls with positional arguments stay as written. (The renderings are
// checked against jinja2 in TestExpressionsMatchJinja2.)
func TestOrderedDicts(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{{ dict(b=1, a=2) }}", "{{ ({'b': 1, 'a': 2}) }}"},
		{"{% set d = dict(b=1, a=x.y(2, 3)) %}", "{% set d = ({'b': 1, 'a': x.y(2, 3)}) %}"},
		{"{{ dict() }}", "{{ ({}) }}"},
		{"{{ dict(o=dict(z=1, y=2)) }}", "{{ ({'o': ({'z': 1, 'y': 2})}) }}"},
		{"{{ dict(s='a, b=)', t=\"}}\") }}", "{{ ({'s': 'a, b=)', 't': \"}}\"}) }}"},
		{"{{ dict(x=a == b) }}", "{{ ({'x': a == b}) }}"},
		{"text dict(b=1, a=2) {{ 1 }}", "text dict(b=1, a=2) {{ 1 }}"},
		{"{# dict(b=1, a=2) #}{{ dict(b=1) }}", "{# dict(b=1, a=2) #}{{ ({'b': 1}) }}"},
		{"{% raw %}{{ dict(b=1, a=2) }}{% endraw %}", "{% raw %}{{ dict(b=1, a=2) }}{% endraw %}"},
		{"{%- raw -%}{{ dict(b=1) }}{%- endraw %}{{ dict(c=1) }}", "{%- raw -%}{{ dict(b=1) }}{%- endraw %}{{ ({'c': 1}) }}"},
		{"{{ 'dict(b=1, a=2)' }}", "{{ 'dict(b=1, a=2)' }}"},
		{"{{ x.dict(b=1) }}", "{{ x.dict(b=1) }}"},
		{"{{ mydict(b=1) }}", "{{ mydict(b=1) }}"},
		{"{{ dict(m, b=1) }}", "{{ dict(m, b=1) }}"},
		{"{{ dict(b=1,) }}", "{{ dict(b=1,) }}"},
		{"{{ dict(b=1 }}", "{{ dict(b=1 }}"},
		{"{{ dict(b=[1) }}", "{{ dict(b=[1) }}"},
		{"{{ 'unterminated }}", "{{ 'unterminated }}"},
		{"{% raw %}never closed", "{% raw %}never closed"},
		{"{# never closed dict(a=1)", "{# never closed dict(a=1)"},
		{"a { b } {{ dict(q=1) }}", "a { b } {{ ({'q': 1}) }}"},
	} {
		if got := orderedDicts(c.in); got != c.want {
			t.Errorf("orderedDicts(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzOrderedDicts: the rewrite never panics, leaves a source without
// "dict" as it is, and a second pass changes nothing.
func FuzzOrderedDicts(f *testing.F) {
	for _, s := range []string{"{{ dict(b=1, a=2) }}", "{% set d = dict(o=dict(z=1), s='}}') %}{{ d }}", "{# dict(a=1) #}{% raw %}dict(a=1){% endraw %}", "{{ dict(m, b=1) }}", "{{ dict(b=[1) }}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		once := orderedDicts(src)
		if !strings.Contains(src, "dict") && once != src {
			t.Fatalf("orderedDicts(%q) = %q: changed a source without dict", src, once)
		}
		if twice := orderedDicts(once); twice != once {
			t.Fatalf("orderedDicts(%q) = %q, then %q", src, once, twice)
		}
	})
}
