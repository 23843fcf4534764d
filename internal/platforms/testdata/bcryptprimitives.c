// A stand-in for Windows' bcryptprimitives.dll, for running gpurun.exe
// under Debian 12's wine 8.0, which lacks it: Rust's standard library in
// wgpu-native imports ProcessPrng from it (Windows 10 and later have it).
// ProcessPrng fills a buffer with random bytes and always succeeds; this
// one takes them from RtlGenRandom (advapi32's SystemFunction036), which
// wine has. Only the Windows cross-build test builds it, beside the .exe.
#include <windows.h>
#include <ntsecapi.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!RtlGenRandom(data, n)) {
			return FALSE;
		}
		data += n;
		len -= n;
	}
	return TRUE;
}
