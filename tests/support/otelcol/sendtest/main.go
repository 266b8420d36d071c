// sendtest: the harness self-test's sender. It builds, with the pinned
// Collector's own pdata types, two small OTLP profiles (issue 27) and sends
// one over OTLP/gRPC and one over OTLP/HTTP (protobuf) to the Collector that
// run.sh started. selftest.sh then checks that decode.py prints what was sent.
//
// What is sent (both requests, told apart by the resource attribute
// gsymprof.selftest.transport = grpc | http):
//   - dictionary tables whose index 0 is the zero entry, as the proto requires;
//   - two mappings, each with a GNU build ID attribute;
//   - functions main, hot_loop, add_one, mix and __libc_start_call_main;
//   - a location whose lines are [add_one, hot_loop] (add_one inlined into
//     hot_loop), one with a three-deep chain [mix, add_one, hot_loop], one
//     without lines (an unsymbolized address);
//   - samples with thread.name / thread.id / process.pid attributes, one with
//     per-sample timestamps only (no values);
//   - a cpu/nanoseconds profile and a samples/count profile (in
//     opentelemetry-proto v1.10+ a Profile has one sample_type, so two value
//     types are two Profiles in one ScopeProfiles).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type builder struct {
	d       pprofile.ProfilesDictionary
	strings map[string]int32
}

func newBuilder(d pprofile.ProfilesDictionary) *builder {
	b := &builder{d: d, strings: map[string]int32{}}
	// Index 0 of every table is the zero value.
	b.str("")
	d.MappingTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	d.StackTable().AppendEmpty()
	return b
}

func (b *builder) str(s string) int32 {
	if i, ok := b.strings[s]; ok {
		return i
	}
	b.d.StringTable().Append(s)
	i := int32(b.d.StringTable().Len() - 1)
	b.strings[s] = i
	return i
}

func (b *builder) attr(key string, value any) int32 {
	kv := b.d.AttributeTable().AppendEmpty()
	kv.SetKeyStrindex(b.str(key))
	switch v := value.(type) {
	case string:
		kv.Value().SetStr(v)
	case int:
		kv.Value().SetInt(int64(v))
	default:
		panic(fmt.Sprintf("attr %s: unsupported %T", key, value))
	}
	return int32(b.d.AttributeTable().Len() - 1)
}

func (b *builder) function(name, file string) int32 {
	f := b.d.FunctionTable().AppendEmpty()
	f.SetNameStrindex(b.str(name))
	f.SetSystemNameStrindex(b.str(name))
	f.SetFilenameStrindex(b.str(file))
	return int32(b.d.FunctionTable().Len() - 1)
}

func (b *builder) mapping(file string, start, limit, offset uint64, buildID string) int32 {
	m := b.d.MappingTable().AppendEmpty()
	m.SetFilenameStrindex(b.str(file))
	m.SetMemoryStart(start)
	m.SetMemoryLimit(limit)
	m.SetFileOffset(offset)
	m.AttributeIndices().Append(b.attr("process.executable.build_id.gnu", buildID))
	return int32(b.d.MappingTable().Len() - 1)
}

// location: fns are innermost first, as Location.lines are (the last entry
// is the function the others were inlined into).
func (b *builder) location(mapping int32, addr uint64, fns ...int32) int32 {
	l := b.d.LocationTable().AppendEmpty()
	l.SetMappingIndex(mapping)
	l.SetAddress(addr)
	for i, f := range fns {
		ln := l.Lines().AppendEmpty()
		ln.SetFunctionIndex(f)
		ln.SetLine(int64(10 * (i + 1)))
	}
	return int32(b.d.LocationTable().Len() - 1)
}

// stack: locations leaf first, as Stack.location_indices are.
func (b *builder) stack(locs ...int32) int32 {
	s := b.d.StackTable().AppendEmpty()
	s.LocationIndices().Append(locs...)
	return int32(b.d.StackTable().Len() - 1)
}

func build(transport string, now time.Time) pprofile.Profiles {
	pd := pprofile.NewProfiles()
	b := newBuilder(pd.Dictionary())

	exe := b.mapping("/usr/bin/fixture", 0x400000, 0x401000, 0, "0123456789abcdef0123456789abcdef01234567")
	libc := b.mapping("/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000028000, 0x7f00001bd000, 0x28000, "fedcba9876543210fedcba9876543210fedcba98")

	fMain := b.function("main", "fixture.c")
	fHot := b.function("hot_loop", "fixture.c")
	fAdd := b.function("add_one", "fixture.h")
	fMix := b.function("mix", "fixture.h")
	fStart := b.function("__libc_start_call_main", "libc-start.c")

	lStart := b.location(libc, 0x7f000002a1ca, fStart)
	lMain := b.location(exe, 0x400500, fMain)
	lHotAdd := b.location(exe, 0x400610, fAdd, fHot)       // add_one inlined into hot_loop
	lHotMix := b.location(exe, 0x400620, fMix, fAdd, fHot) // mix inlined into add_one inlined into hot_loop
	lRaw := b.location(exe, 0x400700)                      // no lines: unsymbolized

	s1 := b.stack(lHotAdd, lMain, lStart)
	s2 := b.stack(lHotMix, lMain, lStart)
	s3 := b.stack(lRaw, lMain, lStart)

	thName := b.attr("thread.name", "fixture")
	thID := b.attr("thread.id", 4242)
	pid := b.attr("process.pid", 4242)
	thName2 := b.attr("thread.name", "worker 1")
	thID2 := b.attr("thread.id", 4243)

	rp := pd.ResourceProfiles().AppendEmpty()
	ra := rp.Resource().Attributes()
	ra.PutStr("service.name", "fixture")
	ra.PutStr("gsymprof.selftest.transport", transport)
	sp := rp.ScopeProfiles().AppendEmpty()
	sp.Scope().SetName("gsymprof")
	sp.Scope().SetVersion("selftest")

	const period = 52631578 // 19 Hz in nanoseconds
	start := pcommon.NewTimestampFromTime(now.Add(-10 * time.Second))

	cpu := sp.Profiles().AppendEmpty()
	cpu.SampleType().SetTypeStrindex(b.str("cpu"))
	cpu.SampleType().SetUnitStrindex(b.str("nanoseconds"))
	cpu.PeriodType().SetTypeStrindex(b.str("cpu"))
	cpu.PeriodType().SetUnitStrindex(b.str("nanoseconds"))
	cpu.SetPeriod(period)
	cpu.SetTime(start)
	cpu.SetDurationNano(uint64(10 * time.Second))
	cpu.SetProfileID(pprofile.ProfileID([16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))

	count := sp.Profiles().AppendEmpty()
	count.SampleType().SetTypeStrindex(b.str("samples"))
	count.SampleType().SetUnitStrindex(b.str("count"))
	count.PeriodType().SetTypeStrindex(b.str("cpu"))
	count.PeriodType().SetUnitStrindex(b.str("nanoseconds"))
	count.SetPeriod(period)
	count.SetTime(start)
	count.SetDurationNano(uint64(10 * time.Second))

	// n differs per transport so that the two requests differ in values.
	n := int64(3)
	if transport == "http" {
		n = 5
	}
	add := func(st int32, samples int64, attrs ...int32) {
		s := cpu.Samples().AppendEmpty()
		s.SetStackIndex(st)
		s.AttributeIndices().Append(attrs...)
		s.Values().Append(samples * period)
		c := count.Samples().AppendEmpty()
		c.SetStackIndex(st)
		c.AttributeIndices().Append(attrs...)
		c.Values().Append(samples)
	}
	add(s1, n, thName, thID, pid)
	add(s2, 2, thName, thID, pid)
	add(s3, 1, thName2, thID2, pid)
	// A sample recorded as timestamps only (the value of each is 1).
	ts := count.Samples().AppendEmpty()
	ts.SetStackIndex(s1)
	ts.AttributeIndices().Append(thName2, thID2, pid)
	for i := 0; i < 4; i++ {
		ts.TimestampsUnixNano().Append(uint64(start) + uint64(i)*period)
	}
	return pd
}

func sendGRPC(ctx context.Context, addr string, pd pprofile.Profiles) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := pprofileotlp.NewGRPCClient(conn).Export(ctx, pprofileotlp.NewExportRequestFromProfiles(pd))
	if err != nil {
		return err
	}
	if ps := resp.PartialSuccess(); ps.RejectedProfiles() != 0 || ps.ErrorMessage() != "" {
		return fmt.Errorf("partial success: rejected %d: %s", ps.RejectedProfiles(), ps.ErrorMessage())
	}
	return nil
}

func sendHTTP(ctx context.Context, addr string, pd pprofile.Profiles) error {
	body, err := pprofileotlp.NewExportRequestFromProfiles(pd).MarshalProto()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1development/profiles", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d (%s): %q", res.StatusCode, res.Header.Get("Content-Type"), rb)
	}
	resp := pprofileotlp.NewExportResponse()
	if err := resp.UnmarshalProto(rb); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedProfiles() != 0 || ps.ErrorMessage() != "" {
		return fmt.Errorf("partial success: rejected %d: %s", ps.RejectedProfiles(), ps.ErrorMessage())
	}
	return nil
}

func main() {
	grpcAddr := flag.String("grpc", "", "OTLP/gRPC endpoint HOST:PORT (skipped when empty)")
	httpAddr := flag.String("http", "", "OTLP/HTTP endpoint HOST:PORT (skipped when empty)")
	at := flag.Int64("time", 0, "the profiles' end time, Unix nanoseconds (default now)")
	broken := flag.Bool("broken", false, "break the dictionary: string_table[0] and mapping_table[0] not the zero value")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	now := time.Now()
	if *at != 0 {
		now = time.Unix(0, *at)
	}
	build := func(transport string, now time.Time) pprofile.Profiles {
		pd := build(transport, now)
		if *broken {
			pd.Dictionary().StringTable().SetAt(0, "not-empty")
			pd.Dictionary().MappingTable().At(0).SetMemoryStart(0x1000)
		}
		return pd
	}
	ok := true
	if *grpcAddr != "" {
		if err := sendGRPC(ctx, *grpcAddr, build("grpc", now)); err != nil {
			fmt.Fprintf(os.Stderr, "sendtest: gRPC %s: %v\n", *grpcAddr, err)
			ok = false
		} else {
			fmt.Println("sent grpc")
		}
	}
	if *httpAddr != "" {
		if err := sendHTTP(ctx, *httpAddr, build("http", now)); err != nil {
			fmt.Fprintf(os.Stderr, "sendtest: HTTP %s: %v\n", *httpAddr, err)
			ok = false
		} else {
			fmt.Println("sent http")
		}
	}
	if !ok {
		os.Exit(1)
	}
}
