// sample: out[0] = the token id drawn from the first n values of x (one
// logits row) by temperature, top-k and top-p, as an f32 (exact below
// 2^24). This is fusion.Sample, and it is internal/sampler's algorithm
// operation for operation (f32, the same order), so both pick the same id:
//   1. y = x * inv_temperature (host-computed 1/T); NaN is never kept.
//      arg = the greedy id of x, hi = x[arg] * inv_temperature (the
//      largest y); every x NaN: 0; hi not finite or top-k 1: arg.
//   2. top-k: kmin = the largest order key K with count(key(y) >= K) >= k
//      (the key of the k-th largest y; 0 when fewer than k are valid),
//      found by a radix select, 8 bits per counting pass (internal/sampler
//      finds the same key bit by bit; the first pass shares step 1's scan,
//      the later ones count only the keys gathered after the first when
//      at most CAP share its digit, and when at most WG do each gathered
//      key is ranked among them at once); kept: key(y) >= kmin.
//   3. q = exp(y - hi) for kept tokens, else 0.
//   4. top-p: pmin = the largest bit pattern P with S(P) >= top_p * S(0),
//      S(P) the sum of the q whose bits are >= P (31 passes; with at
//      most CH survivors, the largest bits of a survivor's q whose S
//      reaches it, each survivor's S summed on its own); kept: those.
//   5. u = Philox4x32-10(counter (step, 0, 0, 0), key (seed_lo, seed_hi))
//      word 0 >> 8, times 2^-24, with step = step[STEP_POS] + step[STEP_ROWS] (the
//      position the new token takes); r = u * total; the id is the first
//      whose running sum passes r, the last kept id if none does.
// Every sum is split into CH (256) chunks of ceil(n / CH) consecutive ids,
// invocation l owning chunks CPI l to CPI l + CPI - 1, each added in id
// order; the chunk sums are added in chunk order by invocation 0. When at
// most CAP ids survive top-k, their ids are gathered in id order (chunk by
// chunk) into workgroup memory and steps 3-5 visit only them: the sums are
// the same, as the skipped q are all 0. A row shaped like a model's logits
// (its k-th largest key found with at most CAPF keys at or above that
// key's first digit) takes fast_pick after the first pass instead: the
// same steps on those candidates and the survivors among them. One
// workgroup of WG invocations; dispatch (1, 1, 1). A CPU driver
// (lavapipe) runs a workgroup as coroutines of its vector width and
// switches through every one at each barrier, which was most of this
// kernel's time there with 256 invocations; Mesa 22.3's llvmpipe also
// runs each coroutine through the kernel's code whether a branch is taken
// or not (its lanes are masked: with 64 invocations this kernel returning
// at its first line cost ~30 us more than a trivial one, its time spread
// over all of its code), and cuts long loops short (one coroutine's 31
// top-p passes over 32000 ids gave wrong ids). The module is specialized by the row's
// length (shaders.SampleVariant): WG = 8 for short rows (one coroutine:
// the whole kernel's code once, where 64 invocations ran it 8 times),
// 64 for long ones (fewer iterations per invocation). The tokens the program's mask
// rules out (lib/token_mask.wgsl) read as -inf, as the host masks them.
// With p.advance set (a decode program's step tensor, a DecodeStep),
// invocation 0 advances the step after writing the id, past the last
// barrier, when every invocation has read the step words (wgsl/step.wgsl's
// advance, lib/step_advance.wgsl): a multi-step submission needs no
// advance dispatch.
//
// The kernel reads no workgroup word it has not written (every array and
// flag is written before the barrier ahead of its first read; kept and
// offs only where they were filled), so the Vulkan module goes without
// naga's zero-initialization of workgroup memory: lavapipe (Mesa 22.3)
// unrolls that store of the 8 KiB kept array and took 15 s to create this
// one pipeline. The marker line below tells shaders/internal/spirvgen:
// spirvgen: no-workgroup-zero-init

struct SampleParams {
    n: u32,
    inv_temperature: f32,
    top_k: u32,
    top_p: f32,
    seed_lo: u32,
    seed_hi: u32,
    rule_at: u32, // 0: the rule above; else the word of step holding it (a DecodeStep's inv_temperature)
    advance: u32, // 1: advance the step tensor (a DecodeStep) after the pick (lib/step_advance.wgsl)
}

// Rule is the sampling rule the kernel runs: the uniform block's, or the
// step tensor's when p.rule_at is set (the host changes it there without
// recompiling: gpu.SamplingSetter).
struct Rule {
    inv_temperature: f32,
    top_k: u32,
    top_p: f32,
    seed_lo: u32,
    seed_hi: u32,
}

var<private> rule: Rule;
// step_rule is the rule read from the step tensor (p.rule_at), loaded
// by every invocation with workgroupUniformLoad.
var<workgroup> step_rule: Rule;

@group(0) @binding(0) var<uniform> p: SampleParams;
@group(0) @binding(1) var<storage, read_write> step: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;

// include: token_mask
// include: step_advance

// CH is internal/sampler.Chunks, the chunks every sum is split into; WG
// invocations (the variant's constant, with CPI = CH / WG) own CPI
// consecutive chunks each.
const CH: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> red_f: array<f32, 257>;
var<workgroup> red_u: array<u32, 256>;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;
var<workgroup> pick: atomic<u32>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> sel: vec3<u32>; // radix select: prefix, remaining rank, found
// CAP is how many top-k survivors are gathered (more: the whole row is
// visited); offs[t] is where chunk t's survivors start.
const CAP: u32 = 2048u;
var<workgroup> kept: array<u32, 2048>;
var<workgroup> offs: array<u32, 257>;
// MINE: how many kept ids an invocation notes in its registers.
const MINE: u32 = 8u;
var<workgroup> last1: atomic<u32>;
// candidates: how many keys (the candidates) were gathered into kept, those
// matching top-k's digits found by then (NONE: none gathered yet); inbin:
// how many match the digits found so far (NONE: the rank was not found);
// ncand counts the gathered.
var<workgroup> candidates: u32;
var<workgroup> inbin: u32;
var<workgroup> ncand: atomic<u32>;
// kth: top-k's key when at most WG candidates are ranked directly; pbest:
// top-p's cut when at most WG survivors are searched directly.
var<workgroup> kth: atomic<u32>;
var<workgroup> pbest: atomic<u32>;
// The short path (fast_pick): fastm is how many candidates it gathers
// (NONE: the row takes the general path); nmatch and nsurv count the keys
// it ranks and the ids that survive top-k.
var<workgroup> fastm: u32;
var<workgroup> nmatch: atomic<u32>;
var<workgroup> nsurv: atomic<u32>;
// CAPF: the short path's candidates, their ids in kept[0, CAPF) and their
// keys in kept[CAPF, 2 CAPF). RANK: at most this many keys sharing the
// digits found so far are ranked directly. BITS: rows up to this long put
// the survivors in id order with a bitmap (hist's 256 words); longer rows
// rank their ids.
const CAPF: u32 = 1024u;
const RANK: u32 = 32u;
const BITS: u32 = 8192u;

// okey maps f32 bits to a u32 in the numbers' order.
fn okey(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (b & 0x80000000u) != 0u {
        return ~b;
    }
    return b | 0x80000000u;
}

// mulhilo is the 64-bit product of a and b as (high word, low word).
fn mulhilo(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    let hi = a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
    return vec2<u32>(hi, a * b);
}

// philox is Philox4x32-10 (internal/philox.Block).
fn philox(c0: vec4<u32>, k0: vec2<u32>) -> vec4<u32> {
    var c = c0;
    var k = k0;
    for (var r = 0u; r < 10u; r++) {
        if r > 0u {
            k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
        }
        let x0 = mulhilo(0xD2511F53u, c.x);
        let x1 = mulhilo(0xCD9E8D57u, c.z);
        c = vec4<u32>(x1.x ^ c.y ^ k.x, x1.y, x0.x ^ c.w ^ k.y, x0.y);
    }
    return c;
}

// at is the id of the j-th element visited: j itself, or the j-th gathered
// survivor.
fn at(j: u32, compact: bool) -> u32 {
    if compact {
        return kept[j];
    }
    return j;
}

// prob is q of step 3, 0 below the top-p cut pmin (0: none).
fn prob(i: u32, hi: f32, kmin: u32, pmin: u32) -> f32 {
    let y = logit(i) * rule.inv_temperature;
    if !(y == y) || okey(y) < kmin {
        return 0.0;
    }
    let q = exp(y - hi);
    if bitcast<u32>(q) < pmin {
        return 0.0;
    }
    return q;
}

// scan_parts, once every invocation has stored the parts of its chunks
// in red_u (as bits), sets red_f[t] to the sum of the parts before chunk
// t's, in order (invocation 0 adds them), and red_f[CH] to the total.
fn scan_parts(l: u32) {
    workgroupBarrier();
    if l == 0u {
        var base = 0.0;
        for (var t = 0u; t < CH; t++) {
            red_f[t] = base;
            base += bitcast<f32>(red_u[t]);
        }
        red_f[CH] = base;
    }
    workgroupBarrier();
}

// span is where chunk t's ids are visited: kept[a, e) when compact (offs
// holds each chunk's start), else the ids [a, e) themselves.
fn span(t: u32, compact: bool, c: u32, n: u32) -> vec2<u32> {
    if compact {
        return vec2<u32>(offs[t], offs[t + 1u]);
    }
    return vec2<u32>(min(t * c, n), min((t + 1u) * c, n));
}

// chunked returns, to every invocation, the chunked sum of the q (cut at
// kmin, not at top-p) whose bits are at least pcand; red_f then holds the
// running sums before each chunk (red_f[CH] is the total).
fn chunked(l: u32, c: u32, n: u32, compact: bool, hi: f32, kmin: u32, pcand: u32) -> f32 {
    for (var k = 0u; k < CPI; k++) {
        let t = l * CPI + k;
        let s = span(t, compact, c, n);
        var part = 0.0;
        for (var j = s.x; j < s.y; j++) {
            let q = prob(at(j, compact), hi, kmin, 0u);
            if bitcast<u32>(q) >= pcand {
                part += q;
            }
        }
        red_u[t] = bitcast<u32>(part);
    }
    scan_parts(l);
    let total = red_f[CH];
    workgroupBarrier();
    return total;
}

// survivor_sums is chunked's sum for at most WG gathered survivors whose q
// are in best_v and chunks in best_i, by one invocation: each chunk's q in
// id order, the chunk sums in chunk order (an empty chunk adds 0, which
// changes no sum). x: the sum of all; y: of those whose bits are at least
// pcand.
fn survivor_sums(kn: u32, pcand: u32) -> vec2<f32> {
    var total = vec2<f32>(0.0);
    var part = vec2<f32>(0.0);
    var chunk = NONE;
    for (var j = 0u; j < kn; j++) {
        let t = best_i[j];
        if t != chunk {
            total += part;
            part = vec2<f32>(0.0);
            chunk = t;
        }
        let q = best_v[j];
        part.x += q;
        if bitcast<u32>(q) >= pcand {
            part.y += q;
        }
    }
    return total + part;
}

// clear_hist zeroes invocation l's words of hist.
fn clear_hist(l: u32) {
    for (var t = l; t < 256u; t += WG) {
        atomicStore(&hist[t], 0u);
    }
}

// top_p_survivors: for each of kn survivors (at most CH) whose q are in
// best_v and chunks in best_i, in id order, S(bits of q_j) summed on its
// own in the chunked order; pbest becomes the largest such bits with S >=
// top_p of the total. S falls (or stays) as the cut rises and changes only
// at a q's bits, so this is the largest cut top-p's bit search finds.
fn top_p_survivors(l: u32, kn: u32) {
    for (var s = l; s < kn; s += WG) {
        let v = bitcast<u32>(best_v[s]);
        let sums = survivor_sums(kn, v);
        if sums.y >= rule.top_p * sums.x {
            atomicMax(&pbest, v);
        }
    }
}

// digit_scan is invocation 0's step of top-k's radix select: the bin of
// the rank left (sel.y) in the histogram of the digit at shift, scanned
// from the top; sel gains the digit and the rank within its bin, inbin
// the count of the bin (NONE: the rank was not found).
fn digit_scan(shift: u32) {
    let s0 = sel;
    var acc = 0u;
    var found = 0u;
    var b = 0u;
    var inBin = 0u;
    for (var j = 0u; j < 256u; j++) {
        let c = atomicLoad(&hist[255u - j]);
        if acc + c >= s0.y {
            b = 255u - j;
            found = 1u;
            inBin = c;
            break;
        }
        acc += c;
    }
    sel = vec3<u32>(s0.x | (b << shift), s0.y - acc, found);
    inbin = select(NONE, inBin, found == 1u);
}

// fast_pick is steps 2 to 5 for a row whose candidates (the valid keys
// whose first digit is at least the k-th largest key's: fastm of them, from
// the first digit's histogram) fit in kept: the later passes read those
// instead of the row. It gathers their ids and keys (one pass over the
// row), finds the k-th largest key among them (radix passes over those of
// its first digit, ranked directly once at most RANK share its digits so
// far), and, when at most WG survive top-k, puts the survivors in id order
// (a bitmap, or each id ranked among them), computes their q once, the
// top-p cut as the general path's survivors do, and draws with invocation
// 0 walking them in id order: the same chunked sums, added in the same
// order (a chunk without survivors adds 0, which changes no sum), so the
// same id as the general path. It writes out[0] and returns true, or, when
// more than WG survive, leaves top-k's key in kmin for the general path's
// steps and returns false.
fn fast_pick(l: u32, n: u32, c: u32, hi: f32, top_p: f32, kmin_out: ptr<function, u32>) -> bool {
    let b0 = sel.x >> 24u;
    for (var i = l; i < n; i += WG) {
        let y = logit(i) * rule.inv_temperature;
        if y == y {
            let key = okey(y);
            if (key >> 24u) >= b0 {
                let j = atomicAdd(&ncand, 1u);
                if j < CAPF {
                    kept[j] = i;
                    kept[CAPF + j] = key;
                }
            }
        }
    }
    // (workgroupUniformLoad waits for every invocation's writes.)
    var inb = workgroupUniformLoad(&inbin);
    let m = min(atomicLoad(&ncand), CAPF);
    // The later digits, among the candidates of the first digit's bin.
    var d = 1u;
    loop {
        if d == 4u || inb <= RANK {
            break;
        }
        let shift = 24u - 8u * d;
        let pre = sel.x;
        clear_hist(l);
        workgroupBarrier();
        let mask = 0xffffffffu << (shift + 8u);
        for (var j = l; j < m; j += WG) {
            let key = kept[CAPF + j];
            if (key & mask) == (pre & mask) {
                atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
        }
        workgroupBarrier();
        if l == 0u {
            digit_scan(shift);
        }
        inb = workgroupUniformLoad(&inbin);
        d++;
    }
    var kmin = sel.x;
    if d < 4u {
        // At most RANK keys share the d digits found: gathered into hist,
        // the one with fewer than rem larger and at least rem not smaller
        // is the rem-th largest.
        let mask = 0xffffffffu << (32u - 8u * d);
        let pre = sel.x & mask;
        let rem = sel.y;
        for (var j = l; j < m; j += WG) {
            let key = kept[CAPF + j];
            if (key & mask) == pre {
                let at = atomicAdd(&nmatch, 1u);
                if at < RANK {
                    atomicStore(&hist[at], key);
                }
            }
        }
        workgroupBarrier();
        let cnt = min(atomicLoad(&nmatch), RANK);
        for (var s = l; s < cnt; s += WG) {
            let key = atomicLoad(&hist[s]);
            var gt = 0u;
            var ge = 0u;
            for (var j = 0u; j < cnt; j++) {
                let o = atomicLoad(&hist[j]);
                gt += select(0u, 1u, o > key);
                ge += select(0u, 1u, o >= key);
            }
            if gt < rem && ge >= rem {
                atomicMax(&kth, key);
            }
        }
        workgroupBarrier();
        kmin = atomicLoad(&kth);
    }
    // The survivors: marked in a bitmap, or listed in best_i in any order.
    let bitmap = n <= BITS;
    clear_hist(l);
    workgroupBarrier();
    for (var j = l; j < m; j += WG) {
        if kept[CAPF + j] >= kmin {
            let id = kept[j];
            let at = atomicAdd(&nsurv, 1u);
            if bitmap {
                atomicOr(&hist[id >> 5u], 1u << (id & 31u));
            } else if at < CH {
                best_i[at] = id;
            }
        }
    }
    workgroupBarrier();
    if l == 0u {
        fastm = atomicLoad(&nsurv);
    }
    let kn = workgroupUniformLoad(&fastm);
    if kn > CH {
        *kmin_out = kmin;
        return false;
    }
    // Their ids in id order, into offs.
    if bitmap {
        if l == 0u {
            var j = 0u;
            for (var w = 0u; w < (n + 31u) / 32u; w++) {
                var bits = atomicLoad(&hist[w]);
                while bits != 0u {
                    offs[j] = w * 32u + firstTrailingBit(bits);
                    bits &= bits - 1u;
                    j++;
                }
            }
        }
    } else {
        for (var s = l; s < kn; s += WG) {
            let id = best_i[s];
            var at = 0u;
            for (var j = 0u; j < kn; j++) {
                at += select(0u, 1u, best_i[j] < id);
            }
            offs[at] = id;
        }
    }
    workgroupBarrier();
    // 3. q and the chunk of each survivor, in id order.
    for (var s = l; s < kn; s += WG) {
        let id = offs[s];
        best_v[s] = prob(id, hi, kmin, 0u);
        best_i[s] = id / c;
    }
    workgroupBarrier();
    // 4. Top-p, as the general path's survivors.
    var pmin = 0u;
    if top_p > 0.0 && top_p < 1.0 {
        top_p_survivors(l, kn);
        workgroupBarrier();
        pmin = atomicLoad(&pbest);
    }
    // 5. The draw: invocation 0 walks the survivors in id order, each
    // chunk's running sum starting from the sum of the chunks before it.
    if l == 0u {
        let total = survivor_sums(kn, pmin).y;
        let b = philox(vec4<u32>(step[STEP_POS] + step[STEP_ROWS], 0u, 0u, 0u), vec2<u32>(rule.seed_lo, rule.seed_hi));
        let r = f32(b.x >> 8u) * (1.0 / 16777216.0) * total;
        var base = 0.0;
        var part = 0.0;
        var acc = 0.0;
        var chunk = NONE;
        var id = NONE;
        var last = NONE;
        for (var j = 0u; j < kn; j++) {
            let t = best_i[j];
            if t != chunk {
                base += part;
                part = 0.0;
                acc = base;
                chunk = t;
            }
            var q = best_v[j];
            if bitcast<u32>(q) < pmin {
                q = 0.0;
            }
            acc += q;
            part += q;
            if q > 0.0 {
                if acc > r {
                    id = offs[j];
                    break;
                }
                last = offs[j];
            }
        }
        if id == NONE {
            id = last;
        }
        out[0] = f32(id);
        advance_step(id);
    }
    return true;
}

@compute @workgroup_size(WG)
fn sample(@builtin(local_invocation_id) lid: vec3<u32>) {
    // No rows: a step a multi-step submission's advance kernel turned into
    // a no-op (wgsl/step.wgsl).
    let l = lid.x;
    if step_word_uniform(l, STEP_ROWS) == 0u {
        return;
    }
    load_mask();
    // The rule is read into a function-scope variable first: the branches
    // around barriers test it (here and, passed down, in fast_pick), and
    // WGSL's uniformity analysis counts a private variable's value as
    // non-uniform (Tint rejects the module); the step tensor's words go
    // through workgroup memory for the same reason (read_write storage,
    // lib/step_advance.wgsl's step_word_uniform).
    var rl = Rule(p.inv_temperature, p.top_k, p.top_p, p.seed_lo, p.seed_hi);
    if p.rule_at != 0u {
        let a = p.rule_at;
        if l == 0u {
            step_rule = Rule(bitcast<f32>(step[a + RULE_INV_TEMPERATURE]), step[a + RULE_TOP_K], bitcast<f32>(step[a + RULE_TOP_P]), step[a + RULE_SEED_LO], step[a + RULE_SEED_HI]);
        }
        rl = workgroupUniformLoad(&step_rule);
    }
    rule = rl;
    let n = p.n;
    let c = (n + CH - 1u) / CH;
    let lo = min(l * CPI * c, n);
    let hi_i = min(lo + CPI * c, n);
    if l == 0u {
        atomicStore(&pick, NONE);
        atomicStore(&last1, 0u);
        atomicStore(&kth, 0u);
        atomicStore(&pbest, 0u);
        atomicStore(&nmatch, 0u);
        atomicStore(&nsurv, 0u);
        fastm = NONE;
    }
    // 1. The greedy id (the largest logit, the lowest index on ties, NaN
    // never) and hi, its logit scaled: the largest scaled logit, as
    // rounding is monotonic. The same pass counts the first digit of
    // top-k's radix select (step 2).
    let topk = rl.top_k > 0u;
    clear_hist(l);
    if l == 0u {
        sel = vec3<u32>(0u, rule.top_k, 1u);
        candidates = NONE;
        atomicStore(&ncand, 0u);
    }
    workgroupBarrier();
    var bv = 0.0;
    var bi = NONE;
    for (var i = l; i < n; i += WG) {
        let v = logit(i);
        if v == v && (bi == NONE || v > bv) {
            bv = v;
            bi = i;
        }
        if topk {
            let y = v * rule.inv_temperature;
            if y == y {
                atomicAdd(&hist[okey(y) >> 24u], 1u);
            }
        }
    }
    best_v[l] = bv;
    best_i[l] = bi;
    workgroupBarrier();
    // Invocation 0 picks among the 256 (the largest, the lowest id on
    // ties: the same pick in any order), one barrier instead of a tree's
    // eight (each a switch through every invocation on a CPU driver).
    if l == 0u {
        var v = best_v[0];
        var id = best_i[0];
        for (var t = 1u; t < WG; t++) {
            let oi = best_i[t];
            if oi != NONE && (id == NONE || best_v[t] > v || (best_v[t] == v && oi < id)) {
                v = best_v[t];
                id = oi;
            }
        }
        best_v[0] = v;
        best_i[0] = id;
    }
    workgroupBarrier();
    let hi = best_v[0] * rule.inv_temperature;
    let arg = best_i[0];
    // 2. Top-k: a radix select of the k-th largest order key, 8 bits a
    // pass: the histogram of the next digit among the keys matching the
    // digits found so far, scanned from the top for the rank left. After
    // the first digit that at most CAP keys share with the ones before it,
    // those keys (the candidates) are gathered into kept, and the later
    // passes count only them: the same histograms, from one more pass over
    // the row instead of up to three.
    var kmin = 0u;
    if topk {
        var fast = false;
        for (var d = 0u; d < 4u; d++) {
            // At most WG candidates: ranked directly below.
            if d > 0u && workgroupUniformLoad(&candidates) <= WG {
                break;
            }
            let shift = 24u - 8u * d;
            let s0 = sel;
            if d > 0u {
                clear_hist(l);
                workgroupBarrier();
                // The digits above shift must match s0.x's.
                let mask = 0xffffffffu << (shift + 8u);
                let fromKept = workgroupUniformLoad(&candidates) <= CAP;
                let lim = select(n, atomicLoad(&ncand), fromKept);
                for (var j = l; j < lim; j += WG) {
                    var key = 0u;
                    var ok = true;
                    if fromKept {
                        key = kept[j];
                    } else {
                        let y = logit(j) * rule.inv_temperature;
                        ok = y == y;
                        key = okey(y);
                    }
                    if ok && (key & mask) == (s0.x & mask) {
                        atomicAdd(&hist[(key >> shift) & 255u], 1u);
                    }
                }
                workgroupBarrier();
            }
            if l == 0u && s0.z == 1u {
                digit_scan(shift);
                // The short path takes a row whose k-th largest key is
                // found, whose candidates (the keys of its first digit
                // and above: the rank gone is how many lie above) fit, and
                // whose id is drawn (neither top-k 1 nor a largest logit
                // that is not finite).
                let s1 = sel;
                let m = s0.y - s1.y + inbin;
                if d == 0u && s1.z == 1u && m <= CAPF && rule.top_k != 1u && arg != NONE && abs(hi) <= 0x1.fffffep+127f {
                    fastm = m;
                }
            } else if l == 0u {
                inbin = NONE;
            }
            workgroupBarrier();
            if d == 0u {
                fast = workgroupUniformLoad(&fastm) != NONE;
                if fast {
                    break;
                }
            }
            if d < 3u && workgroupUniformLoad(&candidates) == NONE {
                if workgroupUniformLoad(&inbin) <= CAP {
                    // Gather the keys matching the digits so far (in any
                    // order: they are only counted).
                    let m = 0xffffffffu << shift;
                    let top = sel.x & m;
                    for (var i = l; i < n; i += WG) {
                        let y = logit(i) * rule.inv_temperature;
                        if y == y {
                            let key = okey(y);
                            if (key & m) == top {
                                kept[atomicAdd(&ncand, 1u)] = key;
                            }
                        }
                    }
                    if l == 0u {
                        candidates = inbin;
                    }
                    workgroupBarrier();
                }
            }
        }
        if fast {
            if fast_pick(l, n, c, hi, rl.top_p, &kmin) {
                return;
            }
        } else {
            let cnd = workgroupUniformLoad(&candidates);
            if cnd <= WG {
                // Invocation j holds candidate j's key; the key with fewer
                // than rem larger and at least rem not smaller is the rem-th
                // largest: the key the later digits would spell (one barrier
                // instead of three per digit).
                let rem = sel.y;
                if l < cnd {
                    let key = kept[l];
                    var gt = 0u;
                    var ge = 0u;
                    for (var j = 0u; j < cnd; j++) {
                        let o = kept[j];
                        gt += select(0u, 1u, o > key);
                        ge += select(0u, 1u, o >= key);
                    }
                    if gt < rem && ge >= rem {
                        atomicMax(&kth, key);
                    }
                }
                workgroupBarrier();
                kmin = atomicLoad(&kth);
            } else {
                let s1 = sel;
                if s1.z == 1u {
                    kmin = s1.x;
                }
            }
        }
    }
    // Gather the survivors of top-k in id order when they fit: each chunk's
    // count, their running sum, then each chunk's ids at its offset (an
    // invocation's chunks are consecutive, so are their survivors). The
    // first MINE ids an invocation keeps are noted while counting, so one
    // keeping at most MINE fills kept without a second pass.
    var cnt = 0u;
    var mine: array<u32, MINE>;
    for (var k = 0u; k < CPI; k++) {
        let t = l * CPI + k;
        var ct = 0u;
        for (var i = min(t * c, n); i < min((t + 1u) * c, n); i++) {
            let y = logit(i) * rule.inv_temperature;
            if y == y && okey(y) >= kmin {
                if cnt < MINE {
                    mine[cnt] = i;
                }
                cnt++;
                ct++;
            }
        }
        red_u[t] = ct;
    }
    workgroupBarrier();
    if l == 0u {
        var o = 0u;
        for (var t = 0u; t < CH; t++) {
            offs[t] = o;
            o += red_u[t];
        }
        offs[CH] = o;
    }
    workgroupBarrier();
    let compact = offs[CH] <= CAP;
    if compact {
        let a = offs[l * CPI];
        if cnt <= MINE {
            for (var j = 0u; j < cnt; j++) {
                kept[a + j] = mine[j];
            }
        } else {
            var o = a;
            for (var i = lo; i < hi_i; i++) {
                let y = logit(i) * rule.inv_temperature;
                if y == y && okey(y) >= kmin {
                    kept[o] = i;
                    o++;
                }
            }
        }
    }
    workgroupBarrier();
    // 4. Top-p.
    var pmin = 0u;
    if rl.top_p > 0.0 && rl.top_p < 1.0 {
        let kn = workgroupUniformLoad(&offs[CH]);
        if kn <= CH {
            // At most CH survivors, gathered: q_j and its chunk once
            // (into best_v and best_i, free since hi and arg were read),
            // then top_p_survivors: two barriers, not 93.
            for (var s = l; s < kn; s += WG) {
                let i = kept[s];
                best_v[s] = prob(i, hi, kmin, 0u);
                best_i[s] = i / c;
            }
            workgroupBarrier();
            top_p_survivors(l, kn);
            workgroupBarrier();
            pmin = atomicLoad(&pbest);
        } else {
            let goal = rule.top_p * chunked(l, c, n, compact, hi, kmin, 0u);
            for (var bit = 30; bit >= 0; bit--) {
                let cand = pmin | (1u << u32(bit));
                if chunked(l, c, n, compact, hi, kmin, cand) >= goal {
                    pmin = cand;
                }
            }
        }
    }
    // 5. The draw: the running sums of the kept q, chunk by chunk.
    for (var k = 0u; k < CPI; k++) {
        let t = l * CPI + k;
        let s = span(t, compact, c, n);
        var part = 0.0;
        for (var j = s.x; j < s.y; j++) {
            part += prob(at(j, compact), hi, kmin, pmin);
        }
        red_u[t] = bitcast<u32>(part);
    }
    scan_parts(l);
    let b = philox(vec4<u32>(step[STEP_POS] + step[STEP_ROWS], 0u, 0u, 0u), vec2<u32>(rule.seed_lo, rule.seed_hi));
    let r = f32(b.x >> 8u) * (1.0 / 16777216.0) * red_f[CH];
    var lastLocal = 0u;
    for (var k = 0u; k < CPI; k++) {
        let t = l * CPI + k;
        let s = span(t, compact, c, n);
        var acc = red_f[t];
        var picked = false;
        for (var j = s.x; j < s.y; j++) {
            let i = at(j, compact);
            let q = prob(i, hi, kmin, pmin);
            acc += q;
            if q > 0.0 {
                if acc > r {
                    atomicMin(&pick, i);
                    picked = true;
                    break;
                }
                lastLocal = i + 1u;
            }
        }
        if picked {
            break;
        }
    }
    atomicMax(&last1, lastLocal);
    workgroupBarrier();
    if l == 0u {
        var id = atomicLoad(&pick);
        if arg == NONE {
            id = 0u;
        } else if !(abs(hi) <= 0x1.fffffep+127f) || rule.top_k == 1u {
            id = arg;
        } else if id == NONE {
            id = atomicLoad(&last1) - 1u;
        }
        out[0] = f32(id);
        advance_step(id);
    }
}
