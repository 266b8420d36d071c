// promparse checks Prometheus text exposition with Prometheus's own parser
// (github.com/prometheus/common/expfmt, the module the Collector already
// pins): reads stdin, exits 1 with the parser's error, else prints one line
// per sample, "NAME{LABELS} VALUE" in the parser's reading, sorted.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func main() {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promparse:", err)
		os.Exit(1)
	}
	var lines []string
	for name, family := range families {
		for _, m := range family.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %g", name, strings.Join(labels, ","), value(m)))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}
