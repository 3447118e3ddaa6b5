package config

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Reference renders the schema as a Markdown table, one row per key, for
// the README. It is generated, never written by hand: a test fails when the
// README's copy is stale.
func Reference() string {
	var b strings.Builder
	b.WriteString("| key | type | default | allowed | description |\n")
	b.WriteString("|---|---|---|---|---|\n")
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		props, _ := node["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		// Keep the schema's own order where it matters to people: version
		// first, then the rest alphabetically.
		sort.Slice(keys, func(i, j int) bool {
			if keys[i] == "version" || keys[j] == "version" {
				return keys[i] == "version"
			}
			return keys[i] < keys[j]
		})
		for _, k := range keys {
			p := props[k].(map[string]any)
			key := prefix + k
			if _, nested := p["properties"]; nested {
				if d, ok := p["description"].(string); ok {
					fmt.Fprintf(&b, "| `%s` | object | | | %s |\n", key, cell(d))
				}
				walk(key+".", p)
				continue
			}
			desc, _ := p["description"].(string)
			if s, _ := p["x-sensitive"].(bool); s {
				desc = "**secret** (x-sensitive). " + desc
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", key, typeOf(p), defaultOf(p), allowed(p), cell(desc))
		}
	}
	walk("", schema().Doc())
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func typeOf(p map[string]any) string {
	if t, ok := p["type"].(string); ok {
		return t
	}
	if _, ok := p["enum"]; ok {
		return "string"
	}
	if _, ok := p["const"]; ok {
		return "integer"
	}
	return ""
}

func defaultOf(p map[string]any) string {
	v, ok := p["default"]
	if !ok {
		return ""
	}
	j, _ := json.Marshal(v)
	if string(j) == `""` {
		return "(empty)"
	}
	return "`" + string(j) + "`"
}

func allowed(p map[string]any) string {
	var parts []string
	if e, ok := p["enum"].([]any); ok {
		var vs []string
		for _, v := range e {
			vs = append(vs, fmt.Sprint(v))
		}
		parts = append(parts, strings.Join(vs, ", "))
	}
	if c, ok := p["const"]; ok {
		parts = append(parts, fmt.Sprint(c))
	}
	min, hasMin := p["minimum"]
	max, hasMax := p["maximum"]
	xmin, hasXMin := p["exclusiveMinimum"]
	switch {
	case hasXMin && hasMax:
		parts = append(parts, fmt.Sprintf("> %v, ≤ %v", xmin, max))
	case hasMin || hasMax:
		parts = append(parts, fmt.Sprintf("%v..%v", min, max))
	}
	if pat, ok := p["pattern"].(string); ok {
		parts = append(parts, "`"+strings.ReplaceAll(pat, "|", `\|`)+"`")
	}
	if ml, ok := p["maxLength"]; ok {
		parts = append(parts, fmt.Sprintf("≤ %v chars", ml))
	}
	return strings.Join(parts, "; ")
}
