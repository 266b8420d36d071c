// A minimal OpenTelemetry Collector for gsymprof's tests (issue 27): the
// OTLP receiver (gRPC + HTTP, profiles included) and the contrib file
// exporter, assembled from the Collector's published Go modules at the
// versions pinned in go.mod. Run it with `--config FILE`; run.sh writes one.
//
// Profiles are alpha in the Collector: a profiles pipeline is refused unless
// the feature gate `service.profilesSupport` is on. This binary turns it on
// itself (passing --feature-gates=service.profilesSupport as well is harmless).
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/featuregate"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// Version is the pinned Collector release this binary is built from
// (build.sh passes it with -ldflags -X main.Version=...).
var Version = "v0.161.0"

func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func main() {
	if err := featuregate.GlobalRegistry().Set("service.profilesSupport", true); err != nil {
		log.Fatalf("enabling service.profilesSupport: %v", err)
	}
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol-gsymprof-test",
			Description: "OTLP receiver + file exporter, for gsymprof's tests",
			Version:     Version,
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatalf("collector: %v", err)
	}
}
