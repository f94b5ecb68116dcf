//go:build wasip1

// Package policy is the Go kit for modelless policies: the core ABI v1's exports
// (`//go:wasmexport`, built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) around a
// type that implements Policy on the structs of types.go, which are generated from
// policy-abi/schema/.
//
//	type keepEverything struct{}
//
//	func (keepEverything) Decide(*policy.Snapshot) (policy.Decision, error) {
//		return policy.Decision{}, nil
//	}
//
//	func init() { policy.Export(keepEverything{}) }
//	func main() {}
//
// Go's wasip1 runtime imports WASI preview 1; the host links those imports with
// nothing behind them (no files, environment, clock or randomness), so a policy's
// decisions depend on its snapshots alone.
package policy

import (
	"encoding/json"
	"unsafe"
)

// Policy decides a tick.
type Policy interface {
	Decide(snapshot *Snapshot) (Decision, error)
}

// Initialised takes its parameters (JSON) once, before the first tick.
type Initialised interface {
	Init(parameters json.RawMessage) error
}

// Stateful carries its own state to the module that replaces it.
type Stateful interface {
	SaveState() (any, error)
	LoadState(state json.RawMessage) error
}

var served Policy

// Export makes p the policy this module serves; call it from an init function.
func Export(p Policy) { served = p }

// Level is how loud a logged line is; Warn and Error show in the policy's status.
type Level int32

const (
	Error Level = iota
	Warn
	Info
	Debug
	Trace
)

//go:wasmimport modelless log
func hostLog(level int32, ptr unsafe.Pointer, length int32)

// Log writes a line through the host.
func Log(level Level, message string) {
	if len(message) == 0 {
		return
	}
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(message)), int32(len(message)))
}

// Buffers handed to the host, kept reachable until it frees them.
var buffers = map[uint32][]byte{}

func keep(b []byte) int32 {
	if len(b) == 0 {
		b = make([]byte, 1)[:0:1]
	}
	ptr := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	buffers[ptr] = b
	return int32(ptr)
}

func input(ptr, length int32) []byte {
	return buffers[uint32(ptr)][:length]
}

func output(b []byte) int64 {
	return int64(uint64(uint32(keep(b)))<<32 | uint64(uint32(len(b))))
}

func failure(err error) int64 {
	out, _ := json.Marshal(map[string]string{"error": err.Error()})
	return output(out)
}

//go:wasmexport modelless_policy_abi_v1
func marker() {}

//go:wasmexport alloc
func alloc(length int32) int32 { return keep(make([]byte, length)) }

//go:wasmexport dealloc
func dealloc(ptr, _ int32) { delete(buffers, uint32(ptr)) }

//go:wasmexport decide
func decide(ptr, length int32) int64 {
	var snapshot Snapshot
	if err := json.Unmarshal(input(ptr, length), &snapshot); err != nil {
		return failure(err)
	}
	decision, err := served.Decide(&snapshot)
	if err != nil {
		return failure(err)
	}
	if decision.Tasks == nil {
		decision.Tasks = []TaskDecision{}
	}
	out, err := json.Marshal(decision)
	if err != nil {
		return failure(err)
	}
	return output(out)
}

//go:wasmexport init
func initialise(ptr, length int32) int64 {
	if p, ok := served.(Initialised); ok {
		if err := p.Init(json.RawMessage(input(ptr, length))); err != nil {
			return failure(err)
		}
	}
	return output([]byte("{}"))
}

//go:wasmexport save_state
func saveState() int64 {
	p, ok := served.(Stateful)
	if !ok {
		return output([]byte("null"))
	}
	state, err := p.SaveState()
	if err != nil {
		return failure(err)
	}
	out, err := json.Marshal(state)
	if err != nil {
		return failure(err)
	}
	return output(out)
}

//go:wasmexport load_state
func loadState(ptr, length int32) int64 {
	if p, ok := served.(Stateful); ok {
		if err := p.LoadState(json.RawMessage(input(ptr, length))); err != nil {
			return failure(err)
		}
	}
	return output([]byte("{}"))
}
