// Package platforms holds the test that the module type-checks on every
// platform its users build it for (linux, darwin and windows on amd64 and
// arm64, and js/wasm for the browser), and the Windows binary's cross build
// and run under wine. It has no code of its own: see its tests.
package platforms
